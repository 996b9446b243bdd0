"""MAML's policy: acts like PPO's (GAE with a separate value network), adapts in place to one
task's batch on a sampling worker, and takes the meta update on the driver."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from rlfleet.algorithms.maml.adaptation import adapt, inner_loss, model_params
from rlfleet.algorithms.maml.meta_loss import maml_loss
from rlfleet.policy.learning_loop import DEFAULT_OPTIMIZER
from rlfleet.policy.optim import clip_grad_norm
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.torch_policy import TorchPolicy
from rlfleet.rollout.postprocessing import postprocess_with_critic

SB = SampleBatch


class MAMLTorchPolicy(TorchPolicy):
    """The meta-policy. `loss` (what `learn_on_batch` descends) is the inner-adaptation loss
    at the model's own parameters; MAML itself learns through `adapt_in_place` (workers) and
    `meta_update` (driver)."""

    loss_columns = (SB.OBS, SB.ACTIONS, SB.ACTION_LOGP, SB.ACTION_DIST_INPUTS, SB.ADVANTAGES, SB.VALUE_TARGETS)
    records_values = True

    def __init__(self, observation_space, action_space, config, **kwargs):
        super().__init__(observation_space, action_space, config, **kwargs)
        # One KL coefficient per inner step, each adapted towards kl_target (update_kls).
        self.kl_coeffs: List[float] = [float(config["kl_coeff"])] * int(config["inner_adaptation_steps"])
        self.kl_target = float(config["kl_target"])

    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        cfg = self.config
        return postprocess_with_critic(self, sample_batch, cfg["gamma"], cfg["lambda"], cfg["use_gae"], True)

    def loss(self, model, dist_class, train_batch):
        cfg = self.config
        total, kl = inner_loss(model, dist_class, model_params(model), train_batch,
                               vf_loss_coeff=float(cfg["vf_loss_coeff"]), vf_clip_param=float(cfg["vf_clip_param"]))
        return total, {"total_loss": total.detach(), "kl": kl.detach()}

    # --- on a sampling worker ------------------------------------------------------------
    def adapt_in_place(self, batch: SampleBatch) -> float:
        """One inner step (`inner_lr`) on `batch` (sampled by this policy, advantages already
        standardised); the adapted weights replace the model's. Returns the step's KL."""
        cfg = self.config
        chain, kls = adapt(self.model, self.dist_class, model_params(self.model), [self.to_tensors(batch)],
                           inner_lr=float(cfg["inner_lr"]), vf_loss_coeff=float(cfg["vf_loss_coeff"]),
                           vf_clip_param=float(cfg["vf_clip_param"]), create_graph=False)
        weights = self.get_weights()
        weights.update({k: v.detach().cpu().numpy() for k, v in chain[-1].items()})
        self.set_weights(weights)  # also refreshes what acting reads (the NumPy snapshot)
        return float(kls[0])

    # --- on the driver ---------------------------------------------------------------------
    def meta_update(self, task_batches: Sequence[Sequence[SampleBatch]]) -> Dict[str, Any]:
        """`maml_optimizer_steps` Adam steps (`lr`) on `maml_loss` over every task's batches,
        then each inner step's KL coefficient adapted from the last step's KL.

        Args:
            task_batches: per task, its `inner_adaptation_steps + 1` batches in sampling order.

        Returns:
            `{"learner_stats": {...}}`.
        """
        cfg = self.config
        tensors = [[self.to_tensors(b) for b in batches] for batches in task_batches]
        optimizer = self.optimizers[DEFAULT_OPTIMIZER]
        params = list(self.model.parameters())
        stats: Dict[str, Any] = {}
        for _ in range(int(cfg["maml_optimizer_steps"])):
            total, stats = maml_loss(self, self.model, self.dist_class, tensors)
            optimizer.zero_grad()
            total.backward()
            if cfg["grad_clip"] is not None:
                stats["grad_gnorm"] = clip_grad_norm(params, float(cfg["grad_clip"])).detach()
            optimizer.step()
            self.num_grad_updates += 1
        inner_kl = stats.pop("inner_kl").cpu().numpy()
        self.update_kls(inner_kl)
        out = {k: float(v) for k, v in stats.items()}
        for i, (kl, coeff) in enumerate(zip(inner_kl, self.kl_coeffs)):
            out[f"inner_kl_{i}"] = float(kl)
            out[f"kl_coeff_{i}"] = float(coeff)
        self.refresh_fast_plan()  # the weights changed under the acting snapshot
        return {"learner_stats": self.learner_stats(out)}

    def update_kls(self, sampled_kls: Sequence[float]) -> List[float]:
        """Per inner step: halve the KL coefficient when the KL is under kl_target / 1.5,
        double it when over 1.5 * kl_target (ProMP's adaptive penalty, arXiv 1810.06784)."""
        for i, kl in enumerate(np.asarray(sampled_kls, dtype=np.float64)):
            if kl < self.kl_target / 1.5:
                self.kl_coeffs[i] *= 0.5
            elif kl > 1.5 * self.kl_target:
                self.kl_coeffs[i] *= 2.0
        return self.kl_coeffs

    def get_state(self):
        state = super().get_state()
        state["kl_coeffs"] = [float(c) for c in self.kl_coeffs]
        return state

    def set_state(self, state):
        super().set_state(state)
        if "kl_coeffs" in state:
            self.kl_coeffs = [float(c) for c in state["kl_coeffs"]]
