"""Tianshou 2.x's PPO on CartPole-v1 with rlfleet's tuned-example hyperparameters.

The loop is Tianshou's on-policy training step without its Trainer (whose early stop looks at
one collect's or a test run's returns, not the last 100 training episodes): `Collector.collect`
of envs x steps, `PPO.update` over the buffer (`repeat` epochs of minibatches), the buffer
cleared, as `OnPolicyTrainer` does. Tianshou steps a `BaseVectorEnv` of single envs
(`DummyVectorEnv` in process; Subproc/Shmem/Ray across processes); it has no batched
CartPole of its own, so the batched setting is the same code with 64 envs.
"""
from __future__ import annotations

import gymnasium as gym
import torch
import torch.nn as nn
from tianshou.algorithm import PPO
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.utils.net.common import Net
from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic
from tianshou.utils.torch_utils import policy_within_training_step, torch_train_mode

import _common

args = _common.parse_args()
hp = args.hp
_common.pin_one_thread()
torch.manual_seed(args.seed)
N, T = hp["num_envs"], hp["n_steps"]
envs = DummyVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(N)])
envs.seed(args.seed)
space = envs.observation_space[0]
act = {"tanh": nn.Tanh, "relu": nn.ReLU}[hp["activation"]]


def body() -> Net:
    return Net(state_shape=space.shape, hidden_sizes=list(hp["hiddens"]), activation=act)


actor_body = body()
actor = DiscreteActor(preprocess_net=actor_body, action_shape=envs.action_space[0].n, softmax_output=False)
critic = DiscreteCritic(preprocess_net=actor_body if hp["shared"] else body())
policy = DiscreteActorPolicy(actor=actor, action_space=envs.action_space[0], observation_space=space)
algorithm = PPO(
    policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=hp["lr"], eps=hp["adam_eps"]),
    eps_clip=hp["clip"], value_clip=False, advantage_normalization=hp["norm_adv"], vf_coef=hp["vf_coef"],
    ent_coef=hp["ent_coef"], max_grad_norm=hp["max_grad_norm"], gae_lambda=hp["gae_lambda"], gamma=hp["gamma"],
)
collector = Collector(algorithm, envs, VectorReplayBuffer(N * T, N))
collector.reset()
progress = _common.Progress(hp)
progress.begin()
while not progress.done():
    with policy_within_training_step(policy):
        stats = collector.collect(n_step=N * T)
        progress.steps += stats.n_collected_steps
        progress.add_returns(stats.returns)
        with torch_train_mode(algorithm):
            algorithm.update(buffer=collector.buffer, batch_size=hp["minibatch"], repeat=hp["epochs"])
    collector.reset_buffer(keep_statistics=True)
progress.emit()
