"""Sample Factory 2.x's PPO on CartPole-v1 with rlfleet's tuned-example hyperparameters, in
its synchronous serial mode (`serial_mode`, `async_rl=False`: one process, no policy lag, the
mode it offers for small machines).

8-env setting: one rollout worker with 8 envs stepped one by one. Batched setting: the same
with 64 envs and `batched_sampling=True` (Sample Factory's path for batched environments:
whole-batch tensors from the sampler to the learner). The threshold is Sample Factory's own
mean of its last 100 episode rewards (`stats_avg`), checked after each training iteration by
an `AlgoObserver`, which then stops the runner.
"""
from __future__ import annotations

import tempfile

import gymnasium as gym
from sample_factory.algo.runners.runner import AlgoObserver
from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
from sample_factory.envs.env_utils import register_env
from sample_factory.train import make_runner

import _common

def make_env(full_env_name: str, cfg: object, env_config: object, render_mode: object = None) -> gym.Env:
    # Module level: Sample Factory reads the env's spaces in a spawned process, which pickles it.
    return gym.make("CartPole-v1")


def main() -> None:
    args = _common.parse_args()
    hp = args.hp
    _common.pin_one_thread()
    N, T = hp["num_envs"], hp["n_steps"]
    register_env("CartPole-v1", make_env)
    argv = [
        "--env=CartPole-v1", "--experiment=peers", f"--train_dir={tempfile.mkdtemp(prefix='sf-peers-')}",
        "--device=cpu", f"--seed={args.seed}", "--serial_mode=True", "--async_rl=False", "--num_workers=1",
        f"--num_envs_per_worker={N}", "--worker_num_splits=1", f"--batched_sampling={hp['batched']}",
        f"--rollout={T}", f"--batch_size={hp['minibatch']}", f"--num_batches_per_epoch={N * T // hp['minibatch']}",
        f"--num_epochs={hp['epochs']}", f"--learning_rate={hp['lr']}", f"--gamma={hp['gamma']}",
        f"--gae_lambda={hp['gae_lambda']}", f"--ppo_clip_ratio={hp['clip']}", "--ppo_clip_value=1e9",
        f"--value_loss_coeff={hp['vf_coef']}", f"--exploration_loss_coeff={hp['ent_coef']}",
        f"--max_grad_norm={hp['max_grad_norm'] or 0.0}", f"--adam_eps={hp['adam_eps']}",
        "--normalize_input=False", "--normalize_returns=False", "--value_bootstrap=True",
        "--encoder_mlp_layers", *[str(h) for h in hp["hiddens"]], f"--nonlinearity={hp['activation']}",
        f"--actor_critic_share_weights={hp['shared']}", "--use_rnn=False", "--recurrence=1",
        f"--stats_avg={hp['window']}", f"--train_for_env_steps={hp['budget']}", "--decorrelate_envs_on_one_worker=False",
        "--save_every_sec=100000", "--save_best_every_sec=100000", "--keep_checkpoints=1", "--with_wandb=False",
        "--experiment_summaries_interval=100000", "--log_to_file=False",
    ]
    parser, _ = parse_sf_args(argv=argv)
    cfg = parse_full_cfg(parser, argv=argv)
    progress = _common.Progress(hp)


    class StopAt450(AlgoObserver):
        def on_start(self, runner) -> None:  # noqa: ANN001 (Sample Factory's Runner)
            progress.begin()

        def on_training_step(self, runner, training_iteration_since_resume: int) -> None:  # noqa: ANN001
            progress.steps = int(sum(runner.env_steps.values()))
            rewards = runner.policy_avg_stats.get("reward", [[]])[0]
            if rewards:
                progress.set_library_window(sum(rewards) / len(rewards), len(rewards))
            if progress.solved():
                runner._stop_training()  # noqa: SLF001 (what the runner calls at its own step budget)


    cfg, runner = make_runner(cfg)
    runner.register_observer(StopAt450())
    if runner.init() == 0:
        runner.run()
    progress.emit()


if __name__ == "__main__":
    main()
