"""rlfleet's side: PPO on CartPole-v1 from the tuned example itself (`hp["tuned_example"]`).

The other scripts get the same hyperparameters translated; this one trains the file as it is,
with its seed replaced, until the mean of the last 100 returns reaches 450 or the budget ends.
"""
from __future__ import annotations

import time

import yaml

import _common

args = _common.parse_args()
hp = args.hp
_common.pin_one_thread()
from rlfleet.algorithms.ppo import PPOTrainer  # noqa: E402 (after the thread pin)

with open(hp["tuned_example"]) as f:
    (spec,) = yaml.safe_load(f).values()
config = dict(spec["config"], seed=args.seed, metrics_smoothing_episodes=hp["window"])


class _NoLogger:
    def on_result(self, result: dict) -> None:
        pass

    def close(self) -> None:
        pass


progress = _common.Progress(hp)
trainer = PPOTrainer(env=spec["env"], config=config, logger_creator=lambda cfg: _NoLogger())
progress.begin()
while not progress.done():
    result = trainer.train()
    progress.steps = int(result["timesteps_total"])
    new = int(result["episodes_this_iter"])
    # hist_stats holds the last `window` returns; the newest `new` of them are this round's.
    progress.add_returns(result["hist_stats"]["episode_reward"][-new:] if new else [])
progress.emit()
trainer.stop()
