"""The NumPy learners: what one is (`NumpyLearner`), when a policy uses its own (the one
exact-type check and dispatch: `numpy_learner_reason`, `planned_numpy_learner`), and the
pieces every one shares: `Adam`'s update on an optimizer's own flat buffers (the arithmetic is
`rlfleet.fast.adam`'s), the gates over networks and optimizers, and the clip / NaN-guard /
step tail (the maths itself lives in `rlfleet.fast`).

A policy class names its learner in its `numpy_learner` class attribute (None: none); the
learner restates that class's loss and update in NumPy, so it serves that class exactly and
no subclass of it (a subclass may change the loss), unless the subclass declares the learner
again. `TorchPolicy.learn_on_batch` / `multi_epoch_sgd` hand a call to the learner where the
policy's plan (`policy/fast_plan.py`) picked it and the learner `replaces` that method.

Why: for the small fully connected nets most RL runs train, a torch update costs more in
per-op dispatch and autograd bookkeeping than in arithmetic (benchmarks/learner.py times both
paths on the same batches). The NumPy learners (`rlfleet.algorithms.{ppo,dqn,sac,ddpg}.numpy_learner`)
compute the same update as their torch loss + `TorchPolicy._step`, on NumPy views of the
torch parameters, and are checked against it step for step by their tests.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Dict, Optional, Sequence

import numpy as np
import torch
from torch import nn

from rlfleet.fast.adam import adam_delta
from rlfleet.fast.blas import blas_threads
from rlfleet.fast.lanes import LaneChooser, learner_lanes
from rlfleet.fast.mlp import linear_stack, numpy_layers
from rlfleet.policy.optim import Adam
from rlfleet.policy import learning_loop
from rlfleet.policy.learning_loop import Gradients

LEARN_ON_BATCH = "learn_on_batch"  # one update on the whole batch per call (the off-policy learners)
MULTI_EPOCH_SGD = "multi_epoch_sgd"  # passes of minibatch updates per call (PPO)


def module_layers(module: nn.Module, grad_views: Optional[dict] = None):
    """`numpy_layers` of `module`'s `linear_stack` (check `nets_reason` first)."""
    return numpy_layers(linear_stack(module), grad_views)


def critic_layers(critics: Sequence[Optional[nn.Module]], targets: Sequence[Optional[nn.Module]],
                  grad_views: dict) -> tuple:
    """`(layers, target_layers)`: `module_layers` of each critic (its gradients written into
    `grad_views`) and the layers of each target critic, skipping the None ones (no twin)."""
    return ([module_layers(net, grad_views) for net in critics if net is not None],
            [module_layers(net)[0] for net in targets if net is not None])


def _bump_versions(params: Sequence[torch.Tensor]) -> None:
    """Counts an in-place write on each tensor (a microsecond; multiplying by 1.0 in place,
    the fallback for a torch without `increment_version`, costs a pass over the weights)."""
    increment = getattr(torch.autograd.graph, "increment_version", None)
    if increment is not None:
        increment(list(params))
    else:
        with torch.no_grad():
            torch._foreach_mul_(list(params), 1.0)


class FlatAdam:
    """One `Adam` param group's update, computed in NumPy on the optimizer's own flat moment
    buffers (`Adam.flat_group_state`) from a flat gradient buffer (`grad`, with a view per
    parameter in `grad_views`). The same ops as `Adam._flat_update` (torch.optim.Adam's
    maths), so `state_dict()`, checkpoints and later torch steps see the same state.

    Build it anew whenever the optimizer's state may have been replaced (a restored
    checkpoint); `supported(optimizer)` says whether it can.
    """

    def __init__(self, optimizer: Adam, index: int = 0):
        self.group = optimizer.param_groups[index]
        self.flat = optimizer.flat_group_state(index)
        params = self.flat.params
        sizes = [p.numel() for p in params]
        self.grad = np.zeros(sum(sizes), np.float32)
        self.delta = np.empty_like(self.grad)  # the step's increment, reused
        self.offsets = np.cumsum([0] + sizes)
        self.grad_views = {id(p): self.grad[self.offsets[i]:self.offsets[i + 1]].reshape(p.shape)
                           for i, p in enumerate(params)}
        self.param_views = [p.detach().numpy() for p in params]
        self.exp_avg = self.flat.exp_avg.numpy()
        self.exp_avg_sq = self.flat.exp_avg_sq.numpy()
        self.steps = self.flat.steps.numpy()

    @staticmethod
    def supported(optimizer: Any, params: Sequence[torch.Tensor]) -> Optional[str]:
        """Why `FlatAdam` cannot run `optimizer` over exactly `params` (None: it can)."""
        if type(optimizer) is not Adam:
            return "an optimizer other than rlfleet's Adam"
        if len(optimizer.param_groups) != 1 or ({id(p) for p in optimizer.param_groups[0]["params"]}
                                                != {id(p) for p in params}):
            return "an optimizer that does not hold exactly its network's parameters in one group"
        group = optimizer.param_groups[0]
        if group["weight_decay"] != 0 or group["amsgrad"] or group["maximize"]:
            return "weight decay, AMSGrad or maximize"
        if any(p.dtype != torch.float32 or p.device.type != "cpu" or not p.requires_grad for p in params):
            return "parameters that are not trained float32 CPU tensors"
        if optimizer.flat_group_state(0) is None:
            return "an optimizer whose moments cannot be laid flat"
        return None

    def norm(self) -> float:
        """The gradient's global 2-norm."""
        return math.sqrt(float(np.dot(self.grad, self.grad)))

    def clip(self, max_norm: float, norm: float) -> None:
        """`clip_grad_norm`'s scaling, given the norm."""
        self.grad *= np.float32(min(max_norm / (norm + 1e-6), 1.0))

    def step(self) -> None:
        group, flat = self.group, self.flat
        beta1, beta2 = group["betas"]
        self.steps += 1
        flat.count += 1
        delta = adam_delta(self.grad, self.exp_avg, self.exp_avg_sq, flat.count, beta1, beta2, group["lr"],
                           group["eps"], out=self.delta)
        offsets = self.offsets
        for i, view in enumerate(self.param_views):
            view += delta[offsets[i]:offsets[i + 1]].reshape(view.shape)

    def touch(self) -> None:
        """Moves the parameters' torch version counters (NumPy writes leave them alone), so
        caches keyed on them (`TorchPolicy._numpy_net`) see the new weights."""
        _bump_versions(self.flat.params)


