"""An ensemble of dynamics models for MB-MPO (Clavera et al. 2018, arXiv 1809.05214, sec. 4.1):
`ensemble_size` MLPs, each predicting the normalised change of the observation
`(next_obs - obs)` from the normalised `(obs, action)`, fitted on the real transitions.

Each member trains on its own shuffle of the data with its own train / validation split
(`valid_split_ratio`) and stops early when its validation loss has not improved for
`patience` epochs (at most `train_epochs`), keeping its best weights, as RLlib 1.x's
`DynamicsEnsembleCustomModel` does. The normalisation statistics (means and standard
deviations of observations, actions and deltas over all real data) are buffers of the
module, so they travel with its `state_dict` (checkpoints, remote workers).
"""
from __future__ import annotations

import copy
from typing import Dict, List, Sequence

import numpy as np
import torch
from torch import nn

from rlfleet.models.fcnet import dense_net

_STATS = ("obs_mean", "obs_std", "act_mean", "act_std", "delta_mean", "delta_std")


class DynamicsEnsemble(nn.Module):
    """`ensemble_size` MLPs `(obs, action) -> next_obs` over flat Box spaces.

    Args:
        obs_dim: size of a flat observation.
        act_dim: size of a flat action (as the env receives it).
        ensemble_size: number of members.
        hiddens: hidden layer sizes of each member.
        activation: hidden activation ("relu", "tanh", ...).
    """

    def __init__(self, obs_dim: int, act_dim: int, ensemble_size: int, hiddens: Sequence[int],
                 activation: str = "relu"):
        super().__init__()
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        self.members = nn.ModuleList(dense_net(self.obs_dim + self.act_dim, list(hiddens), activation, self.obs_dim)
                                     for _ in range(int(ensemble_size)))
        for name, dim in zip(_STATS, (obs_dim, obs_dim, act_dim, act_dim, obs_dim, obs_dim)):
            fill = torch.ones(dim) if name.endswith("std") else torch.zeros(dim)
            self.register_buffer(name, fill)

    @property
    def size(self) -> int:
        return len(self.members)

    def _inputs(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return torch.cat([(obs - self.obs_mean) / self.obs_std, (act - self.act_mean) / self.act_std], dim=-1)

    def predict(self, obs: torch.Tensor, act: torch.Tensor, member: int) -> torch.Tensor:
        """The next observations member `member` predicts for `[B, obs_dim]`, `[B, act_dim]`."""
        delta = self.members[member](self._inputs(obs, act)) * self.delta_std + self.delta_mean
        return obs + delta

    def set_normalization(self, obs: np.ndarray, act: np.ndarray, next_obs: np.ndarray) -> None:
        """Sets the statistics from real data (a floor on the deviations keeps constant
        dimensions finite)."""
        delta = next_obs - obs
        for name, data in zip(_STATS, (obs, obs, act, act, delta, delta)):
            value = data.mean(0) if name.endswith("mean") else np.maximum(data.std(0), 1e-6)
            getattr(self, name).copy_(torch.as_tensor(value, dtype=torch.float32))

    def fit(self, obs: np.ndarray, act: np.ndarray, next_obs: np.ndarray, *, lr: float, batch_size: int,
            train_epochs: int, valid_split_ratio: float, patience: int, rng: np.random.Generator
            ) -> Dict[str, float]:
        """Refits the statistics and every member on all real transitions so far.

        Returns:
            Per member `model_{i}_valid_loss` (best validation MSE in normalised units) and
            `model_{i}_epochs`, with their means `model_valid_loss` and `model_epochs`.
        """
        obs, act, next_obs = (np.asarray(x, dtype=np.float32).reshape(len(x), -1) for x in (obs, act, next_obs))
        self.set_normalization(obs, act, next_obs)
        with torch.no_grad():
            x_all = self._inputs(torch.as_tensor(obs), torch.as_tensor(act))
            y_all = (torch.as_tensor(next_obs - obs) - self.delta_mean) / self.delta_std
        n = len(obs)
        n_valid = max(1, int(round(n * valid_split_ratio))) if n > 1 else 0
        stats: Dict[str, float] = {}
        losses: List[float] = []
        epochs_run: List[int] = []
        for i, member in enumerate(self.members):
            order = rng.permutation(n)
            valid, train = order[:n_valid], order[n_valid:]
            loss, epochs = _fit_member(member, x_all, y_all, train, valid, lr=lr, batch_size=batch_size,
                                       train_epochs=train_epochs, patience=patience, rng=rng)
            stats[f"model_{i}_valid_loss"], stats[f"model_{i}_epochs"] = loss, float(epochs)
            losses.append(loss)
            epochs_run.append(epochs)
        stats["model_valid_loss"] = float(np.mean(losses))
        stats["model_epochs"] = float(np.mean(epochs_run))
        return stats

    def validation_loss(self, obs: np.ndarray, act: np.ndarray, next_obs: np.ndarray) -> float:
        """Mean over members of the normalised-delta MSE on the given transitions."""
        with torch.no_grad():
            o, a = torch.as_tensor(obs, dtype=torch.float32), torch.as_tensor(act, dtype=torch.float32)
            y = (torch.as_tensor(next_obs, dtype=torch.float32) - o - self.delta_mean) / self.delta_std
            x = self._inputs(o, a)
            return float(np.mean([torch.mean((m(x) - y) ** 2).item() for m in self.members]))


def _fit_member(member: nn.Module, x: torch.Tensor, y: torch.Tensor, train: np.ndarray, valid: np.ndarray, *,
                lr: float, batch_size: int, train_epochs: int, patience: int, rng: np.random.Generator):
    """Adam on one member's training rows; early stop on its validation rows (best weights kept).
    Without validation rows (a single transition) it trains `train_epochs` epochs."""
    optimizer = torch.optim.Adam(member.parameters(), lr=lr)
    best, best_state, stale, epoch = float("inf"), None, 0, 0
    for epoch in range(1, train_epochs + 1):
        order = train[rng.permutation(len(train))]
        for start in range(0, len(order), batch_size):
            rows = torch.as_tensor(order[start:start + batch_size])
            loss = torch.mean((member(x[rows]) - y[rows]) ** 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if len(valid) == 0:
            best = float(loss.item())
            continue
        with torch.no_grad():
            rows = torch.as_tensor(valid)
            valid_loss = float(torch.mean((member(x[rows]) - y[rows]) ** 2).item())
        if valid_loss < best:
            best, best_state, stale = valid_loss, copy.deepcopy(member.state_dict()), 0
        else:
            stale += 1
            if stale >= patience:
                break
    if best_state is not None:
        member.load_state_dict(best_state)
    return best, epoch


__all__ = ["DynamicsEnsemble"]
