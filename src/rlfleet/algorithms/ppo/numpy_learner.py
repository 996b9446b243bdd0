"""PPO's NumPy learner: minibatch SGD written out in NumPy, the forward pass, the loss's gradient
and Adam in one pass per minibatch.

Why: for the small fully connected nets PPO usually trains (two [64, 64] towers on a few
hundred rows), a torch update costs far more in per-op dispatch and autograd bookkeeping
(~80 ops of forward, backward, clipping and Adam: about 1 ms per minibatch here) than in
arithmetic. The same maths written out by hand takes a fraction of that (`benchmarks/learner.py`
times both paths on the same batches); the maths are `rlfleet.fast.ppo`'s, this module binds
them to a policy and its optimizer.

It computes what `ppo_surrogate_loss` and `TorchPolicy._step` compute: the clipped surrogate
(with torch's rule for ties in `min`: half the gradient to each side), the KL penalty, the
entropy bonus, the clipped value loss, global-norm gradient clipping, the NaN guard, and
`Adam`'s update on the optimizer's own flat moment buffers, so `get_state`, checkpoints and a
later torch update see the same optimizer state. Parameters are updated in place through
NumPy views of the torch tensors. Its tests train both paths side by side and compare
weights, optimizer state and stats.

`PPOTorchPolicy.numpy_learner` names it; `multi_epoch_sgd` hands it the call only where it
is exact (`unsupported_reason`, `rlfleet.policy.numpy_learner.planned_numpy_learner`): the
policy is `PPOTorchPolicy` itself; the model a `FullyConnectedNetwork` of Linear layers with
tanh, ReLU or no activation, without pixel scaling or memory; the distribution Categorical
(Discrete actions) or DiagGaussian (Box actions); float32 parameters on the CPU; one lean
`Adam` over all of the model's parameters, without weight decay, AMSGrad or `maximize`;
`use_critic`; no towers. Everything else keeps the torch path, as does `fast_path: "off"` (policy/fast_plan.py).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from rlfleet.models.distributions import Categorical, DiagGaussian
from rlfleet.models.fcnet import FullyConnectedNetwork
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.fast.mlp import numpy_layers
from rlfleet.fast.ppo import PPOCoefficients, PPONet, ppo_gradients
from rlfleet.policy.numpy_learner import MULTI_EPOCH_SGD, FlatAdam, NumpyLearner, clip_guard_and_step
from rlfleet.policy.learning_loop import finish_result, sgd_passes, start_result
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import DEFAULT_OPTIMIZER

SB = SampleBatch


def unsupported_reason(policy) -> Optional[str]:
    """Why the NumPy learner cannot stand in for the torch update on `policy`, a PPOTorchPolicy
    itself (not a subclass: `numpy_learner_reason` checks), as far as its networks and
    optimizers go (None: it can)."""
    model = policy.model
    if type(model) is not FullyConnectedNetwork or getattr(model, "pixels", None) is not None:
        return "the model is not a plain FullyConnectedNetwork"
    if not policy.config["use_critic"]:
        # The value net then gets no gradient, and Adam leaves parameters without one alone.
        return "use_critic is False"
    if policy.towers is not None or policy.device.type != "cpu" or policy.is_recurrent():
        return "towers, a GPU or a recurrent model"
    if policy.dist_class not in (Categorical, DiagGaussian):
        return f"the action distribution is {getattr(policy.dist_class, '__name__', policy.dist_class)}"
    if model.free_log_std and policy.dist_class is not DiagGaussian:
        return "free_log_std without Gaussian actions"
    stacks = model.linear_stacks()
    for part, stack in stacks.items():
        if stack is None:
            return f"model.{part} is not a stack of Linear + tanh/ReLU layers"
    if len(stacks["value_head"]) != 1 or stacks["value_head"][0][1] is not None:
        return "the value head is not one Linear layer"
    if list(policy.optimizers) != [DEFAULT_OPTIMIZER]:
        return "more than one optimizer"
    return FlatAdam.supported(policy.optimizers[DEFAULT_OPTIMIZER], list(model.parameters()))


class PPONumpyLearner(NumpyLearner):
    """The NumPy learner of one PPOTorchPolicy (check `unsupported_reason` first).

    Weight, gradient and moment views are rebuilt at each `multi_epoch_sgd` call, so weights
    loaded in between (`set_weights`, a restored checkpoint) are the ones trained.
    """

    family = "PPO"
    replaces = MULTI_EPOCH_SGD
    unsupported_reason = staticmethod(unsupported_reason)

    # --- layout ----------------------------------------------------------------------------
    def _bind(self) -> None:
        policy = self.policy
        model = policy.model
        self.adam = adam = FlatAdam(policy.optimizers[DEFAULT_OPTIMIZER])
        views = adam.grad_views
        stacks = model.linear_stacks()
        pi_layers, pi_grads = numpy_layers(stacks["trunk"] + stacks["logits"], views)
        shared = "value_trunk" not in stacks  # the value head reads the trunk's last hidden layer
        vf_layers, vf_grads = numpy_layers(stacks["value_head"] if shared
                                           else stacks["value_trunk"] + stacks["value_head"], views)
        log_std = None
        free = model.log_std_parameter()
        if policy.dist_class is DiagGaussian and free is not None:
            log_std = (free.detach().numpy(), views[id(free)])
        self.net = PPONet(pi_layers, pi_grads, vf_layers, vf_grads, shared, len(stacks["trunk"]), log_std)

    # --- the pass ----------------------------------------------------------------------------
    def multi_epoch_sgd(self, samples: SampleBatch, num_sgd_iter: int, minibatch_size: int,
                        shuffle: bool = True) -> Dict[str, Any]:
        """As `TorchPolicy.multi_epoch_sgd`: the same minibatches (the same permutations drawn
        from the policy's RNG), the same updates, the same result."""
        policy = self.policy
        result = start_result(policy, samples)
        cols = self._columns(samples)
        self._bind()
        # A NaN / inf is the NaN guard's to report (the update is skipped), not NumPy's.
        try:
            with single_threaded_blas(), np.errstate(all="ignore"):
                last_pass = sgd_passes(policy, cols, samples.count, num_sgd_iter, minibatch_size, shuffle,
                                       gather=lambda rows, order: {k: v[order] for k, v in rows.items()},
                                       step=self._step)
        finally:  # the acting snapshot (`TorchPolicy._numpy_net`) is rebuilt, also after a raise
            self.adam.touch()
        stats = {k: float(np.mean(np.asarray([s[k] for s in last_pass], np.float32))) for k in last_pass[0]}
        return finish_result(policy, result, stats)

    def _columns(self, samples: SampleBatch) -> Dict[str, np.ndarray]:
        """The loss columns as float32 (actions: int64 for Categorical) NumPy arrays, checked
        and decompressed as the torch path does it (`to_tensors`)."""
        tensors = self.policy.to_tensors(samples)
        n = samples.count
        cols = {k: t.numpy() for k, t in tensors.items()}
        out = {"obs": cols[SB.OBS].reshape(n, -1).astype(np.float32, copy=False)}
        for key in (SB.ACTION_LOGP, SB.ADVANTAGES, SB.VALUE_TARGETS):
            out[key] = cols[key].reshape(n).astype(np.float32, copy=False)
        out[SB.ACTION_DIST_INPUTS] = cols[SB.ACTION_DIST_INPUTS].reshape(n, -1).astype(np.float32, copy=False)
        actions = cols[SB.ACTIONS]
        out[SB.ACTIONS] = (actions.reshape(n).astype(np.int64, copy=False) if self.policy.dist_class is Categorical
                           else actions.reshape(n, -1).astype(np.float32, copy=False))
        return out

    def _step(self, batch: Dict[str, np.ndarray]) -> Dict[str, float]:
        policy = self.policy
        cfg = policy.config
        coefficients = PPOCoefficients(cfg["clip_param"], cfg["vf_clip_param"], cfg["vf_loss_coeff"],
                                       policy.entropy_coeff, policy.kl_coeff, cfg["kl_coeff"] > 0.0)
        self.adam.grad.fill(0.0)
        losses = ppo_gradients(self.net, batch["obs"], batch[SB.ACTIONS], batch[SB.ACTION_LOGP],
                               batch[SB.ACTION_DIST_INPUTS], batch[SB.ADVANTAGES], batch[SB.VALUE_TARGETS],
                               coefficients, policy.dist_class is Categorical)
        clip_guard_and_step(policy, {DEFAULT_OPTIMIZER: self.adam}, {DEFAULT_OPTIMIZER: losses["total_loss"]}, losses)
        return losses


__all__ = ["PPONumpyLearner", "unsupported_reason"]