def nets_reason(policy, nets: Sequence[nn.Module], params: Dict[str, Sequence[torch.Tensor]]) -> Optional[str]:
    """Why a NumPy learner cannot run `policy` (None: it can) as far as its networks and
    optimizers go: on the CPU without towers, every net in `nets` a `linear_stack`, and its
    optimizers exactly `params`' names, each a `FlatAdam.supported` one over those parameters."""
    if policy.towers is not None or policy.device.type != "cpu":
        return "towers or a GPU"
    if any(linear_stack(net) is None for net in nets):
        return "a network that is not a stack of Linear + tanh/ReLU layers"
    if sorted(policy.optimizers) != sorted(params):
        return f"other optimizers than {sorted(params)}"
    for name, group in params.items():
        why = FlatAdam.supported(policy.optimizers[name], list(group))
        if why is not None:
            return f"{name}: {why}"
    return None


class NumpyGradients(Gradients):
    """The gradients a NumPy learner wrote into its `FlatAdam`s' flat buffers, by name."""

    def __init__(self, adams: Dict[str, FlatAdam]):
        self.adams = adams

    def norm(self, name: str) -> float:
        return self.adams[name].norm()

    def clip(self, name: str, max_norm: float) -> float:
        norm = self.adams[name].norm()
        self.adams[name].clip(max_norm, norm)
        return norm

    def step(self, name: str) -> None:
        self.adams[name].step()

    def guard(self, policy, losses: Dict[str, Any], norms: Dict[str, Any], stats: Dict[str, Any]) -> bool:
        # Plain floats: checked here without building tensors; the guard sees the rare bad update.
        if all(math.isfinite(losses[name]) and math.isfinite(norms[name]) for name in losses):
            policy.nonfinite_guard.streak = 0
            return True
        return policy.nonfinite_guard.ok({k: torch.tensor(v) for k, v in losses.items()},
                                         {k: torch.tensor(v) for k, v in norms.items()},
                                         {k: torch.as_tensor(v) for k, v in stats.items()})


def clip_guard_and_step(policy, adams: Dict[str, FlatAdam], losses: Dict[str, float], stats: Dict[str, Any]) -> bool:
    """The learning loop's update tail (`learning_loop.clip_guard_and_step`) for the
    optimizers `adams` (those stepping, by name). The caller `touch`es the optimizers once its
    updates are done (or have raised)."""
    return learning_loop.clip_guard_and_step(policy, NumpyGradients(adams), list(adams), losses, stats)


class NumpyLearner(ABC):
    """A policy's update restated in NumPy for one policy class (the class whose
    `numpy_learner` names it). A subclass declares:

    - `family`: its `FAST_PATH_KEYS` table in `policy/fast_plan.py` (the config keys it
      handles, falls back on or does not read);
    - `replaces`: the `TorchPolicy` method it stands in for, `LEARN_ON_BATCH` or
      `MULTI_EPOCH_SGD`, and defines that method with the same signature and result (the
      dispatch calls only the method `replaces` names);
    - `unsupported_reason(policy)`: why it cannot compute the torch update of `policy`, an
      instance of exactly its class, as far as its networks and optimizers go (None: it can).

    Built once per plan (`planned_numpy_learner`), with the policy as its one argument.
    """

    family: ClassVar[str]
    replaces: ClassVar[str]

    def __init__(self, policy):
        self.policy = policy

    @staticmethod
    @abstractmethod
    def unsupported_reason(policy) -> Optional[str]:
        """Why this learner cannot stand in for `policy`'s torch update (None: it can)."""


