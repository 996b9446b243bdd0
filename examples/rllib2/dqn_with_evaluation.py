"""DQN on CartPole-v1 with evaluation every iteration, written as RLlib 2.x's docs write it.

Lines that differ from the RLlib 2.x version, and why:
- `from ray.rllib.algorithms.dqn import DQNConfig` -> `from rlfleet.algorithms.dqn import DQNConfig`
  (left as it was, the script trains RLlib itself: Ray ships RLlib).
- `.training(model={...})` sizes the nets as 2.x's old API stack does; 2.x's new stack writes
  `.rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))`, and rlfleet has no RLModule.
- `.exploration(exploration_config={"type": "EpsilonGreedy", ...})` is 2.x's old-stack
  spelling too; its new stack's `.training(epsilon=[(0, 1.0), (5000, 0.02)])` is not taken.
Nothing else: the other builder calls, `algo.train()` and the 2.x result keys
(`result["env_runners"]["episode_return_mean"]`,
`result["evaluation"]["env_runners"]["episode_return_mean"]`,
`result["num_env_steps_sampled_lifetime"]`) are 2.x's. The `--stop-*` flags follow RLlib's
example scripts (`add_rllib_example_script_args`), spelt out with argparse.

At its defaults (seeds 0, 1, 2) the training return passes 150 after 5.5k-7k env steps
(greedy evaluation: 155-252), in 7-13 s on 2 shared cores.

    python examples/rllib2/dqn_with_evaluation.py --stop-reward 150
"""
import argparse

from rlfleet.algorithms.dqn import DQNConfig

parser = argparse.ArgumentParser()
parser.add_argument("--stop-iters", type=int, default=40)
parser.add_argument("--stop-timesteps", type=int, default=20000)
parser.add_argument("--stop-reward", type=float, default=150.0)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

config = (
    DQNConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0, rollout_fragment_length=4)
    .training(
        lr=1e-3,
        gamma=0.99,
        train_batch_size=64,
        n_step=3,
        double_q=True,
        dueling=True,
        hiddens=[64],
        model={"fcnet_hiddens": [64]},
        num_steps_sampled_before_learning_starts=500,
    )
    .exploration(exploration_config={"type": "EpsilonGreedy", "initial_epsilon": 1.0,
                                     "final_epsilon": 0.02, "epsilon_timesteps": 5000})
    .evaluation(
        evaluation_interval=1,
        evaluation_duration=5,
        evaluation_duration_unit="episodes",
    )
    .reporting(metrics_num_episodes_for_smoothing=20, min_time_s_per_iteration=0,
               min_sample_timesteps_per_iteration=500)
    .debugging(seed=args.seed)
)

algo = config.build()
for i in range(args.stop_iters):
    result = algo.train()
    train_return = result["env_runners"]["episode_return_mean"]
    eval_return = result["evaluation"]["env_runners"]["episode_return_mean"]
    steps = result["num_env_steps_sampled_lifetime"]
    print(f"iter {i + 1}: steps={steps} episode_return_mean={train_return:.1f} "
          f"evaluation episode_return_mean={eval_return:.1f}")
    if train_return >= args.stop_reward or steps >= args.stop_timesteps:
        break

print(f"Final: env_runners/episode_return_mean={train_return:.1f}, "
      f"evaluation/env_runners/episode_return_mean={eval_return:.1f} after {steps} env steps")
algo.stop()
