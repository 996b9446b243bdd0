"""The replay loop DQN, SAC, DDPG and TD3 share: sample a fragment, store it as n-step
transitions, replay `training_intensity` steps per sampled step, refresh target networks.

An algorithm subclasses `OffPolicyTrainer` (its `DEFAULT_CONFIG` lists the replay keys
below) and gives a policy with:
- `learn_on_batch(batch) -> {"learner_stats": {...}, "td_error": np.ndarray}` (one update
  on a replayed batch carrying `weights` and `n_steps`), and
- `update_target(tau=None)` (hard copy for tau 1, Polyak averaging otherwise).

Multi-agent (`multiagent.replay_mode: "independent"`, the only mode for now): each policy in
`policies_to_train` has its own replay buffer, n-step transitions, updates, priorities and
target updates; `learning_starts`, `training_intensity` and `target_network_update_freq`
count env steps or agent steps per `multiagent.count_steps_by`.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np
import torch

from rlfleet.algorithms.sampling import synchronous_parallel_sample
from rlfleet.config import DEFAULT_POLICY_ID
from rlfleet.policy.sample_batch import MultiAgentBatch
from rlfleet.policy.torch_policy import derive_seed
from rlfleet.replay import BATCH_INDEXES, PrioritizedReplayBuffer, ReplayBuffer, n_step_transitions
from rlfleet.trainer import Trainer
from rlfleet.utils.schedules import PiecewiseSchedule

# Newer-style `replay_buffer_config` types, and whether each is prioritized.
_BUFFER_TYPES = {
    "ReplayBuffer": False, "MultiAgentReplayBuffer": False,
    "PrioritizedReplayBuffer": True, "MultiAgentPrioritizedReplayBuffer": True,
}
# `replay_buffer_config` sub-keys and the 1.x keys they stand for.
_BUFFER_ALIASES = {
    "capacity": "buffer_size",
    "prioritized_replay_alpha": "prioritized_replay_alpha",
    "prioritized_replay_beta": "prioritized_replay_beta",
    "prioritized_replay_eps": "prioritized_replay_eps",
    "learning_starts": "learning_starts",
}


def soft_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """target <- tau * source + (1 - tau) * target, parameters and buffers alike (tau 1: copy)."""
    with torch.no_grad():
        for t, s in zip(target.parameters(), source.parameters()):
            if tau >= 1.0:
                t.copy_(s)
            else:
                t.mul_(1.0 - tau).add_(s, alpha=tau)
        for t, s in zip(target.buffers(), source.buffers()):
            t.copy_(s)


def normalize_replay_config(config: dict) -> None:
    """Folds `replay_buffer_config` into the 1.x keys and checks the replay keys (in place).

    Raises:
        ValueError: naming the key, the value and what is allowed.
    """
    rb = config.get("replay_buffer_config")
    if rb is not None:
        if not isinstance(rb, dict):
            raise ValueError(f"'replay_buffer_config': {rb!r} must be None or a dict such as "
                             "{'capacity': 50000, 'type': 'MultiAgentPrioritizedReplayBuffer'}")
        unknown = sorted(set(rb) - set(_BUFFER_ALIASES) - {"type"})
        if unknown:
            raise ValueError(f"'replay_buffer_config': unknown sub-key(s) {unknown}; known: "
                             f"{sorted(set(_BUFFER_ALIASES) | {'type'})}")
        if "type" in rb:
            if rb["type"] not in _BUFFER_TYPES:
                raise ValueError(f"'replay_buffer_config.type': {rb['type']!r} is unknown; use one of "
                                 f"{sorted(_BUFFER_TYPES)}")
            config["prioritized_replay"] = _BUFFER_TYPES[rb["type"]]
        for sub, key in _BUFFER_ALIASES.items():
            if sub in rb:
                config[key] = rb[sub]

    def int_key(key: str, lo: int) -> None:
        v = config[key]
        if isinstance(v, float) and v.is_integer():  # 1e6 in YAML
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"'{key}': {config[key]!r} must be an int >= {lo}")
        config[key] = int(v)

    int_key("buffer_size", 1)
    int_key("learning_starts", 0)
    int_key("n_step", 1)
    int_key("target_network_update_freq", 0)
    ti = config.get("training_intensity")
    if ti is not None and (isinstance(ti, bool) or not isinstance(ti, (int, float)) or not ti > 0):
        raise ValueError(f"'training_intensity': {ti!r} must be None (one update per sampled fragment) "
                         "or a number > 0 (replayed steps per sampled step)")
    if config.get("prioritized_replay"):
        int_key("prioritized_replay_beta_annealing_timesteps", 1)
        for key, lo in (("prioritized_replay_alpha", 0.0), ("prioritized_replay_beta", 0.0),
                        ("final_prioritized_replay_beta", 0.0)):
            v = config[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= lo:
                raise ValueError(f"'{key}': {v!r} must be a number >= {lo}")
        if not config["prioritized_replay_eps"] > 0:
            raise ValueError(f"'prioritized_replay_eps': {config['prioritized_replay_eps']!r} must be > 0 "
                             "(a zero priority would never be replayed again)")
    if config.get("worker_side_prioritization"):
        raise ValueError("'worker_side_prioritization': True is not available yet in this version of rlfleet "
                         "(needs remote replay workers); use the default False")


def make_replay_buffer(config: dict, policy_id: str = DEFAULT_POLICY_ID) -> ReplayBuffer:
    """The buffer the (normalized) config asks for, seeded from `seed` (and `policy_id`
    for a policy other than the default one)."""
    seed = config.get("seed")
    parts = () if policy_id == DEFAULT_POLICY_ID else (policy_id,)
    rng_seed = None if seed is None else derive_seed(seed, "replay_buffer", *parts)
    if config.get("prioritized_replay"):
        return PrioritizedReplayBuffer(config["buffer_size"], alpha=config["prioritized_replay_alpha"],
                                       seed=rng_seed)
    return ReplayBuffer(config["buffer_size"], seed=rng_seed)


class OffPolicyTrainer(Trainer):
    """Trainer base for replay-based algorithms: `training_step` below is the whole loop.

    Attributes:
        local_replay_buffer: the default policy's ReplayBuffer (its `get_state()` /
            `set_state()` are what a checkpoint stores when `store_buffer_in_checkpoints`).
        replay_buffers: `{policy_id: ReplayBuffer}`, the default policy's included; the
            others are made on first use (see `replay_buffer`).
    """

    def validate_algorithm_config(self, config: dict) -> None:
        normalize_replay_config(config)
        if (config.get("multiagent") or {}).get("replay_mode") == "lockstep":
            raise ValueError(f"'multiagent.replay_mode': 'lockstep' is not available yet for {self._name} in this "
                             "version of rlfleet; use 'independent' (one replay buffer per policy)")

    def setup(self, config: dict) -> None:
        self.local_replay_buffer = make_replay_buffer(config)
        self.replay_buffers: Dict[str, ReplayBuffer] = {DEFAULT_POLICY_ID: self.local_replay_buffer}
        self.beta_schedule = PiecewiseSchedule([
            (0, config.get("prioritized_replay_beta", 0.4)),
            (config.get("prioritized_replay_beta_annealing_timesteps", 1),
             config.get("final_prioritized_replay_beta", 0.4)),
        ])
        # Kept in `counters` so that they show in results and travel with checkpoints.
        self.counters.setdefault("num_target_updates", 0)
        self.counters.setdefault("last_target_update_ts", 0)
        self._update_credit = 0.0
        self._last_info: Dict[str, Any] = {}
        self._last_infos: Dict[str, Any] = {}  # multi-agent: per policy

    def replay_buffer(self, policy_id: str) -> ReplayBuffer:
        """Policy `policy_id`'s replay buffer, made (empty, seeded per policy) on first use."""
        buffer = self.replay_buffers.get(policy_id)
        if buffer is None:
            buffer = self.replay_buffers[policy_id] = make_replay_buffer(self.config, policy_id)
        return buffer

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, **kwargs: Any) -> None:
        super().remove_policy(policy_id, **kwargs)
        if policy_id != DEFAULT_POLICY_ID:
            self.replay_buffers.pop(policy_id, None)
        self._last_infos.pop(policy_id, None)

    def updates_owed(self, steps_sampled: int) -> int:
        """How many replayed batches the `steps_sampled` new steps pay for.

        `training_intensity` is replayed steps per sampled step (the replay ratio): each
        sampled step earns `training_intensity / train_batch_size` updates; the fraction
        carries over, so the ratio holds exactly over time. None: one update per fragment.
        """
        ti = self.config.get("training_intensity")
        if ti is None:
            return 1
        self._update_credit += steps_sampled * float(ti) / self.config["train_batch_size"]
        n = int(math.floor(self._update_credit))
        self._update_credit -= n
        return n

    def _learn_from_replay(self, policy, buffer, sampled: int) -> Dict[str, Any]:
        """One update of `policy` on a batch replayed from `buffer`; refreshes priorities."""
        cfg = self.config
        replayed = buffer.sample(cfg["train_batch_size"], beta=self.beta_schedule(sampled))
        info = policy.learn_on_batch(replayed)
        td_error = info.pop("td_error")
        if cfg.get("prioritized_replay"):
            buffer.update_priorities(replayed[BATCH_INDEXES], np.abs(td_error) + cfg["prioritized_replay_eps"])
        self.counters["num_agent_steps_trained"] += replayed.count
        return info

    def training_step(self) -> Dict[str, Any]:
        cfg = self.config
        buffer = self.local_replay_buffer
        policy = self.get_policy()
        # === sample one fragment; store it as n-step transitions ===
        batch = synchronous_parallel_sample(self.workers, 1)
        if isinstance(batch, MultiAgentBatch):
            return self._training_step_multi_agent(batch)
        self.counters["num_env_steps_sampled"] += batch.count
        self.counters["num_agent_steps_sampled"] += batch.count
        buffer.add(n_step_transitions(batch, cfg["n_step"], cfg["gamma"]))
        sampled = self.counters["num_env_steps_sampled"]

        # === replay and learn ===
        info = self._last_info
        if sampled >= cfg["learning_starts"]:
            for _ in range(self.updates_owed(batch.count)):
                info = self._learn_from_replay(policy, buffer, sampled)
                self.counters["num_env_steps_trained"] += cfg["train_batch_size"]
                # === target networks: every `target_network_update_freq` sampled steps ===
                if sampled - self.counters["last_target_update_ts"] >= cfg["target_network_update_freq"]:
                    policy.update_target()
                    self.counters["num_target_updates"] += 1
                    self.counters["last_target_update_ts"] = sampled
            self._last_info = info

        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return {DEFAULT_POLICY_ID: info}

    def _training_step_multi_agent(self, batch: MultiAgentBatch) -> Dict[str, Any]:
        """`training_step` with one replay buffer per trainable policy ("independent")."""
        cfg = self.config
        local = self.workers.local_worker()
        by_agent = (cfg.get("multiagent") or {}).get("count_steps_by") == "agent_steps"
        self.counters["num_env_steps_sampled"] += batch.env_steps()
        self.counters["num_agent_steps_sampled"] += batch.agent_steps()
        # === store: each trainable policy's samples as n-step transitions in its buffer ===
        to_train = [pid for pid in local.policies_to_train if pid in local.policy_map]
        for pid in to_train:
            policy_batch = batch.policy_batches.get(pid)
            if policy_batch is not None and policy_batch.count > 0:
                gamma = self.get_policy(pid).config.get("gamma", cfg["gamma"])
                self.replay_buffer(pid).add(n_step_transitions(policy_batch, cfg["n_step"], gamma))
        sampled = self.counters["num_agent_steps_sampled" if by_agent else "num_env_steps_sampled"]
        new_steps = batch.agent_steps() if by_agent else batch.env_steps()

        # === replay and learn, per policy ===
        if sampled >= cfg["learning_starts"]:
            ready = [pid for pid in to_train if pid in self.replay_buffers and len(self.replay_buffers[pid]) > 0]
            for _ in range(self.updates_owed(new_steps) if ready else 0):
                for pid in ready:
                    info = self._learn_from_replay(self.get_policy(pid), self.replay_buffers[pid], sampled)
                    self._last_infos[pid] = info
                self.counters["num_env_steps_trained"] += cfg["train_batch_size"]
                # === target networks of the policies that learn ===
                if sampled - self.counters["last_target_update_ts"] >= cfg["target_network_update_freq"]:
                    for pid in ready:
                        self.get_policy(pid).update_target()
                    self.counters["num_target_updates"] += 1
                    self.counters["last_target_update_ts"] = sampled

        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return {pid: info for pid, info in self._last_infos.items() if pid in local.policy_map}


def replay_config(**overrides: Any) -> Dict[str, Optional[Any]]:
    """The replay keys of an off-policy DEFAULT_CONFIG (DQN's values), with `overrides`."""
    out: Dict[str, Any] = {
        # Size of the replay buffer (in transitions); `replay_buffer_config.capacity` is the
        # newer spelling.
        "buffer_size": 50000,
        "replay_buffer_config": None,
        # Whether a checkpoint stores the buffer's contents too (as arrays, never pickle).
        "store_buffer_in_checkpoints": False,
        "prioritized_replay": True,
        "prioritized_replay_alpha": 0.6,
        "prioritized_replay_beta": 0.4,
        "final_prioritized_replay_beta": 0.4,
        "prioritized_replay_beta_annealing_timesteps": 20000,
        "prioritized_replay_eps": 1e-6,
        # Env steps sampled before learning starts.
        "learning_starts": 1000,
        # Replayed steps per sampled step; None: one train batch per sampled fragment.
        "training_intensity": None,
        # Sampled env steps between target network updates (0: after every update).
        "target_network_update_freq": 500,
        "n_step": 1,
        "worker_side_prioritization": False,
    }
    out.update(overrides)
    return out
