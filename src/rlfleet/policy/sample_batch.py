"""SampleBatch: one dict of NumPy columns from the sampler to the learner to disk.

Columns are time-major within a batch: row i is one step. Vectorised postprocessing
relies on `EPS_ID` to find episode boundaries.
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np

# The id of the policy a single-agent setup trains (and the key of its batch in a MultiAgentBatch).
DEFAULT_POLICY_ID = "default_policy"


class SampleBatch(dict):
    """A dict of equally long NumPy arrays, one row per step.

    Args:
        *args, **kwargs: as for ``dict``; values are converted with ``np.asarray``.
    """

    OBS = "obs"
    NEXT_OBS = "new_obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    PREV_ACTIONS = "prev_actions"
    PREV_REWARDS = "prev_rewards"
    DONES = "dones"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    INFOS = "infos"
    EPS_ID = "eps_id"
    ENV_ID = "env_id"
    AGENT_INDEX = "agent_index"
    UNROLL_ID = "unroll_id"
    T = "t"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    ACTION_LOGP = "action_logp"
    ACTION_PROB = "action_prob"
    VF_PREDS = "vf_preds"
    BOOTSTRAP_VALUE = "bootstrap_value"
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    SEQ_LENS = "seq_lens"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, value in self.items():
            if not isinstance(value, np.ndarray):
                dict.__setitem__(self, key, np.asarray(value))
        lengths = {len(v) for v in self.values()}
        if len(lengths) > 1:
            sizes = {k: len(v) for k, v in self.items()}
            raise ValueError(f"SampleBatch columns must have equal lengths, got {sizes}")

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, np.asarray(value))

    # --- size ------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of rows (steps)."""
        for value in self.values():
            return len(value)
        return 0

    def __len__(self) -> int:  # len(batch) is its number of rows, as in RLlib 1.x
        return self.count

    def agent_steps(self) -> int:
        return self.count

    def env_steps(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return bool(self.keys())

    # --- combining and slicing -------------------------------------------------
    @staticmethod
    def concat_samples(batches: Sequence["SampleBatch"]) -> "SampleBatch":
        """Concatenates batches row-wise; all must have the same columns."""
        batches = [b for b in batches if b.count > 0]
        if not batches:
            return SampleBatch()
        if isinstance(batches[0], MultiAgentBatch):
            return MultiAgentBatch.concat_samples(batches)
        keys = batches[0].keys()
        for b in batches[1:]:
            if b.keys() != keys:
                raise ValueError(
                    f"Cannot concat batches with different columns: {sorted(keys)} vs {sorted(b.keys())}"
                )
        return SampleBatch({k: np.concatenate([b[k] for b in batches]) for k in keys})

    def concat(self, other: "SampleBatch") -> "SampleBatch":
        return SampleBatch.concat_samples([self, other])

    def copy(self) -> "SampleBatch":
        return SampleBatch({k: v.copy() for k, v in self.items()})

    def slice(self, start: int, end: int) -> "SampleBatch":
        """Rows [start, end) as views (no copy)."""
        return SampleBatch({k: v[start:end] for k, v in self.items()})

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self.slice(key.start or 0, key.stop if key.stop is not None else self.count)
        return dict.__getitem__(self, key)

    def take(self, indices: np.ndarray) -> "SampleBatch":
        """Rows at `indices` (a copy)."""
        return SampleBatch({k: v[indices] for k, v in self.items()})

    def shuffle(self, rng: Optional[np.random.Generator] = None) -> "SampleBatch":
        """Shuffles rows in place with one permutation shared by all columns."""
        rng = rng or np.random.default_rng()
        perm = rng.permutation(self.count)
        for key in list(self.keys()):
            dict.__setitem__(self, key, self[key][perm])
        return self

    def minibatches(
        self, size: int, rng: Optional[np.random.Generator] = None, shuffle: bool = True
    ) -> Iterator["SampleBatch"]:
        """Yields minibatches of `size` rows (the last one may be smaller)."""
        n = self.count
        # Never the global NumPy RNG (DESIGN.md: no global random state).
        order = (rng or np.random.default_rng()).permutation(n) if shuffle else np.arange(n)
        for start in range(0, n, size):
            idx = order[start:start + size]
            yield SampleBatch({k: v[idx] for k, v in self.items()})

    def split_by_episode(self) -> List["SampleBatch"]:
        """Splits at changes of `eps_id` (rows of one episode must be contiguous)."""
        eps = self[SampleBatch.EPS_ID]
        if len(eps) == 0:
            return []
        cuts = np.flatnonzero(eps[1:] != eps[:-1]) + 1
        bounds = [0, *cuts.tolist(), len(eps)]
        return [self.slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def columns(self, keys: Sequence[str]) -> List[np.ndarray]:
        return [self[k] for k in keys]

    def size_bytes(self) -> int:
        return int(sum(v.nbytes for v in self.values()))

    def as_multi_agent(self) -> "MultiAgentBatch":
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.count)

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self.items())
        return f"SampleBatch({self.count}: {cols})"


