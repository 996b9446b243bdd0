"""RLlib 2.x's PPO (its current API stack: EnvRunner, RLModule, Learner) on CartPole-v1 with
rlfleet's tuned-example hyperparameters, on one process: the local EnvRunner and the local
Learner (`num_env_runners=0`, `num_learners=0`).

RLlib's env runner steps a Gymnasium vector env: 8-env setting `gym_env_vectorize_mode="sync"`
(SyncVectorEnv, RLlib's default), batched setting `"vector_entry_point"` (Gymnasium's batched
CartPole), the key rlfleet took the name from. The threshold is RLlib's own
`episode_return_mean` over its last 100 episodes (`metrics_num_episodes_for_smoothing`).
"""
from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import _common  # noqa: E402

args = _common.parse_args()
hp = args.hp
_common.pin_one_thread()

import ray  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig  # noqa: E402

# Loopback only, two CPUs (the machine's), no dashboard.
ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0, num_envs_per_env_runner=hp["num_envs"], rollout_fragment_length=hp["n_steps"],
                 gym_env_vectorize_mode="vector_entry_point" if hp["batched"] else "sync")
    .learners(num_learners=0)
    .training(train_batch_size_per_learner=hp["num_envs"] * hp["n_steps"], minibatch_size=hp["minibatch"],
              num_epochs=hp["epochs"], lr=hp["lr"], gamma=hp["gamma"], lambda_=hp["gae_lambda"],
              clip_param=hp["clip"], vf_loss_coeff=hp["vf_coef"], entropy_coeff=hp["ent_coef"],
              grad_clip=hp["max_grad_norm"], use_kl_loss=False, kl_coeff=0.0, vf_clip_param=1e9)
    .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(hp["hiddens"]), fcnet_activation=hp["activation"],
                                               vf_share_layers=hp["shared"]))
    .reporting(metrics_num_episodes_for_smoothing=hp["window"])
    .debugging(seed=args.seed)
)
algo = config.build_algo()
progress = _common.Progress(hp)
progress.begin()
while not progress.done():
    result = algo.train()
    runners = result["env_runners"]
    progress.steps = int(result.get("num_env_steps_sampled_lifetime", runners.get("num_env_steps_sampled_lifetime", 0)))
    if "episode_return_mean" in runners:
        progress.set_library_window(runners["episode_return_mean"], runners["num_episodes_lifetime"])
progress.emit(rllib=ray.__version__)
algo.stop()
ray.shutdown()
