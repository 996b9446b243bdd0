"""PufferLib 3's PPO trainer (`pufferlib.pufferl.PuffeRL`: `evaluate()` then `train()`) on
CartPole-v1 with rlfleet's tuned-example hyperparameters, on the CPU.

PufferLib's own batched envs are its Ocean C envs, which this install leaves out (NO_OCEAN=1:
building them downloads raylib and box2d); CartPole-v1 from Gymnasium runs through its
emulation layer (`GymnasiumPufferEnv`) on its in-process `Serial` vector backend, 8 envs or the
batched setting's 64. Its trainer's own choices stay: segments of `bptt_horizon` steps
sampled by priority (alpha 0 here: uniform), V-trace-clipped advantages, rewards clamped to
[-1, 1] (CartPole's are 1). Key by key: batch = envs x steps, bptt_horizon = steps per env,
minibatch_size, update_epochs, adam with rlfleet's eps, no lr annealing, value clipping and
gradient clipping off (as rlfleet: its trainer always clips, so at 1e10).
"""
from __future__ import annotations

import tempfile

import gymnasium
import torch
import torch.nn as nn

import _common


class EpisodeReturn(gymnasium.Wrapper):
    """Puts the episode's return in `info["episode_return"]` at its end (PufferLib's trainer
    gathers every info key into `stats`)."""

    def reset(self, **kwargs):  # noqa: ANN003, ANN201
        self.ret = 0.0
        return self.env.reset(**kwargs)

    def step(self, action):  # noqa: ANN001, ANN201
        obs, reward, term, trunc, info = self.env.step(action)
        self.ret += float(reward)
        if term or trunc:
            info = dict(info, episode_return=self.ret)
        return obs, reward, term, trunc, info


class Policy(nn.Module):
    """Separate actor and critic MLPs; PufferLib calls `forward_eval` to act, `forward` to learn."""

    def __init__(self, obs_dim: int, n_act: int, hiddens: list, act: type) -> None:
        super().__init__()

        def mlp(out: int) -> nn.Sequential:
            layers: list = []
            for a, b in zip([obs_dim, *hiddens][:-1], hiddens):
                layers += [nn.Linear(a, b), act()]
            return nn.Sequential(*layers, nn.Linear(hiddens[-1], out))

        self.actor, self.critic = mlp(n_act), mlp(1)

    def forward_eval(self, observations: torch.Tensor, state: dict = None):  # noqa: ANN201
        obs = observations.float()
        return self.actor(obs), self.critic(obs)

    def forward(self, observations: torch.Tensor, state: dict = None):  # noqa: ANN201
        return self.forward_eval(observations, state)


def main() -> None:
    args = _common.parse_args()
    hp = args.hp
    _common.pin_one_thread()
    torch.manual_seed(args.seed)
    import pufferlib.emulation
    import pufferlib.pufferl
    import pufferlib.vector

    def make_env(buf=None, seed=0):  # noqa: ANN001, ANN202
        return pufferlib.emulation.GymnasiumPufferEnv(env=EpisodeReturn(gymnasium.make("CartPole-v1")), buf=buf,
                                                      seed=seed)

    N, T = hp["num_envs"], hp["n_steps"]
    vecenv = pufferlib.vector.make(make_env, num_envs=N, backend=pufferlib.vector.Serial, seed=args.seed)
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[hp["activation"]]
    policy = Policy(vecenv.single_observation_space.shape[0], vecenv.single_action_space.n, list(hp["hiddens"]), act)
    config = {
        "env": "CartPole-v1", "seed": args.seed, "torch_deterministic": True, "cpu_offload": False, "device": "cpu", "optimizer": "adam",
        "anneal_lr": False, "precision": "float32", "total_timesteps": hp["budget"], "learning_rate": hp["lr"],
        "gamma": hp["gamma"], "gae_lambda": hp["gae_lambda"], "update_epochs": hp["epochs"], "clip_coef": hp["clip"],
        "vf_coef": hp["vf_coef"], "vf_clip_coef": 1e10, "ent_coef": hp["ent_coef"],
        "max_grad_norm": hp["max_grad_norm"] if hp["max_grad_norm"] is not None else 1e10,
        "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_eps": hp["adam_eps"], "data_dir": tempfile.mkdtemp(),
        "checkpoint_interval": 10**9, "batch_size": N * T, "bptt_horizon": T, "minibatch_size": hp["minibatch"],
        "max_minibatch_size": 32768, "compile": False, "compile_mode": "default", "compile_fullgraph": False,
        "vtrace_rho_clip": 1.0, "vtrace_c_clip": 1.0, "prio_alpha": 0.0, "prio_beta0": 1.0, "use_rnn": False,
    }
    trainer = pufferlib.pufferl.PuffeRL(config, vecenv, policy)
    progress = _common.Progress(hp)
    progress.begin()
    while not progress.done():
        trainer.evaluate()
        progress.add_returns(trainer.stats.pop("episode_return", []))
        trainer.train()
        progress.steps = int(trainer.global_step)
    progress.emit()
    trainer.close()


if __name__ == "__main__":
    main()
