"""MAML trainer: tasks per iteration, sampled and adapted on the workers, one meta update."""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

import numpy as np

from rlfleet.algorithms.maml.maml_policy import MAMLTorchPolicy
from rlfleet.algorithms.maml.task_rollouts import TaskRollout, meta_env, rollout_tasks
from rlfleet.config import (ConfigKey, algorithm_config, int_at_least, number_above, number_in, optional,
                            override, boolean)
from rlfleet.env.env_context import EnvContext
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID
from rlfleet.trainer import Trainer
from rlfleet.utils.seeding import derive_seed

logger = logging.getLogger(__name__)
K = ConfigKey

# Tasks per iteration in local mode when `meta_batch_size` is None: RLlib 1.x's default
# worker count (one task per worker there).
LOCAL_TASKS = 2

ALGO_KEYS: List[ConfigKey] = [
    K("inner_adaptation_steps", 1, "Inner policy-gradient steps per task (0: plain multi-task PPO).", int_at_least(0)),
    K("maml_optimizer_steps", 5, "Adam steps of the meta update on each iteration's batches.", int_at_least(1)),
    K("inner_lr", 0.1, "Step size of each inner adaptation step (plain gradient descent).", number_above(0)),
    K("meta_batch_size", None, "Tasks per iteration; None: one per remote worker (num_workers), "
      f"or {LOCAL_TASKS} in local mode.", optional(int_at_least(1), "num_workers tasks")),
    K("use_gae", True, "Generalized Advantage Estimation; False: discounted returns minus the value.", boolean),
    K("lambda", 1.0, "GAE's lambda.", number_in(0, 1)),
    K("kl_coeff", 0.0005, "Initial coefficient of each inner step's KL penalty in the meta loss.", number_in(0)),
    K("kl_target", 0.01, "KL each inner step's coefficient is adapted towards.", number_above(0)),
    K("vf_loss_coeff", 0.5, "Weight of the value loss (inner and meta loss).", number_in(0)),
    K("entropy_coeff", 0.0, "Weight of the entropy bonus in the meta loss.", number_in(0)),
    K("clip_param", 0.3, "PPO's clip range of the meta loss's probability ratio.", number_above(0)),
    K("vf_clip_param", 10.0, "Clamp on the squared value error (sensitive to the reward scale).", number_above(0)),
    K("grad_clip", None, "Clip the meta gradient's global norm to this; None: no clipping.",
      optional(number_above(0), "no clipping")),
    override("lr", 1e-3),
    override("rollout_fragment_length", 200),
    override("batch_mode", "complete_episodes"),
    override("observation_filter", "NoFilter"),
    override("model.vf_share_layers", False),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)



def refuse_multi_agent_and_recurrent(algorithm: str, config: dict) -> None:
    """The inner adaptation steps one feed-forward policy's parameters: refuses several policies
    and recurrent models, naming `algorithm` and the keys."""
    if set((config.get("multiagent") or {}).get("policies") or {}) - {DEFAULT_POLICY_ID}:
        raise ValueError(f"{algorithm}: multi-agent configs ('multiagent.policies') are not supported; use a "
                         "single-agent env")
    model = config.get("model") or {}
    if model.get("use_lstm") or model.get("use_attention"):
        raise ValueError(f"{algorithm}: recurrent models (model.use_lstm / use_attention) are not supported; "
                         "set both False")


