"""A lean Adam: `torch.optim.Adam`'s maths on torch's `_foreach` ops, without `torch.optim`.

Why: every `torch.optim.Optimizer` imports `torch._dynamo` (and with it sympy) the first
time one of its methods runs: 2-3 s of start-up and ~70 MB of memory for a PPO run on
CartPole, spent before the first `train()` result (`benchmarks/startup.py`). On CPU, `torch.optim.Adam`
also runs its per-tensor loop (`_single_tensor_adam`) and fires profiler hooks each step.

`Adam` here computes exactly what `torch.optim.Adam` computes (same ops in the same order:
`tests/policy/test_optim.py` checks the weights after many steps against it, with weight decay,
AMSGrad, `maximize` and gradient clipping), one `_foreach` call per op over every
parameter. Its `state_dict()` / `load_state_dict()` use torch's layout (the same keys,
per-parameter `step` tensors, the same `param_groups` entries), so a state written by
either optimizer loads into the other and checkpoints are unchanged.

`rlfleet.policy.optimizer_choice.build_adam` picks it for every configuration it covers and
falls back to `torch.optim.Adam` for the rest (`capturable`, `differentiable`, `fused`,
tensor learning rates, complex parameters).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import torch

from rlfleet.fast.adam import adam_delta

# Adam's keyword arguments and defaults, in `torch.optim.Adam`'s order (its `param_groups`
# and state dicts carry exactly these keys).
ADAM_DEFAULTS: Dict[str, Any] = {
    "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "amsgrad": False, "maximize": False,
    "foreach": None, "capturable": False, "differentiable": False, "fused": None, "decoupled_weight_decay": False,
}
# Options only `torch.optim.Adam` implements: asking for one of them builds it instead.
TORCH_ONLY_OPTIONS = ("capturable", "differentiable", "fused")


def check_adam_hyperparameters(options: Dict[str, Any]) -> None:
    """The checks `torch.optim.Adam` makes on its hyperparameters, with its messages.

    Raises:
        ValueError: a negative learning rate, epsilon or weight decay, or a beta outside [0, 1).
    """
    lr = options.get("lr", ADAM_DEFAULTS["lr"])
    eps = options.get("eps", ADAM_DEFAULTS["eps"])
    betas = options.get("betas", ADAM_DEFAULTS["betas"])
    weight_decay = options.get("weight_decay", ADAM_DEFAULTS["weight_decay"])
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam:
    """Adam (Kingma & Ba 2015) as `torch.optim.Adam` computes it on CPU or GPU, with
    `weight_decay` (L2, or AdamW's decoupled form), `amsgrad` and `maximize`.

    The subset of the `torch.optim.Optimizer` API that rlfleet uses: `param_groups`,
    `state`, `defaults`, `zero_grad()`, `step()`, `state_dict()`, `load_state_dict()`.

    Args:
        params: tensors to optimize, or a list of param-group dicts (`{"params": [...], **options}`).
        lr, betas, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay: as `torch.optim.Adam`.
        foreach: accepted and kept in `param_groups` for state compatibility; the update is
            always the `_foreach` form (the same numbers as the per-tensor loop).

    Raises:
        ValueError: for the hyperparameters `torch.optim.Adam` rejects (same messages), and for
            `capturable`, `differentiable` or `fused` (build those with `torch.optim.Adam`).
    """

    def __init__(self, params: Union[Iterable[torch.Tensor], Iterable[Dict[str, Any]]], lr: float = 1e-3,
                 betas: Sequence[float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0,
                 amsgrad: bool = False, *, foreach: Optional[bool] = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False, fused: Optional[bool] = None,
                 decoupled_weight_decay: bool = False) -> None:
        if capturable or differentiable or fused:
            raise ValueError("rlfleet.policy.optim.Adam does not implement capturable / differentiable / fused; "
                             "use torch.optim.Adam (build_adam picks it for these options)")
        self.defaults: Dict[str, Any] = {
            "lr": lr, "betas": tuple(float(b) for b in betas), "eps": eps, "weight_decay": weight_decay,
            "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach, "capturable": capturable,
            "differentiable": differentiable, "fused": fused, "decoupled_weight_decay": decoupled_weight_decay,
        }
        check_adam_hyperparameters(self.defaults)
        self.state: Dict[torch.Tensor, Dict[str, torch.Tensor]] = {}
        self.param_groups: List[Dict[str, Any]] = []
        # Per group index: its flat buffers (see `_flat_state`), or why it has none.
        self._flats: Dict[int, _Flat] = {}
        self._no_flat: set = set()
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for group in groups:
            self.add_param_group(dict(group))

    def add_param_group(self, group: Dict[str, Any]) -> None:
        """Adds `{"params": [...], **options}`; options left out take the defaults."""
        params = group["params"]
        group["params"] = [params] if isinstance(params, torch.Tensor) else list(params)
        for name, default in self.defaults.items():
            group.setdefault(name, default)
        check_adam_hyperparameters(group)
        group["betas"] = tuple(float(b) for b in group["betas"])
        seen = {p for g in self.param_groups for p in g["params"]}
        for p in group["params"]:
            if not isinstance(p, torch.Tensor) or not p.is_leaf:
                raise ValueError("Adam can only optimize leaf tensors")
            if p in seen:
                raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        self._params = [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops (or zeroes) every parameter's gradient."""
        for p in self._params:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_()
                p.grad.requires_grad_(False)
                p.grad.zero_()

    @torch.no_grad()
    def step(self, closure=None):
        """One Adam update of every parameter that has a gradient (the others keep their
        state and step count, as in `torch.optim.Adam`). Returns the closure's loss, if any."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for index, group in enumerate(self.param_groups):
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            flat = self._flat_state(index, group, params)
            if flat is not None:
                self._flat_update(group, flat)
            else:
                self._update(group, params)
        return loss

    # --- the flat path: one tensor per moment, a handful of ops per step ------------------
    def _flat_state(self, index: int, group: Dict[str, Any], params: List[torch.Tensor]) -> Optional["_Flat"]:
        """The group's moments as flat buffers (each parameter's state a view into them),
        when every parameter of the group has a gradient, all share one dtype and device,
        and all have taken the same number of steps; None otherwise (the per-tensor path)."""
        flat = self._flats.get(index)
        if flat is not None:
            return flat if flat.count is not None and len(params) == len(flat.params) else None
        if index in self._no_flat or len(params) != len(group["params"]):
            return None
        first = params[0]
        if (not first.is_floating_point() or any(p.dtype != first.dtype or p.device != first.device
                                                   or p.grad.is_sparse for p in params)):
            self._no_flat.add(index)
            return None
        counts = {float(self.state[p]["step"]) if p in self.state else 0.0 for p in params}
        if len(counts) != 1:
            return None
        flat = self._flats[index] = _Flat(params, group, self.state, counts.pop())
        return flat

    def flat_group_state(self, index: int = 0) -> Optional["_Flat"]:
        """Group `index`'s moments and step counts as flat buffers (built on first use, with
        any existing state copied in), for an update computed outside this class (the
        NumPy learners, `rlfleet.policy.numpy_learner.FlatAdam`), which must then advance `steps` and
        `count` itself. None when the group does not fit them: mixed dtypes or devices, or
        parameters that took different numbers of steps."""
        group = self.param_groups[index]
        flat = self._flats.get(index)
        if flat is None and index not in self._no_flat:
            params = group["params"]
            first = params[0]
            if not first.is_floating_point() or any(p.dtype != first.dtype or p.device != first.device
                                                    for p in params):
                return None
            counts = {float(self.state[p]["step"]) if p in self.state else 0.0 for p in params}
            if len(counts) != 1:
                return None
            flat = self._flats[index] = _Flat(params, group, self.state, counts.pop())
        if flat is None or flat.count is None or len(flat.params) != len(group["params"]):
            return None
        return flat

    def _flat_update(self, group: Dict[str, Any], flat: "_Flat") -> None:
        # The same elementwise ops, in the same order, as `_update` (and torch's per-tensor
        # loop): each element sees the same float operations, so the numbers are the same.
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        params = flat.params
        grad = torch.cat([p.grad.reshape(-1) for p in params])
        flat.steps.add_(1)
        flat.count += 1
        if group["maximize"]:
            grad.neg_()
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                torch._foreach_mul_(params, 1 - lr * weight_decay)
            else:
                grad.add_(torch.cat([p.detach().reshape(-1) for p in params]), alpha=weight_decay)
        step = flat.count
        if flat.max_exp_avg_sq is None and grad.device.type == "cpu" and grad.dtype == torch.float32:
            # The NumPy learners' arithmetic (`rlfleet.fast.adam`), on NumPy views of the buffers.
            adam_delta(grad.numpy(), flat.exp_avg.numpy(), flat.exp_avg_sq.numpy(), step, beta1, beta2, lr, eps,
                       out=flat.delta.numpy())
            torch._foreach_add_(params, flat.delta_views)
            return
        flat.exp_avg.lerp_(grad, 1 - beta1)
        flat.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        if flat.max_exp_avg_sq is not None:
            torch.maximum(flat.max_exp_avg_sq, flat.exp_avg_sq, out=flat.max_exp_avg_sq)
            denom = flat.max_exp_avg_sq.sqrt()
        else:
            denom = flat.exp_avg_sq.sqrt()
        denom.div_((1 - beta2 ** step) ** 0.5).add_(eps)
        # `param.addcdiv_(exp_avg, denom, value=v)` computes `param + v * exp_avg / denom`
        # left to right; so does this, with the product and quotient done once, flat.
        torch.mul(flat.exp_avg, -lr / (1 - beta1 ** step), out=flat.delta).div_(denom)
        torch._foreach_add_(params, flat.delta_views)

    def _update(self, group: Dict[str, Any], params: List[torch.Tensor]) -> None:
        for index, flat in self._flats.items():  # step counts may part ways here
            if any(p in flat.views for p in params) and len(params) != len(flat.params):
                flat.count = None
        # The ops and their order are `torch.optim.adam._single_tensor_adam`'s (non-capturable
        # branch), each applied to every tensor at once.
        grads = [p.grad for p in params]
        if any(g.is_sparse for g in grads):
            raise RuntimeError("Adam does not support sparse gradients, please consider SparseAdam instead")
        states = [self.state.get(p) or self._init_state(p, group) for p in params]
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        steps = [s["step"] for s in states]

        torch._foreach_add_(steps, 1)
        if group["maximize"]:
            grads = torch._foreach_neg(grads)
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                torch._foreach_mul_(params, 1 - lr * weight_decay)
            else:
                grads = torch._foreach_add(grads, params, alpha=weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)

        counts = {float(s) for s in steps} if len(steps) > 1 else {float(steps[0])}
        if group["amsgrad"]:
            max_sqs = [s["max_exp_avg_sq"] for s in states]
            torch._foreach_maximum_(max_sqs, exp_avg_sqs)
            denom = torch._foreach_sqrt(max_sqs)
        else:
            denom = torch._foreach_sqrt(exp_avg_sqs)
        if len(counts) == 1:  # the usual case: every parameter has taken the same number of steps
            step = counts.pop()
            step_size = lr / (1 - beta1 ** step)
            torch._foreach_div_(denom, (1 - beta2 ** step) ** 0.5)
            torch._foreach_add_(denom, eps)
            torch._foreach_addcdiv_(params, exp_avgs, denom, -step_size)
        else:
            values = [float(s) for s in steps]
            torch._foreach_div_(denom, [(1 - beta2 ** s) ** 0.5 for s in values])
            torch._foreach_add_(denom, eps)
            torch._foreach_addcdiv_(params, exp_avgs, denom, [-lr / (1 - beta1 ** s) for s in values])

    def _init_state(self, p: torch.Tensor, group: Dict[str, Any]) -> Dict[str, torch.Tensor]:
        # As torch: `step` a float32 scalar on the CPU, moments shaped and placed as the parameter.
        state = {"step": torch.tensor(0.0, dtype=torch.float32),
                 "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                 "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        self.state[p] = state
        return state

    # --- state: torch.optim's layout ---------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """`{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`, as
        `torch.optim.Optimizer.state_dict()` (tensors by reference, not copied)."""
        index = {id(p): i for i, p in enumerate(self._params)}
        groups = [{**{k: v for k, v in g.items() if k != "params"}, "params": [index[id(p)] for p in g["params"]]}
                  for g in self.param_groups]
        return {"state": {index[id(p)]: s for p, s in self.state.items()}, "param_groups": groups}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Loads a state from `state_dict()` of this class or of `torch.optim.Adam`: moments
        copied to each parameter's dtype and device, `step` as a CPU float32 scalar, the saved
        hyperparameters (lr, betas, ...) replacing the current ones.

        Raises:
            ValueError: the saved groups do not match this optimizer's groups in number or size.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(s["params"]) != len(g["params"]) for s, g in zip(saved_groups, self.param_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        by_index = {i: p for s, g in zip(saved_groups, self.param_groups) for i, p in zip(s["params"], g["params"])}
        state: Dict[torch.Tensor, Dict[str, torch.Tensor]] = {}
        for key, saved in state_dict["state"].items():
            p = by_index.get(int(key))
            if p is None:
                continue
            entry = {}
            for name, value in saved.items():
                if name == "step":
                    entry[name] = torch.tensor(float(value), dtype=torch.float32)
                elif isinstance(value, torch.Tensor):
                    dtype = p.dtype if p.is_floating_point() else value.dtype
                    entry[name] = value.detach().to(device=p.device, dtype=dtype, copy=True)
                else:
                    entry[name] = value
            state[p] = entry
        groups = []
        for s, g in zip(saved_groups, self.param_groups):
            group = {**{k: v for k, v in s.items() if k not in ("params", "param_names")}, "params": g["params"]}
            for name, default in self.defaults.items():
                group.setdefault(name, default)
            group["betas"] = tuple(float(b) for b in group["betas"])
            if any(group.get(k) for k in TORCH_ONLY_OPTIONS):
                raise ValueError(f"the saved optimizer state asks for {[k for k in TORCH_ONLY_OPTIONS if group.get(k)]}, "
                                 "which rlfleet.policy.optim.Adam does not implement")
            groups.append(group)
        for group in groups:
            if group["amsgrad"]:
                for p in group["params"]:
                    if p in state and "max_exp_avg_sq" not in state[p]:
                        state[p]["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        self.param_groups = groups
        self.state = state
        self._flats, self._no_flat = {}, set()


class _Flat:
    """One param group's Adam state in flat buffers: `exp_avg`, `exp_avg_sq` (and
    `max_exp_avg_sq`) hold every parameter's moments back to back, `steps` their step
    counts; `state[p]` holds views into them (torch's layout, for `state_dict`). Existing
    state is copied in. `count` is the common step count (None once they differ)."""

    def __init__(self, params: List[torch.Tensor], group: Dict[str, Any],
                 state: Dict[torch.Tensor, Dict[str, torch.Tensor]], count: float) -> None:
        self.params = list(params)
        self.views = set(self.params)
        sizes = [p.numel() for p in params]
        total = sum(sizes)
        like = {"dtype": params[0].dtype, "device": params[0].device}
        self.exp_avg = torch.zeros(total, **like)
        self.exp_avg_sq = torch.zeros(total, **like)
        self.max_exp_avg_sq = torch.zeros(total, **like) if group["amsgrad"] else None
        self.delta = torch.empty(total, **like)
        self.steps = torch.full((len(params),), count, dtype=torch.float32)
        self.count: Optional[float] = count
        self.delta_views = [v.view_as(p) for v, p in zip(self.delta.split(sizes), params)]
        names = ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if group["amsgrad"] else [])
        for i, (p, offset) in enumerate(zip(params, _offsets(sizes))):
            old = state.get(p, {})
            entry = {"step": self.steps[i]}
            for name in names:
                view = getattr(self, name)[offset:offset + p.numel()].view_as(p)
                if name in old:
                    view.copy_(old[name])
                entry[name] = view
            state[p] = entry


def _offsets(sizes: List[int]) -> List[int]:
    out, total = [], 0
    for size in sizes:
        out.append(total)
        total += size
    return out


def clip_grad_norm(params: List[torch.Tensor], max_norm: float) -> torch.Tensor:
    """`torch.nn.utils.clip_grad_norm_(params, max_norm)` (2-norm) with the same numbers, for
    parameters on one device and dtype: the same ops without its per-call grouping of tensors
    by device (the larger part of its cost for small nets). Returns the total norm."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    if len({(g.device, g.dtype) for g in grads}) > 1:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    torch._foreach_mul_(grads, coef)
    return total


def optimizer_params(optimizer: Any) -> List[torch.Tensor]:
    """Every parameter `optimizer` updates, in its groups' order."""
    return [p for group in optimizer.param_groups for p in group["params"]]


__all__ = ["ADAM_DEFAULTS", "Adam", "TORCH_ONLY_OPTIONS", "check_adam_hyperparameters", "clip_grad_norm",
           "optimizer_params"]
