"""RemoteVectorEnv: a worker's sub-envs, each in its own Ray actor (`remote_worker_envs`).

An actor pool of the rollout layer, beside `WorkerSet` (Ray is called only there, in the
modules it owns here in rollout/, and in tune.py); the RolloutWorker builds it in place of
its local `VectorEnv`.

Each actor holds a one-env `VectorEnv`, so horizon, soft horizon, auto-reset and the
terminated/truncated mapping are exactly those of the local `VectorEnv`, and a seeded run
gives the same samples with or without `remote_worker_envs`.

Waiting (`remote_env_batch_wait_ms`): the sampler steps its sub-envs in lockstep (one
batched forward pass per step into `[T, num_envs]` arrays), so every `step()` sends all
actions at once (the sub-envs step in parallel) and returns when *every* sub-env has
answered. RLlib 1.x's `RemoteVectorEnv` (`rllib/env/remote_vector_env.py`) could instead go
on with the sub-envs that were ready (with 0 ms: as soon as one was, else after that many
ms) and leave the others' actions
pending; lockstep stepping has no place for a partial step, so here a step always waits
for all sub-envs, however long they take, and config validation rejects any
`remote_env_batch_wait_ms` other than 0 (naming the key) rather than ignore it.
Remote envs pay off when one env step costs much more than a Ray round trip (~0.1-0.5 ms).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from rlfleet.env.atari_detection import is_atari
from rlfleet.env.checks import EnvError
from rlfleet.env.env_context import EnvContext
from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.env.vector_env import VectorEnv, VectorStep
from rlfleet.utils.ray_utils import init_ray


class _EnvActor:
    """Runs one sub-env (as a one-env VectorEnv) inside a Ray actor."""

    def __init__(self, env_creator: Callable[[EnvContext], Any], ctx: EnvContext, vector_kwargs: dict):
        self.venv = VectorEnv([env_creator(ctx)], **vector_kwargs)
        self.index = ctx.vector_index

    def _located(self, fn: Callable, *args):
        # The inner one-env VectorEnv calls its env sub-env 0: name the worker's index instead.
        try:
            return fn(*args)
        except EnvError as e:
            raise type(e)(e.what, **dict(e.context(), sub_env_index=self.index)) from e.__cause__

    def spaces(self):
        return self.venv.observation_space, self.venv.action_space, is_atari(self.venv.envs[0])

    def reset_all(self):
        return self._located(self.venv.reset_all)[0]

    def seed_next_reset(self, seed) -> None:
        self.venv.seed_next_reset([seed])

    def step(self, action) -> VectorStep:
        return self._located(self.venv.step, [action])

    def render(self):
        return self.venv.render(0)

    def close(self) -> None:
        self.venv.close()


class RemoteVectorEnv:
    """The `VectorEnv` contract (`reset_all`, `step -> VectorStep`, `render`, `close`) over
    sub-envs that run as Ray actors.

    Args:
        env_creator: `EnvContext -> env`, called inside each actor.
        contexts: one EnvContext per sub-env (its `vector_index` set, `remote=True`).
        rules, seeds: as for `VectorEnv`.
        batch_wait_ms: `remote_env_batch_wait_ms`; only 0 (see the module docstring).
    """

    def __init__(
        self,
        env_creator: Callable[[EnvContext], Any],
        contexts: Sequence[EnvContext],
        *,
        rules: EpisodeRules = EpisodeRules(),
        seeds: Optional[Sequence[Optional[int]]] = None,
        batch_wait_ms: float = 0,
    ):
        if not contexts:
            raise ValueError("RemoteVectorEnv needs at least one env")
        if batch_wait_ms != 0:
            raise ValueError(f"'remote_env_batch_wait_ms': {batch_wait_ms!r} is not supported; sub-envs step in "
                             "lockstep, so only 0 (wait for all of them)")
        ray = init_ray()
        self._ray = ray
        self.num_envs = len(contexts)
        seeds = list(seeds) if seeds is not None else [None] * self.num_envs
        # num_cpus=0 (as RLlib 1.x): an env actor mostly waits for its worker.
        actor_cls = ray.remote(num_cpus=0)(_EnvActor)
        self.actors = [
            actor_cls.remote(env_creator, ctx, dict(rules=rules, seeds=[seeds[i]]))
            for i, ctx in enumerate(contexts)
        ]
        self.observation_space, self.action_space, self.is_atari = ray.get(self.actors[0].spaces.remote())
        self.batch_wait_ms = 0.0

    def reset_all(self) -> List[Any]:
        return self._ray.get([a.reset_all.remote() for a in self.actors])

    def seed_next_reset(self, seeds: Sequence[Optional[int]]) -> None:
        """Seeds for the next `reset_all`, one per sub-env (as `VectorEnv.seed_next_reset`)."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed_next_reset: got {len(seeds)} seeds for {self.num_envs} sub-envs")
        self._ray.get([a.seed_next_reset.remote(s) for a, s in zip(self.actors, seeds)])

    def step(self, actions) -> VectorStep:
        """Steps every sub-env with its action (all in parallel); returns when all answered."""
        refs = [a.step.remote(actions[i]) for i, a in enumerate(self.actors)]
        parts: List[VectorStep] = self._ray.get(refs)
        reset_obs: Dict[int, Any] = {i: p.reset_obs[0] for i, p in enumerate(parts) if 0 in p.reset_obs}
        return VectorStep(
            obs=[p.obs[0] for p in parts],
            rewards=np.concatenate([p.rewards for p in parts]),
            terminateds=np.concatenate([p.terminateds for p in parts]),
            ends=np.concatenate([p.ends for p in parts]),
            reset_obs=reset_obs,
            infos=[p.infos[0] for p in parts],
        )

    def render(self, index: int = 0):
        return self._ray.get(self.actors[index].render.remote())

    def close(self) -> None:
        for actor in self.actors:
            try:
                self._ray.get(actor.close.remote(), timeout=10)
            except Exception:  # already dead: nothing to close
                pass
            self._ray.kill(actor)
        self.actors = []
