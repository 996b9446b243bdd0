"""PPO on CartPole-v1 with Ray Tune's `Tuner` and a grid search over the learning rate, written
as RLlib 2.x's docs write it; the best trial's checkpoint is then loaded and run.

Lines that differ from the RLlib 2.x version, and why:
- `from ray.rllib.algorithms.ppo import PPOConfig` -> `from rlfleet.algorithms.ppo import PPOConfig`
  and `from ray.rllib.algorithms.algorithm import Algorithm` -> `from rlfleet import Algorithm`
  (left as they were, the script trains RLlib itself: Ray ships RLlib).
Nothing else: `tune.Tuner("PPO", param_space=config, ...)` runs rlfleet's PPO, since the
config is rlfleet's (`config.algo_class` works too); the builder calls, `tune.grid_search`
inside them, the 2.x stop and metric keys (`env_runners/episode_return_mean`,
`num_env_steps_sampled_lifetime`), `get_best_result` and
`Algorithm.from_checkpoint(best_result.checkpoint)` are 2.x's. The `--stop-*` flags follow
RLlib's example scripts (`add_rllib_example_script_args`), spelt out with argparse.

    python examples/rllib2/ppo_tuner_grid_search.py --stop-reward 150
"""
import argparse

import gymnasium as gym
import torch
from ray import tune

from rlfleet import Algorithm
from rlfleet.algorithms.ppo import PPOConfig

parser = argparse.ArgumentParser()
parser.add_argument("--stop-iters", type=int, default=30)
parser.add_argument("--stop-timesteps", type=int, default=100000)
parser.add_argument("--stop-reward", type=float, default=150.0)
args = parser.parse_args()

config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0)
    .training(
        lr=tune.grid_search([1e-3, 3e-4]),
        train_batch_size=2000,
        minibatch_size=128,
        num_epochs=10,
        model={"fcnet_hiddens": [64, 64]},
    )
)

stop = {
    "training_iteration": args.stop_iters,
    "num_env_steps_sampled_lifetime": args.stop_timesteps,
    "env_runners/episode_return_mean": args.stop_reward,
}

tuner = tune.Tuner(
    "PPO",
    param_space=config,
    run_config=tune.RunConfig(
        stop=stop,
        checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
    ),
)
results = tuner.fit()

best_result = results.get_best_result(metric="env_runners/episode_return_mean", mode="max")
print(f"Best lr: {best_result.config['lr']}; "
      f"env_runners/episode_return_mean={best_result.metrics['env_runners']['episode_return_mean']:.1f}")

# Restore the best trial's algorithm and run one greedy episode with its module.
algo = Algorithm.from_checkpoint(best_result.checkpoint)
rl_module = algo.get_module()
env = gym.make("CartPole-v1")
obs, _ = env.reset(seed=0)
episode_return, done = 0.0, False
while not done:
    outputs = rl_module.forward_inference({"obs": torch.from_numpy(obs).unsqueeze(0)})
    action = int(torch.argmax(outputs["action_dist_inputs"][0]))
    obs, reward, terminated, truncated, _ = env.step(action)
    episode_return += reward
    done = terminated or truncated
print(f"Restored best checkpoint: one greedy episode's return={episode_return:.1f}")
algo.stop()
