"""MAML's inner adaptation, written functionally so that the outer loss can differentiate
through it (Finn et al. 2017, arXiv 1703.03400, eq. 1: theta' = theta - alpha * grad L(theta)).

Parameters are a dict `{name: tensor}` (as `model.named_parameters()`), and the model runs on
them with `torch.func.functional_call`, its own parameters left untouched. The same functions
serve the sampling workers (one adaptation step, plain tensors: `create_graph=False`) and the
driver's meta update (the whole chain kept in the graph: `create_graph=True`), so the adapted
policy a worker samples with is the one the meta loss differentiates through.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

import torch
from torch import nn
from torch.func import functional_call

from rlfleet.policy.loss_inputs import model_forward
from rlfleet.policy.sample_batch import SampleBatch

SB = SampleBatch
Params = Dict[str, torch.Tensor]


class _OutputsAndValues(nn.Module):
    """The model's action-distribution inputs and value predictions in one forward pass, so
    that `functional_call` swaps the parameters for both (a model computes its value in
    `value_function()`, after `forward`)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, batch: Mapping[str, torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        out, _ = model_forward(self.model, dict(batch))
        return out, self.model.value_function()


def model_params(model: nn.Module) -> Params:
    """The model's parameters by name (the tensors themselves: gradients reach the model)."""
    return dict(model.named_parameters())


def forward_with(model: nn.Module, params: Mapping[str, torch.Tensor], batch: Mapping[str, torch.Tensor]
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
    """`(dist_inputs, values)` of `model` on `batch` with `params` in place of its own."""
    wrapper = _OutputsAndValues(model)
    return functional_call(wrapper, {f"model.{k}": v for k, v in params.items()}, (batch,))


def inner_loss(model: nn.Module, dist_class: type, params: Mapping[str, torch.Tensor],
               batch: Mapping[str, torch.Tensor], *, vf_loss_coeff: float, vf_clip_param: float
               ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The loss one adaptation step descends, on one task's batch: the unclipped surrogate
    `-mean(ratio * advantage)` (its gradient at the sampling parameters is the policy
    gradient) plus `vf_loss_coeff` times the squared value error, clamped at `vf_clip_param`
    as in PPO.

    Returns:
        `(loss, kl)`: `kl` is the mean KL divergence from the distribution the batch was
        sampled with to the one under `params` (the meta loss penalises it per step).
    """
    dist_inputs, values = forward_with(model, params, batch)
    dist = dist_class(dist_inputs, model)
    ratio = torch.exp(dist.logp(batch[SB.ACTIONS]) - batch[SB.ACTION_LOGP])
    surrogate = -torch.mean(ratio * batch[SB.ADVANTAGES])
    vf_loss = torch.mean(torch.clamp((values - batch[SB.VALUE_TARGETS]) ** 2, 0.0, vf_clip_param))
    kl = torch.mean(dist_class(batch[SB.ACTION_DIST_INPUTS], model).kl(dist))
    return surrogate + vf_loss_coeff * vf_loss, kl


def adapt(model: nn.Module, dist_class: type, params: Mapping[str, torch.Tensor],
          batches: Sequence[Mapping[str, torch.Tensor]], *, inner_lr: float, vf_loss_coeff: float,
          vf_clip_param: float, create_graph: bool) -> Tuple[List[Params], List[torch.Tensor]]:
    """One gradient step of `inner_loss` per batch, each on the parameters the previous step
    gave (batch `i` was sampled with the `i`-th parameters of the chain).

    Args:
        model: the policy's model (its own parameters are not changed).
        dist_class: the action distribution class.
        params: the starting (meta) parameters.
        batches: one task's batches as tensors, in sampling order.
        inner_lr: the step size alpha.
        vf_loss_coeff: weight of the value loss in the inner loss.
        vf_clip_param: clamp on the squared value error.
        create_graph: keep each step in the autograd graph (the meta update), or not (a
            worker adapting before it samples).

    Returns:
        `(chain, kls)`: `chain[i]` the parameters after `i` steps (`chain[0]` is `params`),
        `kls[i]` the KL of batch `i` (see `inner_loss`).
    """
    current: Params = dict(params)
    if not create_graph:
        current = {k: v.detach().requires_grad_(True) for k, v in current.items()}
    chain, kls = [current], []
    for batch in batches:
        with torch.enable_grad():
            loss, kl = inner_loss(model, dist_class, current, batch, vf_loss_coeff=vf_loss_coeff,
                                  vf_clip_param=vf_clip_param)
            names = [k for k, v in current.items() if v.requires_grad]
            grads = torch.autograd.grad(loss, [current[k] for k in names], create_graph=create_graph,
                                        allow_unused=True)
        stepped = dict(current)
        for name, grad in zip(names, grads):
            if grad is not None:  # unused parameters (e.g. a free log-std in no loss) stay
                stepped[name] = current[name] - inner_lr * grad
        if not create_graph:
            stepped = {k: v.detach().requires_grad_(True) for k, v in stepped.items()}
        current = stepped
        chain.append(current)
        kls.append(kl if create_graph else kl.detach())
    return chain, kls


__all__ = ["Params", "adapt", "forward_with", "inner_loss", "model_params"]
