"""Learner devices and multi-tower SGD (`num_gpus`, `_fake_gpus`, `num_gpus_per_worker`).

Devices: a policy on the trainer's own worker (index 0) learns on `num_gpus` GPUs, one on a
remote worker on `num_gpus_per_worker`; 0 is the CPU. A fraction (0.5) is one device, as in
RLlib 1.x (`ceil`): several policies may share a GPU. `_fake_gpus: True` simulates the
GPUs with CPU "towers", so every line below runs on a machine without one.

Towers: with two or more devices the policy's model is copied onto each (`Towers`); the
train batch is loaded onto every device once (`Towers.load`); each minibatch is split into
contiguous shards, one per tower; every tower computes its shard's loss and gradient with
its own copy; the gradients are combined on the first device so that the result is the
one-tower gradient of the whole minibatch, and the policy takes one optimizer step. The
copies are re-synced from the first tower's weights before each step (that also carries
`set_weights`, target-network updates, ... to them).

Combining: a loss that is a mean over the batch's rows (the default, `loss_reduction =
"mean"`) is the row-weighted mean of the shard losses, so each shard's loss is scaled by
its share of the real rows (padded sequence rows excluded) before backprop and the
gradients are summed; a summed loss (`loss_reduction = "sum"`, A2C) is the sum of the shard
losses.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from rlfleet.policy.learning_loop import backward_each, losses_by_optimizer
from rlfleet.policy.rnn_sequencing import SEQ_MASK
from rlfleet.policy.tensor_batch import TensorBatch, flat_rows, to_device

Tensors = Dict[str, torch.Tensor]


def cuda_available() -> bool:
    return torch.cuda.is_available()


def num_devices_requested(config: dict) -> float:
    """GPUs this process's policies learn on: `num_gpus` on the trainer's own worker (index
    0), `num_gpus_per_worker` on a remote worker."""
    key = "num_gpus" if int(config.get("worker_index", 0) or 0) == 0 else "num_gpus_per_worker"
    return float(config.get(key) or 0)


def learner_devices(config: dict) -> List[torch.device]:
    """The devices a policy with `config` learns on (the first also acts): one entry per tower.

    Raises:
        ValueError: naming the key when GPUs are asked for and CUDA has none (or too few),
            unless `_fake_gpus`.
    """
    remote = int(config.get("worker_index", 0) or 0) > 0
    key = "num_gpus_per_worker" if remote else "num_gpus"
    requested = num_devices_requested(config)
    if requested <= 0:
        return [torch.device("cpu")]
    count = int(math.ceil(requested))
    if config.get("_fake_gpus"):
        return [torch.device("cpu")] * count
    if not cuda_available():
        raise ValueError(
            f"'{key}': {config.get(key)!r} asks for GPUs, but torch sees no CUDA device here "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda is not None}); set '_fake_gpus': True to "
            f"simulate them on the CPU (towers), or '{key}': 0 to learn on the CPU")
    have = torch.cuda.device_count()
    if count > have:
        raise ValueError(f"'{key}': {config.get(key)!r} asks for {count} GPUs, but only {have} are visible "
                         f"(CUDA_VISIBLE_DEVICES); lower '{key}' to at most {have}")
    return [torch.device("cuda", i) for i in range(count)]


class ShardedBatch(list):
    """A minibatch already split across the towers: one `TensorBatch` per tower, each on its
    tower's device (what `Towers.minibatch` returns; `learning_loop.torch_step` takes it as is)."""


