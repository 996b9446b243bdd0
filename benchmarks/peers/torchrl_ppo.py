"""TorchRL's PPO (`Collector`, `GAE`, `ClipPPOLoss`, a `ReplayBuffer` of minibatches
without replacement, as in TorchRL's PPO tutorial) on CartPole-v1 with rlfleet's tuned-example
hyperparameters.

8-env setting: `SerialEnv` of 8 `GymEnv`s (TorchRL's in-process batch of single envs). Batched
setting: `GymWrapper` around a Gymnasium `SyncVectorEnv` of 64 (same-step autoreset), one
TorchRL env with batch size 64 (TorchRL refuses Gymnasium's batched CartPole, whose autoreset
is next-step only). Returns come
from the `RewardSum` transform at each `done`.
"""
from __future__ import annotations

import gymnasium as gym
import torch
import torch.nn as nn
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
from torchrl.envs import GymEnv, GymWrapper, RewardSum, SerialEnv, TransformedEnv
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import _common

args = _common.parse_args()
hp = args.hp
_common.pin_one_thread()
torch.manual_seed(args.seed)
N, T = hp["num_envs"], hp["n_steps"]
if hp["batched"]:
    # TorchRL's GymWrapper takes a Gymnasium vector env only with same-step or no autoreset;
    # Gymnasium's batched CartPole (`vector_entry_point`) resets on the next step only, and
    # GymEnv(num_envs=64) would start 64 processes (AsyncVectorEnv). So: one SyncVectorEnv.
    venv = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(N)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    base = GymWrapper(venv)
else:
    base = SerialEnv(N, lambda: GymEnv("CartPole-v1"))
env = TransformedEnv(base, RewardSum())
env.set_seed(args.seed)
act = {"tanh": nn.Tanh, "relu": nn.ReLU}[hp["activation"]]
n_act, n_obs = env.action_spec.shape[-1], env.observation_spec["observation"].shape[-1]
actor = ProbabilisticActor(
    TensorDictModule(MLP(in_features=n_obs, out_features=n_act, num_cells=list(hp["hiddens"]), activation_class=act),
                     in_keys=["observation"], out_keys=["logits"]),
    spec=env.action_spec, in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True,
)
value = ValueOperator(MLP(in_features=n_obs, out_features=1, num_cells=list(hp["hiddens"]), activation_class=act), in_keys=["observation"])
advantage = GAE(gamma=hp["gamma"], lmbda=hp["gae_lambda"], value_network=value, average_gae=False)
loss_fn = ClipPPOLoss(
    actor_network=actor, critic_network=value, clip_epsilon=hp["clip"], entropy_bonus=hp["ent_coef"] > 0,
    entropy_coeff=hp["ent_coef"], critic_coeff=hp["vf_coef"], loss_critic_type="l2",
    normalize_advantage=hp["norm_adv"],
)
params = list(loss_fn.parameters())
opt = torch.optim.Adam(params, lr=hp["lr"], eps=hp["adam_eps"])
collector = Collector(env, actor, frames_per_batch=N * T, total_frames=-1)
buffer = ReplayBuffer(storage=LazyTensorStorage(N * T), sampler=SamplerWithoutReplacement(), batch_size=hp["minibatch"])
progress = _common.Progress(hp)
progress.begin()
for data in collector:
    progress.steps += data.numel()
    done = data["next", "done"].squeeze(-1)
    progress.add_returns(data["next", "episode_reward"][done].flatten().tolist())
    with torch.no_grad():
        advantage(data)
    buffer.empty()
    buffer.extend(data.reshape(-1))
    for _ in range(hp["epochs"]):
        for _ in range(max(1, (N * T) // hp["minibatch"])):
            losses = loss_fn(buffer.sample())
            loss = losses["loss_objective"] + losses["loss_critic"] + losses.get("loss_entropy", 0.0)
            opt.zero_grad()
            loss.backward()
            if hp["max_grad_norm"] is not None:
                nn.utils.clip_grad_norm_(params, hp["max_grad_norm"])
            opt.step()
    if progress.done():
        break
collector.shutdown()
progress.emit()
