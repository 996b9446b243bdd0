"""DD-PPO: decentralized distributed PPO. Every remote worker samples its own batch and
learns on it; each SGD step's gradient is averaged over the workers with
`torch.distributed` (gloo on the CPU, nccl on GPUs), so all workers take the same step and
keep identical weights. There is no central learner: the trainer starts the workers, hands
out the rendezvous (127.0.0.1 and a free port: one machine), and gathers metrics; with
`keep_local_weights_in_sync` it copies the workers' weights to its own worker after each
step (for `get_weights`, `compute_single_action`, evaluation and checkpoints)."""
from __future__ import annotations

from functools import partial
from typing import Any, Dict, List, Optional

from rlfleet.algorithms.ddppo.ddppo_policy import (DDPPOTorchPolicy, free_loopback_port, join_process_group,
                                                   leave_process_group, sample_and_learn)
from rlfleet.algorithms.ppo.ppo import ALGO_KEYS as PPO_KEYS, PPOTrainer
from rlfleet.config import ConfigKey, algorithm_config, boolean, number_above, number_in, one_of, with_defaults
from rlfleet.rollout.postprocessing import check_gae_needs_critic
from rlfleet.utils.ray_utils import is_worker_failure, ray_in_use

K = ConfigKey

# RLlib 1.x's DD-PPO defaults over PPO's (`rllib/agents/ppo/ddppo.py`); `num_workers` 2 (there is no
# learner without remote workers) and `num_gpus_per_worker` 0 (RLlib 1.x: 1) so that the defaults run on
# any machine.
ALGO_KEYS: List[ConfigKey] = with_defaults([k for k in PPO_KEYS if k.name != "kl_target"], {
    "rollout_fragment_length": 100,
    "num_envs_per_worker": 5,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 10,
    "train_batch_size": 500,
    "kl_coeff": 0.0,
    "num_workers": 2,
}) + [
    K("kl_target", 0.0, "Unused: DD-PPO has no KL penalty (adapting it would need a central learner); keep 0.",
      number_in(0)),
    K("keep_local_weights_in_sync", True, "Copy the workers' weights to the trainer's own worker after each "
      "step (for get_weights, compute_single_action, evaluation, checkpoints).", boolean),
    K("torch_distributed_backend", "auto", "torch.distributed backend of the workers' all-reduce: 'gloo', "
      "'nccl' (GPUs), or 'auto' (nccl when the workers learn on GPUs, else gloo).",
      one_of("auto", "gloo", "nccl")),
    K("torch_distributed_timeout_s", 1800, "Seconds a worker waits for the others in one all-reduce before "
      "failing.", number_above(0, 24 * 3600)),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


def _derived_batch_size(config: dict) -> Optional[int]:
    fragment, envs = config.get("rollout_fragment_length"), config.get("num_envs_per_worker")
    ok = all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10 ** 9 for v in (fragment, envs))
    return fragment * envs if ok else None


