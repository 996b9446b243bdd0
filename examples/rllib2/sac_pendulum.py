"""SAC on Pendulum-v1, written as RLlib 2.x's docs write it.

Lines that differ from the RLlib 2.x version, and why:
- `from ray.rllib.algorithms.sac import SACConfig` -> `from rlfleet.algorithms.sac import SACConfig`
  (left as it was, the script trains RLlib itself: Ray ships RLlib).
- 2.x's tuned example sizes the networks with
  `.rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))`; rlfleet has no
  RLModule, so the same sizes go in `.training(q_model_config=..., policy_model_config=...)`
  (the 2.0-2.9 spelling, which 2.x's old API stack still takes).
Everything else (`actor_lr` / `critic_lr` / `alpha_lr`, `tau`, `initial_alpha`,
`num_steps_sampled_before_learning_starts`, the result keys) is 2.x's.

At its defaults (seeds 0, 1, 2) the return passes -250 after 6k-7k env steps (-136, -136,
-167), in 13-26 s on 2 shared cores.

    python examples/rllib2/sac_pendulum.py --stop-reward -250
"""
import argparse

from rlfleet.algorithms.sac import SACConfig

parser = argparse.ArgumentParser()
parser.add_argument("--stop-iters", type=int, default=30)
parser.add_argument("--stop-timesteps", type=int, default=20000)
parser.add_argument("--stop-reward", type=float, default=-250.0)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

config = (
    SACConfig()
    .environment("Pendulum-v1")
    .env_runners(num_env_runners=0)
    .training(
        gamma=0.99,
        actor_lr=1e-3,
        critic_lr=1e-3,
        alpha_lr=1e-3,
        tau=0.005,
        initial_alpha=1.0,
        train_batch_size=128,
        num_steps_sampled_before_learning_starts=1000,
        q_model_config={"fcnet_hiddens": [64, 64]},
        policy_model_config={"fcnet_hiddens": [64, 64]},
    )
    .reporting(metrics_num_episodes_for_smoothing=10, min_time_s_per_iteration=0,
               min_sample_timesteps_per_iteration=1000)
    .debugging(seed=args.seed)
)

algo = config.build()
for i in range(args.stop_iters):
    result = algo.train()
    episode_return = result["env_runners"]["episode_return_mean"]
    steps = result["num_env_steps_sampled_lifetime"]
    print(f"iter {i + 1}: steps={steps} episode_return_mean={episode_return:.1f}")
    if episode_return >= args.stop_reward or steps >= args.stop_timesteps:
        break

print(f"Final: env_runners/episode_return_mean={episode_return:.1f} after {steps} env steps")
algo.stop()
