"""The one learning loop of every TorchPolicy: minibatch passes, the update's tail (gradient
clipping, the NaN guard, the optimizer steps), TD-error sanitising and the result.

A backend supplies only the gradients: torch autograd (`torch_step`, through the policy's
loss) or a NumPy learner (`rlfleet.fast` maths in `policy/numpy_learner.py`); both then end
each update with `clip_guard_and_step` over a `Gradients` view of their optimizers.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from rlfleet.policy.nan_guard import grad_norm
from rlfleet.policy.optim import clip_grad_norm
from rlfleet.policy.tensor_batch import flat_rows, take_rows

# The optimizer `make_optimizers` builds by default, at `lr` (the one `lr_schedule` drives).
DEFAULT_OPTIMIZER = "default"


def gnorm_stat(name: str) -> str:
    # "grad_gnorm" for the single default optimizer, as RLlib reports it.
    return "grad_gnorm" if name == DEFAULT_OPTIMIZER else f"{name}_gnorm"


class Gradients(ABC):
    """The gradients of one update, per optimizer name: their norm, `clip_grad_norm`'s
    clipping (returning the norm before it), the step, and the NaN guard's check."""

    @abstractmethod
    def norm(self, name: str) -> Any:
        """The gradient's norm (finite exactly when every gradient is)."""

    @abstractmethod
    def clip(self, name: str, max_norm: float) -> Any:
        """Scales the gradient to at most `max_norm`; returns its norm before."""

    @abstractmethod
    def step(self, name: str) -> None:
        """The optimizer's step on the gradient."""

    def guard(self, policy, losses: Dict[str, Any], norms: Dict[str, Any], stats: Dict[str, Any]) -> bool:
        return policy.nonfinite_guard.ok(losses, norms, stats)


class TorchGradients(Gradients):
    """The gradients autograd left in the parameters of the policy's optimizers (their
    parameter lists: `policy.learning.params`, learning_state.py)."""

    def __init__(self, policy):
        self.policy = policy
        self.params = policy.learning.params

    def norm(self, name: str) -> torch.Tensor:
        return grad_norm(self.params[name])

    def clip(self, name: str, max_norm: float) -> torch.Tensor:
        return clip_grad_norm(self.params[name], max_norm)

    def step(self, name: str) -> None:
        self.policy.optimizers[name].step()


def clip_guard_and_step(policy, gradients: Gradients, names: List[str], losses: Dict[str, Any],
                        stats: Dict[str, Any]) -> bool:
    """The end of every update: each gradient's norm, clipped to `grad_clip` (and reported)
    when set; the NaN guard over the losses and norms (policy/nan_guard.py); then every
    optimizer of `names` steps, or none. Returns whether they stepped."""
    grad_clip = policy.config.get("grad_clip")
    norms = {}
    for name in names:
        if grad_clip is not None:
            norms[name] = stats[gnorm_stat(name)] = gradients.clip(name, grad_clip)
        else:
            norms[name] = gradients.norm(name)
    if not gradients.guard(policy, {name: losses[name] for name in names}, norms, stats):
        return False
    for name in names:
        gradients.step(name)
    policy.num_grad_updates += 1
    return True


def losses_by_optimizer(policy, losses, names: List[str]) -> Dict[str, torch.Tensor]:
    """`loss`'s return value as `{optimizer name: loss}` (one tensor: the only optimizer's)."""
    if not isinstance(losses, dict):
        if len(policy.optimizers) != 1:
            raise ValueError(f"{type(policy).__name__}.loss returned one loss tensor, but the policy has several "
                             f"optimizers {sorted(policy.optimizers)}: return {{name: loss}} for them")
        return {next(iter(policy.optimizers)): losses}
    missing = [name for name in names if name not in losses]
    if missing:
        raise ValueError(f"{type(policy).__name__}.loss returned losses {sorted(losses)}, but the optimizers "
                         f"{missing} are to step: return a loss for every name of make_optimizers()")
    return losses


def backward_each(losses: Dict[str, torch.Tensor], names: List[str],
                  params_of: Callable[[str], Sequence[torch.Tensor]]) -> None:
    """Gradients of each loss into its own optimizer's parameters only (`inputs=`), so
    losses that share a forward pass (an actor loss through the critic) never leak
    gradient into another optimizer's parameters. `params_of(name)`: the parameters
    optimizer `name` updates (on a tower, their copies: towers.py), asked only with several
    losses (one loss backpropagates plainly)."""
    if len(names) == 1:
        losses[names[0]].backward()
        return
    for i, name in enumerate(names):
        params = [p for p in params_of(name) if p.requires_grad]
        if params:
            torch.autograd.backward(losses[name], inputs=params, retain_graph=i < len(names) - 1)