class DDPPOTrainer(PPOTrainer):
    """Decentralized distributed PPO (gradients all-reduced among the remote workers)."""

    samples_train_batch = False  # each worker learns on its own fragment (train_batch_size is per worker)

    _name = "DDPPO"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = DDPPOTorchPolicy

    @classmethod
    def merge_trainer_configs(cls, config1: dict, config2: Optional[dict],
                              _allow_unknown_configs: Optional[bool] = None) -> dict:
        merged = super().merge_trainer_configs(config1, config2, _allow_unknown_configs)
        # Each worker learns on what it samples: train_batch_size follows from the fragment.
        if "train_batch_size" not in (config2 or {}) and _derived_batch_size(merged) is not None:
            merged["train_batch_size"] = _derived_batch_size(merged)
        return merged

    def validate_algorithm_config(self, config: dict) -> None:
        if config["num_workers"] < 1:
            raise ValueError(f"'num_workers': {config['num_workers']} — DD-PPO learns on its remote workers "
                             "(there is no central learner); set 'num_workers' >= 1 (or use PPO)")
        per_worker = config["rollout_fragment_length"] * config["num_envs_per_worker"]
        if config["train_batch_size"] != per_worker:
            raise ValueError(
                f"'train_batch_size': {config['train_batch_size']} — in DD-PPO each worker learns on its own "
                f"rollout_fragment_length * num_envs_per_worker = {per_worker} steps; set rollout_fragment_length "
                "instead (and leave train_batch_size out)")
        if config["sgd_minibatch_size"] > per_worker:
            raise ValueError(f"'sgd_minibatch_size': {config['sgd_minibatch_size']} must be <= each worker's "
                             f"batch (rollout_fragment_length * num_envs_per_worker = {per_worker})")
        if config["batch_mode"] != "truncate_episodes":
            raise ValueError(f"'batch_mode': {config['batch_mode']!r} — DD-PPO needs 'truncate_episodes' (equal "
                             "batches on every worker)")
        for key in ("kl_coeff", "kl_target"):
            if config[key] != 0:
                raise ValueError(f"'{key}': {config[key]!r} — DD-PPO has no KL penalty (adapting it would need a "
                                 f"central learner); set '{key}': 0")
        if config["num_gpus"] != 0:
            raise ValueError(f"'num_gpus': {config['num_gpus']!r} — DD-PPO learns on its workers, not in the "
                             "trainer; set 'num_gpus': 0 and 'num_gpus_per_worker': 1 to learn on GPUs")
        for key in ("use_lstm", "use_attention"):
            if config["model"].get(key):
                raise ValueError(f"'model.{key}': True is not supported by DD-PPO (workers' sequence counts differ, "
                                 f"so their SGD steps would not pair up); use PPO or set {key} False")
        for key in ("recreate_failed_workers", "ignore_worker_failures"):
            if config.get(key):
                raise ValueError(f"'{key}': True is not supported by DD-PPO (a process group cannot lose or "
                                 f"replace a member); set it False")
        check_gae_needs_critic(config)

    def setup(self, config: dict) -> None:
        backend = config["torch_distributed_backend"]
        if backend == "auto":
            gpus = config["num_gpus_per_worker"] > 0 and not config["_fake_gpus"]
            backend = "nccl" if gpus else "gloo"
        ranks = {index: rank for rank, index in enumerate(self.workers.remote_worker_indices())}
        join = partial(join_process_group, ranks=ranks, port=free_loopback_port(), backend=backend,
                       timeout_s=float(config["torch_distributed_timeout_s"]))
        join_all(self.workers, join, backend)  # all join at once (the rendezvous waits for all)
        # Start from one set of weights: the trainer's.
        self.workers.sync_weights()

    def training_step(self) -> Dict[str, Any]:
        # === sample and learn: on every remote worker at once ===
        step = partial(sample_and_learn, num_sgd_iter=self.config["num_sgd_iter"],
                       minibatch_size=self.config["sgd_minibatch_size"], shuffle=self.config["shuffle_sequences"],
                       global_vars=self._global_vars(), send_weights=self.config["keep_local_weights_in_sync"])
        results = [r for r in self.workers.foreach_worker_with_index(step) if r is not None]
        # === gather: counters, the workers' mean learner stats ===
        for r in results:
            self.count_sampled(r["env_steps"], r["agent_steps"])
            self.counters["num_env_steps_trained"] += r["env_steps"]
            self.counters["num_agent_steps_trained"] += r["trained"]
        weights = next((r["weights"] for r in results if "weights" in r), None)
        if weights is not None:
            self.workers.local_worker().set_weights(weights)
        self.workers.local_worker().set_global_vars(self._global_vars())
        return _mean_learner_info([r["info"] for r in results])

    def stop(self) -> None:
        workers = getattr(self, "workers", None)
        if workers is not None and not getattr(self, "_stopped", False):
            try:
                workers.foreach_worker_with_index(leave_process_group)
            except Exception:  # a dead worker: killing the actors ends the group anyway
                pass
        super().stop()


def join_all(workers: Any, join: Any, backend: str) -> None:
    """Every worker joins the process group; a worker's failure is reported as what it is.

    A remote worker's error arrives as Ray's `RayTaskError`, which also is an instance of the
    error it wraps (often a ValueError), so callers took it for a config error ("invalid
    config"); here it becomes a RuntimeError that names the Ray in use.
    """
    try:
        workers.foreach_worker_with_index(join)
    except Exception as e:
        if not is_worker_failure(e):
            raise
        raise RuntimeError(
            f"DD-PPO: the remote workers could not join the torch.distributed process group (backend "
            f"{backend!r}, rendezvous on 127.0.0.1) on {ray_in_use()}. This is not a config error; the "
            f"workers must run on this machine and reach each other. The worker said: {e}"
        ) from e


def _mean_learner_info(infos: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Per policy: each learner stat averaged over the workers."""
    out: Dict[str, Any] = {}
    for pid in sorted({pid for info in infos for pid in info}):
        parts = [info[pid] for info in infos if pid in info]
        stats = [p["learner_stats"] for p in parts]
        out[pid] = {
            "learner_stats": {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]},
            "num_nonfinite_updates": max(p.get("num_nonfinite_updates", 0) for p in parts),
        }
    return out
