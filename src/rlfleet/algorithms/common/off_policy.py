"""The replay loop DQN, SAC, DDPG and TD3 share: sample a fragment, store it as n-step
transitions, replay `training_intensity` steps per sampled step (None: one update per nominal
fragment of steps, `default_fragment_steps`), refresh target networks.

An algorithm subclasses `OffPolicyTrainer` (its keys include the replay keys of
`replay_keys.py`) and gives a policy with:
- `learn_on_batch(batch) -> {"learner_stats": {...}, "td_error": np.ndarray}` (one update
  on a replayed batch carrying `weights` and `n_steps`), and
- `update_target(tau=None)` (hard copy for tau 1, Polyak averaging otherwise).

A family extends the loop through its hooks, never by copying it: `replay_items`,
`replay_batch_items` and `replayed_steps` change what a policy's buffer holds (sequences:
`sequence_replay.py`); `store`, `ready_to_learn` and `learn_from_replay` change where samples
go and how one update replays them (one joint buffer for all agents: MADDPG).

Single- and multi-agent runs take one path (`multiagent.replay_mode: "independent"`, the
only mode for now): each policy in `policies_to_train` has its own replay buffer, n-step transitions, updates, priorities and
target updates; `learning_starts`, `training_intensity` and `target_network_update_freq`
count env steps or agent steps per `multiagent.count_steps_by`.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

import numpy as np

from rlfleet.algorithms.common.replay_keys import normalize_replay_config
from rlfleet.algorithms.common.sampling import synchronous_parallel_sample
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from rlfleet.utils.seeding import derive_seed
from rlfleet.replay import BATCH_INDEXES, PrioritizedReplayBuffer, ReplayBuffer, n_step_transitions
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.trainer import Trainer
from rlfleet.utils.schedules import PiecewiseSchedule


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


def default_fragment_steps(config: dict) -> int:
    """Steps a nominal fragment holds: `rollout_fragment_length` per env of each sampling
    worker (the local one when there are no remote ones); with `training_intensity` None
    each such number of sampled steps pays for one update of `train_batch_size`."""
    return (int(config["rollout_fragment_length"]) * int(config["num_envs_per_worker"])
            * max(1, int(config["num_workers"])))


class OffPolicyTrainer(Trainer):
    """Trainer base for replay-based algorithms: `training_step` below is the whole loop.

    Single-agent runs take the same path as multi-agent ones (a single-agent batch is a
    MultiAgentBatch of one policy): each policy in `policies_to_train` has its own replay
    buffer, made on first use; policies that do not train have none.

    Attributes:
        replay_buffers: `{policy_id: ReplayBuffer}` of the trained policies (their
            `get_state()` / `set_state()` are what a checkpoint stores when
            `store_buffer_in_checkpoints`).
    """

    def validate_algorithm_config(self, config: dict) -> None:
        normalize_replay_config(config)
        if MultiAgentSettings.from_config(config).lockstep:
            raise ValueError(f"'multiagent.replay_mode': 'lockstep' is not available yet for {self._name} in this "
                             "version of rlfleet; use 'independent' (one replay buffer per policy)")

    def setup(self, config: dict) -> None:
        self.replay_buffers: Dict[str, ReplayBuffer] = {}
        self.beta_schedule = PiecewiseSchedule([
            (0, config.get("prioritized_replay_beta", 0.4)),
            (config.get("prioritized_replay_beta_annealing_timesteps", 1),
             config.get("final_prioritized_replay_beta", 0.4)),
        ])
        # Kept in `counters` so that they show in results and travel with checkpoints.
        self.counters.setdefault("num_target_updates", 0)
        self.counters.setdefault("last_target_update_ts", 0)
        self._update_credit = 0.0
        self._last_infos: Dict[str, Any] = {}  # per policy: the info of its last update

    @property
    def local_replay_buffer(self) -> Optional[ReplayBuffer]:
        """The default policy's replay buffer (None when it does not train)."""
        if DEFAULT_POLICY_ID not in self.workers.local_worker().policies_to_train:
            return self.replay_buffers.get(DEFAULT_POLICY_ID)
        return self.replay_buffer(DEFAULT_POLICY_ID)

    def replay_buffer(self, policy_id: str) -> ReplayBuffer:
        """Policy `policy_id`'s replay buffer, made (empty, seeded per policy) on first use."""
        buffer = self.replay_buffers.get(policy_id)
        if buffer is None:
            buffer = self.replay_buffers[policy_id] = make_replay_buffer(self.config, policy_id)
        return buffer

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, **kwargs: Any) -> None:
        super().remove_policy(policy_id, **kwargs)
        self.replay_buffers.pop(policy_id, None)
        self._last_infos.pop(policy_id, None)

    def updates_owed(self, steps_sampled: int) -> int:
        """How many replayed batches the `steps_sampled` new steps pay for.

        `training_intensity` is replayed steps per sampled step (the replay ratio): each
        sampled step earns `training_intensity / train_batch_size` updates; the fraction
        carries over, so the ratio holds exactly over time. None: one update per nominal
        fragment (`default_fragment_steps`), the ratio the config's fragment size implies.
        """
        ti = self.config.get("training_intensity")
        if ti is None:
            if self.config.get("batch_mode") != "complete_episodes":
                return 1  # truncated fragments are nominal: one update each
            # Whole episodes make fragments of any length (a 200-step episode for a nominal
            # fragment of 1 step): counting their steps keeps the update rate of the same
            # config with truncated fragments (SAC's one update per env step for RNNSAC).
            self._update_credit += steps_sampled / default_fragment_steps(self.config)
        else:
            self._update_credit += steps_sampled * float(ti) / self.config["train_batch_size"]
        n = int(math.floor(self._update_credit))
        self._update_credit -= n
        return n

    def replay_items(self, policy_id: str, batch: SampleBatch, gamma: float) -> SampleBatch:
        """What a policy's buffer stores of a sampled batch: one n-step transition per row
        (R2D2 stores sequences instead)."""
        return n_step_transitions(batch, self.config["n_step"], gamma)

    def replay_batch_items(self) -> int:
        """Items (transitions here) replayed per update."""
        return self.config["train_batch_size"]

    def replayed_steps(self, replayed: SampleBatch) -> int:
        """Agent steps a replayed batch holds (one per transition here)."""
        return replayed.count

    def _replay_update(self, policy, buffer, sampled: int) -> Dict[str, Any]:
        """One update of `policy` on a batch replayed from `buffer`; refreshes priorities."""
        cfg = self.config
        replayed = buffer.sample(self.replay_batch_items(), beta=self.beta_schedule(sampled))
        info = policy.learn_on_batch(replayed)
        td_error = info.pop("td_error")
        if cfg.get("prioritized_replay"):
            buffer.update_priorities(replayed[BATCH_INDEXES], np.abs(td_error) + cfg["prioritized_replay_eps"])
        self.counters["num_agent_steps_trained"] += self.replayed_steps(replayed)
        return info

    # --- the loop's three steps a family may replace (MADDPG replays jointly) ----------
    def store(self, batch: MultiAgentBatch) -> None:
        """Adds a sampled fragment to the replay: each trained policy's rows, as
        `replay_items` (n-step transitions here), to that policy's own buffer."""
        local = self.workers.local_worker()
        for pid in local.policies_to_train:
            policy_batch = batch.policy_batches.get(pid)
            if pid in local.policy_map and policy_batch is not None and policy_batch.count > 0:
                gamma = self.get_policy(pid).config.get("gamma", self.config["gamma"])
                self.replay_buffer(pid).add(self.replay_items(pid, policy_batch, gamma))

    def ready_to_learn(self, to_train: List[str]) -> List[str]:
        """The policies of `to_train` with something to replay (a non-empty buffer)."""
        return [pid for pid in to_train if len(self.replay_buffers.get(pid, ())) > 0]

    def learn_from_replay(self, policy_ids: List[str], sampled: int) -> None:
        """One update: each policy of `policy_ids` learns on a batch replayed from its own
        buffer (`_last_infos` keeps its stats)."""
        for pid in policy_ids:
            self._last_infos[pid] = self._replay_update(self.get_policy(pid), self.replay_buffers[pid], sampled)

    def training_step(self) -> Dict[str, Any]:
        cfg = self.config
        local = self.workers.local_worker()
        by_agent = MultiAgentSettings.from_config(cfg).count_agent_steps
        # === sample one fragment ===
        batch = synchronous_parallel_sample(self.workers, 1).as_multi_agent()
        self.count_sampled(batch.env_steps(), batch.agent_steps())
        # === store it in the replay ===
        self.store(batch)
        sampled = self.counters["num_agent_steps_sampled" if by_agent else "num_env_steps_sampled"]
        new_steps = batch.agent_steps() if by_agent else batch.env_steps()

        # === replay and learn, `updates_owed` times ===
        to_train = [pid for pid in local.policies_to_train if pid in local.policy_map]
        if sampled >= cfg["learning_starts"]:
            ready = self.ready_to_learn(to_train)
            for _ in range(self.updates_owed(new_steps) if ready else 0):
                self.learn_from_replay(ready, sampled)
                self.counters["num_env_steps_trained"] += cfg["train_batch_size"]
                self._update_targets_when_due(ready, sampled)

        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return {pid: self._last_infos.get(pid, {}) for pid in to_train}

    def _update_targets_when_due(self, policy_ids, sampled: int) -> None:
        """Refreshes the target networks of `policy_ids` once `target_network_update_freq`
        env steps were sampled since the last refresh."""
        if sampled - self.counters["last_target_update_ts"] >= self.config["target_network_update_freq"]:
            for pid in policy_ids:
                self.get_policy(pid).update_target()
            self.counters["num_target_updates"] += 1
            self.counters["last_target_update_ts"] = sampled

    # --- state: the trainer's, plus the replay buffers ------------------------------
    def get_state(self) -> Dict[str, Any]:
        """`Trainer.get_state()`, plus the fraction of an update `training_intensity` has paid
        for (`update_credit`: a resume then replays exactly as the run would have) and
        `replay_buffers: {policy_id: buffer state}` with `store_buffer_in_checkpoints`."""
        state = super().get_state()
        state["update_credit"] = float(self._update_credit)
        if self.config.get("store_buffer_in_checkpoints"):
            state["replay_buffers"] = {pid: buffer.get_state() for pid, buffer in self.replay_buffers.items()}
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        """`Trainer.set_state(state)`, then the replay buffers it holds (checked first: nothing
        changes when one does not fit)."""
        buffers = state.get("replay_buffers") or {}
        policies = self.workers.local_worker().policy_map
        for pid, buffer_state in buffers.items():
            if pid not in policies:
                raise ValueError(f"it holds a replay buffer of policy {pid!r}, which this trainer does not have "
                                 f"(its policies: {sorted(policies)})")
            if int(buffer_state.get("capacity", -1)) != int(self.config["buffer_size"]):
                raise ValueError(f"it holds a replay buffer of capacity {buffer_state.get('capacity')!r} for policy "
                                 f"{pid!r}; this trainer's buffers have {self.config['buffer_size']} (set buffer_size "
                                 "to match)")
        super().set_state(state)
        self._update_credit = float(state.get("update_credit", 0.0))
        for pid, buffer_state in buffers.items():
            self.replay_buffer(pid).set_state(buffer_state)
