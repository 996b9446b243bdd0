"""The single-agent sampler's chunk buffers: time-major arrays `[T, num_envs, ...]` that each
step writes a row of, turned into one env-major SampleBatch (each sub-env's steps
contiguous) per chunk; with `complete_episodes`, the finished episodes are kept and each
sub-env's unfinished tail waits for the next chunk."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.utils.spaces import action_layout

SB = SampleBatch


def action_layout_of(space: gym.Space):
    # Flat rows per step (Dict / Tuple actions too); `env_actions` rebuilds the env's structure.
    try:
        return action_layout(space)
    except ValueError:
        raise ValueError(f"The single-agent sampler does not support action space {space}") from None


def env_label(venv) -> str:
    """A name for the env when the config has none (a worker built from a creator)."""
    envs = getattr(venv, "envs", None)
    if not envs:
        return type(venv).__name__
    spec = getattr(envs[0], "spec", None)
    return spec.id if spec is not None and spec.id else type(getattr(envs[0], "unwrapped", envs[0])).__name__


def alloc_chunk(steps: int, num_envs: int, obs: np.ndarray, action_row: Tuple[tuple, np.dtype],
                extra: Dict[str, np.ndarray], deferred: Tuple[str, ...], record_infos: bool) -> Dict[str, np.ndarray]:
    """The buffers of a chunk of `steps` steps: the env's columns (observations shaped as
    `obs`, one step's; actions as `action_row = (shape, dtype)`), the per-step `extra`
    columns of the first step, the actor's `deferred` ones (one float32 per row) and, when
    `record_infos`, the infos."""
    T, n = steps, num_envs
    obs_shape = obs.shape[1:]
    # uint8 images stay uint8 (4x smaller); the model scales them.
    obs_dtype = np.uint8 if obs.dtype == np.uint8 else np.float32
    act_shape, act_dtype = action_row
    b = {
        SB.OBS: np.zeros((T, n, *obs_shape), obs_dtype),
        SB.NEXT_OBS: np.zeros((T, n, *obs_shape), obs_dtype),
        SB.ACTIONS: np.zeros((T, n, *act_shape), act_dtype),
        SB.REWARDS: np.zeros((T, n), np.float32),
        SB.TERMINATEDS: np.zeros((T, n), bool),
        SB.DONES: np.zeros((T, n), bool),
        SB.EPS_ID: np.zeros((T, n), np.int64),
        SB.T: np.zeros((T, n), np.int64),
    }
    for key, value in extra.items():
        b[key] = np.zeros((T, n, *value.shape[1:]), value.dtype)
    for key in deferred:
        b[key] = np.zeros((T, n), np.float32)
    if record_infos:  # for `output` only (see SamplerSettings.record_infos)
        b[SB.INFOS] = np.empty((T, n), object)
    return b


def chunk_to_batch(buffers: Dict[str, np.ndarray], rows: int, valid: Optional[np.ndarray] = None) -> SampleBatch:
    """Env-major copy of the first `rows` rows: sub-env 0's steps, then sub-env 1's, ...

    `valid` (bool `[T, num_envs]`, None: all): the rows to keep; the others were a vector
    env's reset steps (no transition)."""
    n = buffers[SB.OBS].shape[1]
    keep = None
    if valid is not None and not valid[:rows].all():
        keep = valid[:rows].swapaxes(0, 1).reshape(-1)
    cols = {}
    for key, buf in buffers.items():
        part = buf[:rows]
        if keep is not None:  # the boolean index copies, env-major
            cols[key] = part.swapaxes(0, 1).reshape(n * rows, *part.shape[2:])[keep]
            continue
        # np.array copies even when the swap is already contiguous (one sub-env): a batch
        # must never alias the buffers the next chunk overwrites.
        cols[key] = np.array(part.swapaxes(0, 1), order="C").reshape(n * rows, *part.shape[2:])
    env_ids = np.repeat(np.arange(n, dtype=np.int64), rows)
    cols[SB.ENV_ID] = env_ids if keep is None else env_ids[keep]
    dones, terms = cols[SB.DONES], cols[SB.TERMINATEDS]
    cols[SB.TRUNCATEDS] = dones & ~terms
    return SampleBatch(cols)


def split_complete(chunk: SampleBatch, pending: List[List[SampleBatch]]) -> SampleBatch:
    """The finished episodes of an env-major `chunk` of `len(pending)` sub-envs (with the
    earlier pieces of each that `pending[i]` held); each sub-env's unfinished tail goes to
    `pending[i]`."""
    num_envs = len(pending)
    # Each sub-env's rows (as many for each, unless a vector env's reset steps were dropped).
    bounds = np.searchsorted(chunk[SB.ENV_ID], np.arange(num_envs + 1))
    dones = chunk[SB.DONES]
    done_parts: List[SampleBatch] = []
    for i in range(num_envs):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        ended = np.flatnonzero(dones[lo:hi])
        if len(ended):
            cut = lo + int(ended[-1]) + 1
            done_parts.extend(pending[i])
            done_parts.append(chunk.slice(lo, cut))
            pending[i] = [chunk.slice(cut, hi)] if cut < hi else []
        elif hi > lo:
            pending[i].append(chunk.slice(lo, hi))
    return SampleBatch.concat_samples(done_parts)


__all__ = ["action_layout_of", "alloc_chunk", "chunk_to_batch", "env_label", "split_complete"]