def torch_step(policy, tensors) -> Dict[str, torch.Tensor]:
    """One gradient update with autograd: every optimizer `optimizers_to_step()` names steps
    on its own loss's gradient (clipped to `grad_clip`), unless a loss or gradient is not
    finite: then none steps (see policy/nan_guard.py). Returns the detached stats.

    `tensors`: what `to_tensors` returned (a `TensorBatch`: padded sequences' row columns are
    flattened for the loss) or a minibatch of it. With several towers (towers.py) it may be a
    `ShardedBatch`; each tower backpropagates its shard and the gradients are combined before
    the step."""
    names = policy.optimizers_to_step()
    if policy.towers is not None:
        for name in names:
            policy.optimizers[name].zero_grad(set_to_none=True)
        losses, stats = policy.towers.gradients(policy, tensors, names)
    else:
        losses, stats = policy.loss(policy.model, policy.dist_class, flat_rows(tensors))
        losses = losses_by_optimizer(policy, losses, names)
        for name in names:
            policy.optimizers[name].zero_grad(set_to_none=True)
        backward_each(losses, names, policy.learning.params.__getitem__)
    policy.reduce_gradients(names)
    clip_guard_and_step(policy, TorchGradients(policy), names, losses, stats)
    return {k: v.detach() if torch.is_tensor(v) else torch.as_tensor(v) for k, v in stats.items()}


def sgd_passes(policy, columns: Dict[str, Any], n: int, num_sgd_iter: int, minibatch_size: int, shuffle: bool,
               gather: Callable[[Dict[str, Any], np.ndarray], Dict[str, Any]],
               step: Callable[[Any], Dict[str, Any]],
               minibatch: Optional[Callable[[np.ndarray], Any]] = None) -> List[Dict[str, Any]]:
    """`num_sgd_iter` passes of minibatch SGD over `n` rows; returns the last pass's stats.

    Each pass draws a permutation from the policy's RNG (also when one minibatch takes every
    row: the RNG stream stays the same), `gather`s the columns in that order once (a pass of
    one minibatch takes the rows as they are: its mean does not depend on their order) and
    `step`s on each minibatch, a slice; a ragged tail smaller than half a minibatch is
    dropped (its gradient is mostly noise). `minibatch(indices)` instead builds each
    minibatch from row indices (towers, which gather on their own devices). A `TensorBatch`
    keeps its layout in every minibatch (`take_rows`)."""
    minibatch_size = max(1, min(int(minibatch_size), n))
    last_pass: List[Dict[str, Any]] = []
    for _ in range(int(num_sgd_iter)):
        order = policy.np_random.permutation(n) if shuffle else None
        last_pass = []
        rows = None
        if minibatch is None:
            rows = columns if minibatch_size >= n or not shuffle else gather(columns, order)
        for start in range(0, n, minibatch_size):
            end = min(start + minibatch_size, n)
            if end - start < minibatch_size // 2 and start > 0:
                continue
            if rows is None:
                indices = order[start:end] if order is not None else np.arange(start, end)
                step_stats = step(minibatch(indices))
            else:
                step_stats = step(take_rows(rows, slice(start, end)))
            # Per-sample TD errors of one minibatch mean nothing averaged over a pass.
            step_stats.pop("td_error", None)
            last_pass.append(step_stats)
    return last_pass


def finite_td_error(td_error: np.ndarray) -> np.ndarray:
    """A skipped update's NaN TD errors must not reach replay priorities (NaN sum trees)."""
    return td_error if np.isfinite(td_error).all() else np.nan_to_num(td_error, nan=0.0, posinf=0.0, neginf=0.0)


def exploration_learns(policy, samples) -> None:
    """An exploration that learns from the train batch (Curiosity's ICM) does so before the
    policy's update (the others' hook does nothing)."""
    policy.exploration.on_learn_on_batch(policy, samples)


def start_result(policy, samples) -> Dict[str, Any]:
    """A learning call's result, after the `on_learn_on_batch` callback and an exploration
    that learns (`exploration_learns`) saw the batch."""
    result: Dict[str, Any] = {}
    if policy.has_learn_callback:
        policy.callbacks.on_learn_on_batch(policy=policy, train_batch=samples, result=result)
    exploration_learns(policy, samples)
    return result


def finish_result(policy, result: Dict[str, Any], stats: Dict[str, Any]) -> Dict[str, Any]:
    """Fills in the learner stats (with the schedules' values), the sanitised per-sample
    `td_error` when the loss reported one, and the NaN guard's count."""
    if "td_error" in stats:
        td_error = stats.pop("td_error")
        result["td_error"] = finite_td_error(td_error.cpu().numpy() if torch.is_tensor(td_error) else td_error)
    result["learner_stats"] = policy.learner_stats({k: float(v) for k, v in stats.items()})
    result["num_nonfinite_updates"] = policy.nonfinite_guard.total
    return result


__all__ = ["DEFAULT_OPTIMIZER", "Gradients", "TorchGradients", "backward_each", "clip_guard_and_step", "exploration_learns",
           "finish_result", "finite_td_error", "gnorm_stat", "losses_by_optimizer", "sgd_passes", "start_result",
           "torch_step"]