class MAMLTrainer(Trainer):
    """Model-Agnostic Meta-Learning (Finn et al. 2017, arXiv 1703.03400) with a PPO-style
    meta update, as RLlib 1.x's MAML.

    Each iteration draws `meta_batch_size` tasks with the env's `sample_tasks(n)` (seeded
    from `seed` and the iteration). For each task a worker sets it on its sub-envs
    (`set_task`), samples with the meta-policy, takes an inner policy-gradient step
    (`inner_lr`) on that batch and samples again, `inner_adaptation_steps` times; each batch
    is at least `rollout_fragment_length * num_envs_per_worker` steps of complete episodes.
    The driver then takes `maml_optimizer_steps` Adam steps on the meta loss: per task, the
    inner steps redone from the meta parameters inside the autograd graph, PPO's clipped
    surrogate and value loss on the last batch, plus a KL penalty per inner step whose
    coefficient is halved or doubled towards `kl_target` (ProMP, arXiv 1810.06784).

    Results: `episode_reward_mean_adapt_N` (and `_min_`, `_max_`) for N = 0 ..
    `inner_adaptation_steps` is the mean return of the episodes sampled after N inner steps
    (N = 0: the meta-policy itself), and `adaptation_delta` the last minus the first.
    `episode_reward_mean` mixes every stage's episodes (each worker hands its finished
    episodes back with the task's batches, since it restarts episodes between stages). Evaluation (`evaluation_interval`)
    runs the meta-policy unadapted, on the task the evaluation env is configured with.

    Local mode (`num_workers: 0`): the local worker runs the tasks one after another
    (`meta_batch_size`, default 2). With remote workers the tasks are dealt out in turn, one
    per worker by default. Envs need `sample_tasks(n)` and `set_task(task)`
    (`rlfleet.env.TaskSettableEnv`); an env without them is refused.

    Departures from RLlib 1.x's MAML:

    - `inner_adaptation_steps: 0` is allowed (plain multi-task PPO, a baseline); RLlib 1.x
      required at least 1.
    - Local mode runs (RLlib 1.x required `num_workers >= 1`), and `meta_batch_size` sets the
      tasks per iteration (RLlib 1.x: always one per remote worker).
    - Tasks are drawn by the trainer from its own copy of the env, so `create_env_on_driver`
      is not needed; `use_meta_env` is not offered (tasks are always set).
    - The value loss clamps the squared error at `vf_clip_param` (as rlfleet's PPO) rather
      than clipping the value prediction around the old one.
    - `train_batch_size` is not read: each stage's batch is one `sample()` per task.
    - Single-agent, non-recurrent models and `batch_mode: complete_episodes` only (each
      with a clear error otherwise).
    """

    _name = "MAML"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = MAMLTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        if config["batch_mode"] != "complete_episodes":
            raise ValueError(f"MAML: 'batch_mode': {config['batch_mode']!r} is not supported; each adaptation "
                             "stage samples whole episodes of one policy: set batch_mode 'complete_episodes'")
        refuse_multi_agent_and_recurrent("MAML", config)
        if config.get("sample_async"):
            raise ValueError("MAML: 'sample_async': True is not supported (each stage must sample with the "
                             "adapted weights); set it False")
        if config.get("input", "sampler") != "sampler":
            raise ValueError(f"MAML: 'input': {config['input']!r} is not supported; MAML samples its tasks "
                             "online: set input 'sampler'")
        if "train_batch_size" in (getattr(self, "raw_user_config", None) or {}):
            logger.warning("MAML does not read 'train_batch_size': each adaptation stage samples "
                           "rollout_fragment_length * num_envs_per_worker steps per task")

    def setup(self, config: dict) -> None:
        # The trainer's own env copy draws the tasks (the local worker may have no env).
        self._task_env = self.env_creator(EnvContext(config.get("env_config") or {}, worker_index=0))
        self._task_source = meta_env(self._task_env)
        self._adapt_metrics: Dict[str, float] = {}
        self._own_episodes: List[Any] = []

    def num_tasks(self) -> int:
        """Tasks per iteration (`meta_batch_size`; None: see the key)."""
        size = self.config["meta_batch_size"]
        if size is not None:
            return int(size)
        return self.workers.num_remote_workers() or LOCAL_TASKS

    def sample_tasks(self) -> List[Any]:
        """This iteration's tasks, from the env's `sample_tasks` (its RNG reseeded from `seed`
        and the iteration, so a seeded run, or one resumed from a checkpoint, draws the same)."""
        seed = self.config.get("seed")
        if seed is not None:
            self._task_env.reset(seed=derive_seed(seed, "maml_tasks", self.iteration) & 0xFFFFFFFF)
        return list(self._task_source.sample_tasks(self.num_tasks()))

    def training_step(self) -> Dict[str, Any]:
        steps = int(self.config["inner_adaptation_steps"])
        # === sample: per task, pre-adaptation data, adapt, post-adaptation data ===
        rollouts = self._rollout(self.sample_tasks(), steps)
        sampled = sum(b.count for r in rollouts for b in r.batches)
        self.count_sampled(sampled, sampled)
        self._adapt_metrics = adaptation_metrics(rollouts, steps)
        self._own_episodes.extend(e for r in rollouts for e in r.episodes)
        # === learn: the meta update on the driver ===
        policy = self.get_policy(DEFAULT_POLICY_ID)
        info = policy.meta_update([r.batches for r in rollouts])
        self.counters["num_env_steps_trained"] += sampled
        self.counters["num_agent_steps_trained"] += sampled
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return {DEFAULT_POLICY_ID: info}

    def _rollout(self, tasks: List[Any], steps: int) -> List[TaskRollout]:
        """Every task's rollouts, in task order: on the local worker in local mode, else dealt
        out to the remote workers in turn (all in parallel)."""
        indices = self.workers.remote_worker_indices()
        if not indices:
            return rollout_tasks(self.workers.local_worker(), tasks, steps)
        share = {index: list(range(j, len(tasks), len(indices))) for j, index in enumerate(indices)}
        answers = self.workers.foreach_worker_with_index(
            lambda worker, i: rollout_tasks(worker, [tasks[t] for t in share[i]], steps) if i in share else [])
        out: List[Optional[TaskRollout]] = [None] * len(tasks)
        for index, rollouts in zip(indices, answers[1:]):
            for t, rollout in zip(share[index], rollouts):
                out[t] = rollout
        return [r for r in out if r is not None]

    def take_own_episodes(self) -> List[Any]:
        episodes, self._own_episodes = self._own_episodes, []
        return episodes

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        result.update(self._adapt_metrics)
        return result

    def stop(self) -> None:
        task_env = getattr(self, "_task_env", None)
        if task_env is not None:
            task_env.close()
        super().stop()


def adaptation_metrics(rollouts: List[TaskRollout], steps: int) -> Dict[str, float]:
    """`episode_reward_{mean,min,max}_adapt_N` over every task's episodes after N inner steps,
    and `adaptation_delta` (mean after the last step minus mean before adapting)."""
    out: Dict[str, float] = {}
    for n in range(steps + 1):
        returns = np.concatenate([r.returns[n] for r in rollouts]) if rollouts else np.zeros(0)
        if returns.size:
            out[f"episode_reward_mean_adapt_{n}"] = float(returns.mean())
            out[f"episode_reward_min_adapt_{n}"] = float(returns.min())
            out[f"episode_reward_max_adapt_{n}"] = float(returns.max())
    first, last = "episode_reward_mean_adapt_0", f"episode_reward_mean_adapt_{steps}"
    if first in out and last in out:
        out["adaptation_delta"] = out[last] - out[first]
    return out