class MultiAgentBatch:
    """Batches of several policies: ``{policy_id: SampleBatch}`` plus the env steps they span.

    Args:
        policy_batches: one SampleBatch per policy id.
        env_steps: how many env steps produced them (agent steps may be more).
    """

    def __init__(self, policy_batches: Dict[str, SampleBatch], env_steps: int):
        self.policy_batches = dict(policy_batches)
        self.count = int(env_steps)

    def env_steps(self) -> int:
        return self.count

    def agent_steps(self) -> int:
        return sum(b.count for b in self.policy_batches.values())

    def __len__(self) -> int:
        return self.count

    @staticmethod
    def concat_samples(batches: Sequence["MultiAgentBatch"]) -> "MultiAgentBatch":
        per_policy: Dict[str, List[SampleBatch]] = {}
        steps = 0
        for b in batches:
            if isinstance(b, SampleBatch):
                b = b.as_multi_agent()
            steps += b.count
            for pid, pb in b.policy_batches.items():
                per_policy.setdefault(pid, []).append(pb)
        return MultiAgentBatch(
            {pid: SampleBatch.concat_samples(bs) for pid, bs in per_policy.items()}, steps
        )

    def as_multi_agent(self) -> "MultiAgentBatch":
        return self

    def timeslices(self, k: int) -> List["MultiAgentBatch"]:
        """Splits into batches of `k` env steps, all agents' rows of one env step together
        (a step is an `(eps_id, t)` pair): the unit of `replay_mode="lockstep"`."""
        pids = [pid for pid, b in self.policy_batches.items() if b.count]
        if not pids:
            return []
        parts = [self.policy_batches[pid] for pid in pids]
        eps = np.concatenate([b[SampleBatch.EPS_ID] for b in parts])
        t = np.concatenate([b[SampleBatch.T] for b in parts])
        owner = np.concatenate([np.full(b.count, j) for j, b in enumerate(parts)])
        row = np.concatenate([np.arange(b.count) for b in parts])
        order = np.lexsort((row, owner, t, eps))
        eps, t, owner, row = eps[order], t[order], owner[order], row[order]
        new_step = np.ones(len(order), dtype=bool)
        new_step[1:] = (eps[1:] != eps[:-1]) | (t[1:] != t[:-1])
        slice_id = (np.cumsum(new_step) - 1) // int(k)
        out = []
        for s in range(int(slice_id[-1]) + 1):
            sel = slice_id == s
            batches = {pid: parts[j].take(row[sel & (owner == j)]) for j, pid in enumerate(pids)
                       if np.any(sel & (owner == j))}
            out.append(MultiAgentBatch(batches, int(new_step[sel].sum())))
        return out

    def copy(self) -> "MultiAgentBatch":
        return MultiAgentBatch({k: v.copy() for k, v in self.policy_batches.items()}, self.count)

    def size_bytes(self) -> int:
        return sum(b.size_bytes() for b in self.policy_batches.values())

    def __repr__(self) -> str:
        return f"MultiAgentBatch({self.count} env steps: {self.policy_batches})"
