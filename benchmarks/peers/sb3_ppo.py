"""Stable-Baselines3's PPO on CartPole-v1 with rlfleet's tuned-example hyperparameters.

SB3 steps a `VecEnv`, one env after another in `DummyVecEnv`; it has no batched-env path
(its VecEnv API does not take a Gymnasium `VectorEnv`), so the batched setting is the same
code with the batched setting's 64 envs and hyperparameters. The threshold is checked at
each rollout's end on SB3's own buffer of the last 100 episodes (`ep_info_buffer`).
"""
from __future__ import annotations

import torch.nn as nn
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

import _common

args = _common.parse_args()
hp = args.hp
_common.pin_one_thread()
progress = _common.Progress(hp)


class StopAt450(BaseCallback):
    """Stops at the first step of the rollout after the update that reached the threshold (SB3
    stops learn() when `_on_step` returns False), as rlfleet checks after each train()."""

    def _on_training_start(self) -> None:
        progress.begin()

    def _on_rollout_end(self) -> None:
        progress.steps = self.model.num_timesteps
        progress.returns.clear()
        progress.add_returns(ep["r"] for ep in self.model.ep_info_buffer)

    def _on_step(self) -> bool:
        return not progress.done()


env = make_vec_env("CartPole-v1", n_envs=hp["num_envs"], seed=args.seed)
hidden = list(hp["hiddens"])
model = PPO(
    "MlpPolicy", env, n_steps=hp["n_steps"], batch_size=hp["minibatch"], n_epochs=hp["epochs"],
    learning_rate=hp["lr"], gamma=hp["gamma"], gae_lambda=hp["gae_lambda"], clip_range=hp["clip"],
    ent_coef=hp["ent_coef"], vf_coef=hp["vf_coef"], normalize_advantage=hp["norm_adv"],
    # SB3 always clips the gradient norm; rlfleet's grad_clip None means no clipping.
    max_grad_norm=hp["max_grad_norm"] if hp["max_grad_norm"] is not None else float("inf"),
    policy_kwargs={"net_arch": hidden if hp["shared"] else {"pi": hidden, "vf": hidden},
                   "activation_fn": {"tanh": nn.Tanh, "relu": nn.ReLU}[hp["activation"]],
                   "optimizer_kwargs": {"eps": hp["adam_eps"]}},
    stats_window_size=hp["window"], seed=args.seed, device="cpu", verbose=0,
)
model.learn(total_timesteps=hp["budget"], callback=StopAt450())
progress.emit()