class OffPolicyNumpyLearner(NumpyLearner):
    """An off-policy NumPy learner: `learn_on_batch` as `TorchPolicy.learn_on_batch` around a
    subclass's `_bind()` (which sets `self.adams`, the `FlatAdam` per optimizer name) and
    `_update(columns)`, which may split its work over `self.lanes` (two where the process
    may use two cores and timing shows them faster: `rlfleet.fast.lanes`). The views are
    taken again whenever the weights or optimizer states were replaced, so loaded ones are
    the ones trained."""

    replaces = LEARN_ON_BATCH

    def __init__(self, policy):
        super().__init__(policy)
        self.lane_chooser = LaneChooser(learner_lanes(policy.config))
        self._bound_to: Optional[tuple] = None
        self._params: Optional[tuple] = None  # (the model, its parameter list)

    def _binding_key(self) -> tuple:
        """What `_bind`'s views depend on: the parameters' storage and the optimizers' groups and
        flat states (a restored checkpoint or a new optimizer replaces one of them). The views
        keep the old storages alive, so a replaced one cannot come back at the same address."""
        policy = self.policy
        params = self._params
        if params is None or params[0] is not policy.model:  # walking the modules costs more than the key
            params = self._params = (policy.model, list(policy.model.parameters()))
        return (tuple(p.data_ptr() for p in params[1]),
                tuple((name, id(opt.param_groups[0]), id(opt.flat_group_state(0)))
                      for name, opt in policy.optimizers.items()))

    @property
    def lanes(self):
        return self.lane_chooser.lanes

    @abstractmethod
    def _bind(self) -> None:
        """Takes views of the policy's current weights and optimizer states (again whenever
        `_binding_key` changes: a restored checkpoint or `set_weights` may have replaced them)."""

    @abstractmethod
    def _update(self, columns: Dict[str, np.ndarray]) -> Dict[str, Any]:
        """One update on the loss columns; returns the stats, with a per-sample `"td_error"`."""

    def learn_on_batch(self, samples) -> Dict[str, Any]:
        policy = self.policy
        result = learning_loop.start_result(policy, samples)
        columns = {k: t.numpy() for k, t in policy.to_tensors(samples).items()}
        key = self._binding_key()
        if key != self._bound_to:
            self._bind()
            self._bound_to = key
        # A NaN / inf is the NaN guard's to report (the update is skipped), not NumPy's.
        chooser = self.lane_chooser
        chooser.start()
        try:
            with blas_threads(1), np.errstate(all="ignore"):
                stats = self._update(columns)
            chooser.finish()
        finally:  # also when the NaN guard raised after earlier writes
            for adam in self.adams.values():
                adam.touch()
        return learning_loop.finish_result(policy, result, stats)


# --- the one choice -------------------------------------------------------------------------
def declared_numpy_learner(policy_class: type) -> Optional[type]:
    """The `NumpyLearner` class that `policy_class` itself names in `numpy_learner` (None: it
    names none, or only inherits one, which restates a parent's loss, not necessarily its own)."""
    for cls in policy_class.__mro__:
        if "numpy_learner" in vars(cls):
            return vars(cls)["numpy_learner"] if cls is policy_class else None
    return None


def numpy_learner_reason(policy) -> Optional[str]:
    """Why `policy`'s `numpy_learner` (not None) cannot stand in for its torch update (None:
    it can): `policy` must be an instance of exactly the class that named the learner, then
    pass the learner's own `unsupported_reason`."""
    if declared_numpy_learner(type(policy)) is None:
        owner = next(cls for cls in type(policy).__mro__ if "numpy_learner" in vars(cls))
        return f"the policy class is {type(policy).__name__}, not {owner.__name__}"
    return policy.numpy_learner.unsupported_reason(policy)


def planned_numpy_learner(policy, method: str) -> Optional[NumpyLearner]:
    """`policy`'s NumPy learner, built once per plan, where it `replaces` `method`
    (`LEARN_ON_BATCH` or `MULTI_EPOCH_SGD`) and the policy's plan (`policy.fast_plan`) picked
    it; None: the torch path serves the call."""
    learner_class = policy.numpy_learner
    if learner_class is None or learner_class.replaces != method or policy.fast_plan.learner != "numpy":
        return None
    if policy._numpy_learner is None:
        policy._numpy_learner = learner_class(policy)
    return policy._numpy_learner


__all__ = ["LEARN_ON_BATCH", "MULTI_EPOCH_SGD", "FlatAdam", "NumpyLearner", "OffPolicyNumpyLearner",
           "clip_guard_and_step", "critic_layers", "declared_numpy_learner", "module_layers", "nets_reason", "numpy_learner_reason",
           "planned_numpy_learner"]
