"""Off-policy estimators: the return the current policy would get, from another policy's data.

Each estimator takes batches of logged episodes (with the behaviour policy's `action_prob`
or `action_logp`) and returns one `OffPolicyEstimate` per episode with

- `V_prev`: the logged (behaviour) policy's discounted return, sum_t gamma^t r_t;
- `V_target`: the estimate for the current policy;
- `V_gain_est`: V_target / V_prev.

`is` is step-wise importance sampling (Precup et al. 2000): V_target = sum_t gamma^t p_t
r_t with p_t the product of pi(a_k|s_k) / mu(a_k|s_k) over k <= t. `wis` is its weighted
form: p_t is divided by the mean p_t of every episode seen so far at step t (the running
normaliser of RLlib 1.x's `WeightedImportanceSamplingEstimator`). Run on the workers, on each
offline batch, with the worker's current policy (`input_evaluation`).
"""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import torch

from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.offline.off_policy_estimate import OffPolicyEstimate

SB = SampleBatch
ESTIMATORS = ("is", "wis")


def action_log_likelihoods(policy, batch: SampleBatch) -> np.ndarray:
    """log pi(a|s) of the batch's actions under `policy` (its action distribution)."""
    if hasattr(policy, "compute_log_likelihoods"):
        return np.asarray(policy.compute_log_likelihoods(batch[SB.ACTIONS], batch[SB.OBS]), np.float64)
    obs = np.asarray(batch[SB.OBS])
    obs = obs if obs.dtype == np.uint8 else obs.astype(np.float32)
    state = [torch.as_tensor(np.broadcast_to(s, (len(obs), *s.shape)).copy()) for s in policy.get_initial_state()]
    with torch.inference_mode():
        dist_inputs, _ = policy.model({SB.OBS: torch.as_tensor(obs)}, state, None)
        dist = policy.dist_class(dist_inputs, policy.model)
        return dist.logp(torch.as_tensor(batch[SB.ACTIONS])).double().numpy()


def behaviour_probs(batch: SampleBatch) -> np.ndarray:
    if SB.ACTION_PROB in batch:
        return np.asarray(batch[SB.ACTION_PROB], np.float64)
    if SB.ACTION_LOGP in batch:
        return np.exp(np.asarray(batch[SB.ACTION_LOGP], np.float64))
    raise ValueError("input_evaluation ('is' / 'wis') needs the behaviour policy's 'action_prob' or 'action_logp' "
                     f"column, which this offline batch lacks (it has {sorted(batch.keys())}); set "
                     "'input_evaluation': [] to train without off-policy estimates")


class ImportanceSampling:
    """Step-wise importance sampling (`is`)."""

    name = "is"

    def __init__(self, policy, gamma: float):
        self.policy = policy
        self.gamma = float(gamma)

    def _ratios(self, batch: SampleBatch) -> np.ndarray:
        new = np.exp(action_log_likelihoods(self.policy, batch))
        return new / np.maximum(behaviour_probs(batch), 1e-12)

    def estimate(self, batch: SampleBatch) -> List[OffPolicyEstimate]:
        """One estimate per episode (piece) of `batch`."""
        ratios = self._ratios(batch)
        rewards = np.asarray(batch[SB.REWARDS], np.float64)
        out = []
        for lo, hi in _episode_bounds(batch[SB.EPS_ID]):
            p = np.cumprod(ratios[lo:hi])
            out.append(self._one(rewards[lo:hi], p))
        return out

    def _one(self, rewards: np.ndarray, p: np.ndarray) -> OffPolicyEstimate:
        disc = self.gamma ** np.arange(len(rewards))
        v_prev = float(np.sum(disc * rewards))
        v_target = float(np.sum(disc * p * rewards))
        return _estimate(self.name, v_prev, v_target)


class WeightedImportanceSampling(ImportanceSampling):
    """Weighted step-wise importance sampling (`wis`)."""

    name = "wis"

    def __init__(self, policy, gamma: float):
        super().__init__(policy, gamma)
        self._sums = np.zeros(0)  # per step t: sum of p_t over episodes seen
        self._counts = np.zeros(0)

    def _one(self, rewards: np.ndarray, p: np.ndarray) -> OffPolicyEstimate:
        n = len(p)
        if n > len(self._sums):
            self._sums = np.concatenate([self._sums, np.zeros(n - len(self._sums))])
            self._counts = np.concatenate([self._counts, np.zeros(n - len(self._counts))])
        self._sums[:n] += p
        self._counts[:n] += 1
        w = self._sums[:n] / self._counts[:n]
        disc = self.gamma ** np.arange(n)
        v_prev = float(np.sum(disc * rewards))
        v_target = float(np.sum(disc * p / np.maximum(w, 1e-12) * rewards))
        return _estimate(self.name, v_prev, v_target)

    def get_state(self) -> Dict[str, list]:
        return {"sums": self._sums.tolist(), "counts": self._counts.tolist()}


def _estimate(name: str, v_prev: float, v_target: float) -> OffPolicyEstimate:
    return OffPolicyEstimate(name, {"V_prev": v_prev, "V_target": v_target,
                                    "V_gain_est": v_target / max(1e-8, v_prev)})


def _episode_bounds(eps_id: np.ndarray):
    n = len(eps_id)
    cuts = np.flatnonzero(eps_id[1:] != eps_id[:-1]) + 1 if n > 1 else np.zeros(0, int)
    bounds = [0, *cuts.tolist(), n]
    return list(zip(bounds[:-1], bounds[1:]))


def make_estimators(names, policy, gamma: float) -> list:
    """The estimators `input_evaluation` names ("simulation" is not an estimator: the
    offline sampler handles it)."""
    classes = {"is": ImportanceSampling, "wis": WeightedImportanceSampling}
    return [classes[n](policy, gamma) for n in names if n in classes]