class Towers:
    """One copy of a policy's model per device; the first is the policy's own model.

    Args:
        model: the policy's model (already on `devices[0]`; its optimizers hold its parameters).
        devices: one device per tower (CPU repeated for `_fake_gpus`).
    """

    def __init__(self, model: torch.nn.Module, devices: Sequence[torch.device]):
        if len(devices) < 2:
            raise ValueError("Towers needs two or more devices")
        self.devices = list(devices)
        try:
            copies = [copy.deepcopy(model).to(d) for d in self.devices[1:]]
        except Exception as err:  # a custom model holding something deepcopy cannot copy
            raise ValueError(f"num_gpus > 1 copies the model once per tower, but {type(model).__name__} cannot be "
                             f"deep-copied ({type(err).__name__}: {err}); use one GPU (num_gpus <= 1)") from err
        self.models: List[torch.nn.Module] = [model] + copies
        main_params = list(model.parameters())
        self._param_index = {id(p): i for i, p in enumerate(main_params)}
        self._params = [main_params] + [list(m.parameters()) for m in copies]
        # (main tensor, copy tensor) for every parameter and buffer, to re-sync the copies.
        main_state = list(model.state_dict(keep_vars=True).values())
        self._pairs = [list(zip(main_state, m.state_dict(keep_vars=True).values())) for m in copies]
        self._loaded: Optional[List[TensorBatch]] = None

    def __len__(self) -> int:
        return len(self.models)

    # --- data --------------------------------------------------------------------------
    def load(self, tensors: Tensors) -> None:
        """Puts the train batch on every tower's device, once per train batch (the first
        tower's device already holds it; fake towers share the same tensors)."""
        batch = _as_batch(tensors)
        self._loaded = [batch] + [batch.to(d) for d in self.devices[1:]]

    def minibatch(self, idx: torch.Tensor) -> ShardedBatch:
        """Rows (or sequences) `idx` of the loaded train batch, split into one contiguous
        shard per tower, each gathered on its own device."""
        if self._loaded is None:
            raise RuntimeError("Towers.minibatch before Towers.load")
        out = ShardedBatch()
        for part, tensors, device in zip(torch.tensor_split(idx, len(self.models)), self._loaded, self.devices):
            out.append(tensors.take(to_device(part, device)))
        return out

    def split(self, tensors: Tensors) -> ShardedBatch:
        """A minibatch on the first device split into per-tower shards (moved to each device)."""
        n = len(next(iter(tensors.values())))
        parts = torch.tensor_split(torch.arange(n), len(self.models))
        batch = _as_batch(tensors)
        return ShardedBatch(batch.take(p).to(d) for p, d in zip(parts, self.devices))

    # --- gradients ---------------------------------------------------------------------
    def sync(self) -> None:
        """Copies the first tower's weights (and buffers) into the others."""
        with torch.no_grad():
            for pairs in self._pairs:
                for main, other in pairs:
                    other.copy_(main)

    def gradients(self, policy: Any, minibatch, names: List[str]
                  ) -> Tuple[Dict[str, torch.Tensor], Dict[str, torch.Tensor]]:
        """Backpropagates the loss of `minibatch` (a `Tensors` on the first device or a
        `ShardedBatch`) through every tower and leaves the combined gradient in the first
        tower's parameters (the optimizers' ones). The optimizers' gradients must be zeroed.

        Returns:
            `({optimizer name: combined loss (detached)}, combined stats)`; per-row stats
            (a `td_error`) are concatenated in row order.
        """
        self.sync()
        shards = minibatch if isinstance(minibatch, ShardedBatch) else self.split(minibatch)
        sizes = [_real_rows(s) for s in shards]
        total = float(sum(sizes)) or 1.0
        summed = policy.loss_reduction == "sum"
        params = policy.learning.params
        losses: Dict[str, torch.Tensor] = {}
        stats: Dict[str, Any] = {}
        rows: Dict[str, List[torch.Tensor]] = {}
        device0 = self.devices[0]
        for k, (model, shard, size) in enumerate(zip(self.models, shards, sizes)):
            if size == 0:
                continue
            weight = 1.0 if summed else size / total
            shard_losses, shard_stats = policy.loss(model, policy.dist_class, flat_rows(shard))
            shard_losses = losses_by_optimizer(policy, shard_losses, names)
            # The learning loop's backprop, each optimizer's parameters mapped onto tower k's copies.
            backward_each({n: shard_losses[n] * weight for n in names}, names,
                          lambda name, k=k: [self._tower_param(p, k) for p in params[name]])
            for n in names:
                value = shard_losses[n].detach().to(device0) * weight
                losses[n] = losses[n] + value if n in losses else value
            for key, v in shard_stats.items():
                v = torch.as_tensor(v).detach().to(device0)
                if v.dim() > 0:
                    rows.setdefault(key, []).append(v)
                else:
                    v = v.float() * weight
                    stats[key] = stats[key] + v if key in stats else v
        for key, parts in rows.items():
            stats[key] = torch.cat(parts)
        self._gather_gradients()
        return losses, stats

    def _tower_param(self, param: torch.Tensor, k: int) -> torch.Tensor:
        # A parameter outside the model (e.g. a temperature) is shared by every tower: its
        # gradient accumulates straight into it.
        i = self._param_index.get(id(param))
        return param if i is None else self._params[k][i]

    def _gather_gradients(self) -> None:
        """Adds each copy's gradients into the first tower's parameters, then clears them."""
        for params in self._params[1:]:
            for main, other in zip(self._params[0], params):
                if other.grad is None:
                    continue
                grad = to_device(other.grad, main.device)
                main.grad = grad.clone() if main.grad is None else main.grad.add_(grad)
                other.grad = None


def _as_batch(tensors: Tensors) -> TensorBatch:
    # A subclass's own `to_tensors` may return a plain dict (laid out as its loss reads it).
    return tensors if isinstance(tensors, TensorBatch) else TensorBatch(tensors)


def _real_rows(shard: Tensors) -> int:
    """Rows that count in a shard's loss: all of them, or the unpadded ones of sequences."""
    mask = shard.get(SEQ_MASK)
    if mask is not None:
        return int(mask.sum())
    return len(next(iter(shard.values()))) if shard else 0
