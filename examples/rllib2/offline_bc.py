"""Behavior cloning from a recorded dataset, written as RLlib 2.x's docs write it: train a PPO
expert on CartPole-v1, record the episodes its evaluation runs (`evaluation_config` with
`output`), clone it with `BCConfig().offline_data(input_=...)`, and evaluate the clone in the env.

Lines that differ from the RLlib 2.x version, and why:
- `from ray.rllib.algorithms.ppo import PPOConfig` -> `from rlfleet.algorithms.ppo import PPOConfig`,
  `from ray.rllib.algorithms.bc import BCConfig` -> `from rlfleet.algorithms.bc import BCConfig`
  (left as they were, the script trains RLlib itself: Ray ships RLlib).
- `.training(model={...})` sizes the nets as 2.x's old API stack does; 2.x's new stack writes
  `.rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))`, and rlfleet has no RLModule.
- Recording: 2.x's new stack writes Parquet through Ray Data and takes
  `.offline_data(output=..., output_write_episodes=False)`; rlfleet writes RLlib's JSON lines
  (one SampleBatch a line, as 2.x's old stack does), and, as 2.x's old stack, records what
  evaluation runs when `evaluation_config` sets `output` (the top-level `output` records the
  training samples): so the restored expert's `algo.evaluate()` episodes are recorded with
  `evaluation_config=PPOConfig.overrides(output=data_path)` (exploring, as evaluation does by
  default: the clone then also sees the states a slip leads to).
- Reading: 2.x's new stack adds `input_read_method="read_parquet"` and
  `dataset_num_iters_per_learner=...` (Ray Data); rlfleet reads the folder's JSON files itself,
  so `.offline_data(input_=[data_path])` alone.
- Evaluating the clone in the env: `evaluation_config=BCConfig.overrides(input_="sampler", ...)`,
  as 2.x's old stack writes it (its evaluation workers would read the dataset otherwise);
  2.x's new stack samples the env for evaluation without it.
- The clone's training return is not measured (nothing runs in the env while BC trains): the
  loop reads `result["evaluation"]["env_runners"]["episode_return_mean"]`.

At its defaults (seeds 0, 1, 2) the expert reaches ~405, its 21-24 recorded episodes return
359, 500 and 500, and the clone's greedy evaluation passes 400 after 44, 24 and 28 BC
iterations (414, 487, 442), in 17-22 s on 2 shared cores. Recorded greedily
(`explore=False`) the clone needed 78, 46 and 47.

    python examples/rllib2/offline_bc.py --stop-reward 400
"""
import argparse
import shutil
import tempfile

from rlfleet.algorithms.bc import BCConfig
from rlfleet.algorithms.ppo import PPOConfig

parser = argparse.ArgumentParser()
parser.add_argument("--stop-iters", type=int, default=100, help="BC iterations at most")
parser.add_argument("--stop-timesteps", type=int, default=200000, help="PPO expert's env steps at most")
parser.add_argument("--stop-reward", type=float, default=400.0, help="return the expert and the clone aim for")
parser.add_argument("--record-episodes", type=int, default=20, help="expert episodes recorded")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

data_path = tempfile.mkdtemp(prefix="cartpole-expert-")
checkpoint_path = tempfile.mkdtemp(prefix="cartpole-ppo-")

# --- 1. train the expert ----------------------------------------------------------------
ppo_config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=0, num_envs_per_env_runner=8, rollout_fragment_length=64)
    .training(lr=3e-4, lambda_=0.95, kl_coeff=0.0, vf_clip_param=10000.0, train_batch_size=2048,
              minibatch_size=256, num_epochs=10, model={"fcnet_hiddens": [64, 64]})
    .debugging(seed=args.seed)
)
algo = ppo_config.build()
while True:
    result = algo.train()
    if (result["env_runners"]["episode_return_mean"] >= args.stop_reward
            or result["num_env_steps_sampled_lifetime"] >= args.stop_timesteps):
        break
print(f"Expert: env_runners/episode_return_mean={result['env_runners']['episode_return_mean']:.1f}")
algo.save_to_path(checkpoint_path)
algo.stop()

# --- 2. record the expert: the episodes its evaluation runs ------------------------------
record_config = ppo_config.copy().evaluation(
    evaluation_duration=args.record_episodes,
    evaluation_duration_unit="episodes",
    evaluation_config=PPOConfig.overrides(output=data_path),
)
algo = record_config.build()
algo.restore_from_path(checkpoint_path)
eval_results = algo.evaluate()
print(f"Recorded {eval_results['evaluation']['env_runners']['num_episodes']} episodes, "
      f"episode_return_mean={eval_results['evaluation']['env_runners']['episode_return_mean']:.1f}, "
      f"into {data_path}")
algo.stop()

# --- 3. clone it with BC and evaluate the clone in the env -------------------------------
bc_config = (
    BCConfig()
    .environment("CartPole-v1")
    .offline_data(input_=[data_path])
    .training(lr=3e-3, train_batch_size=256, model={"fcnet_hiddens": [64, 64]})
    .evaluation(evaluation_interval=1, evaluation_duration=5, evaluation_duration_unit="episodes",
                evaluation_config=BCConfig.overrides(input_="sampler", explore=False))
    .reporting(min_time_s_per_iteration=0)
    .debugging(seed=args.seed)
)
algo = bc_config.build()
for i in range(args.stop_iters):
    result = algo.train()
    eval_return = result["evaluation"]["env_runners"]["episode_return_mean"]
    print(f"BC iter {i + 1}: evaluation episode_return_mean={eval_return:.1f}")
    if eval_return >= args.stop_reward:
        break

print(f"Final: evaluation/env_runners/episode_return_mean={eval_return:.1f} after {i + 1} BC iterations")
algo.stop()
shutil.rmtree(data_path)
shutil.rmtree(checkpoint_path)
