"""TorchPolicy: a Policy whose model, loss and optimizers are PyTorch.

An algorithm subclasses it and implements `loss(model, dist_class, train_batch)`; acting,
batching to tensors, minibatch SGD and weight handling live here once, the class wiring
the pieces that do each job:

| job                                            | where                                    |
|------------------------------------------------|------------------------------------------|
| acting state: the exploration, the NumPy snapshot; acting with torch | policy/acting_state.py   |
| acting with the NumPy snapshot                 | policy/numpy_actor.py                    |
| learning state: optimizers (built on first use), their parameters | policy/learning_state.py |
| the train batch as tensors (`to_tensors`)      | policy/tensor_batch.py                   |
| the update and minibatch SGD                   | policy/learning_loop.py, towers.py       |
| where it acts and learns (NumPy or torch)      | policy/fast_plan.py                      |
| random streams and optimizer state in checkpoints | policy/policy_state.py                |
| export                                         | policy/export.py                         |

Several optimizers: `make_optimizers()` returns `{name: optimizer}` and `loss` returns
`({name: loss}, stats)` with the same names (a single optimizer may take a plain loss
tensor). Each update zeroes, backpropagates, clips (`grad_clip`) and steps every optimizer
`optimizers_to_step()` names, each on its own loss's gradient only; `get_state` /
`set_state` save and restore every optimizer by name. The optimizer named `"default"` is
the one the `lr` / `lr_schedule` keys drive.
"""
from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from rlfleet.exploration.base import Exploration
from rlfleet.exploration.stochastic_sampling import make_exploration
from rlfleet.fast.blas import single_threaded_blas
from rlfleet.fast.inference import NumpyMLPInference
from rlfleet.models.catalog import ModelCatalog
from rlfleet.policy.acting_state import EXPLORATION_WEIGHTS, ActingState, act_torch
from rlfleet.policy.actor import Actor, TorchActor
from rlfleet.policy.fast_plan import FastPathPlan, make_plan
from rlfleet.policy.learning_loop import DEFAULT_OPTIMIZER, finish_result, sgd_passes, start_result, torch_step
from rlfleet.policy.learning_state import LearningState
from rlfleet.policy.loss_inputs import masked_mean, model_forward
from rlfleet.policy.model_inputs import model_inputs, recurrence
from rlfleet.policy.nan_guard import NonFiniteGuard
from rlfleet.policy.numpy_learner import LEARN_ON_BATCH, MULTI_EPOCH_SGD, planned_numpy_learner
from rlfleet.policy.numpy_actor import (NumpyActor, compute_actions_numpy, numpy_actor_unavailable, obs_array,
                                        static_numpy_reason)
from rlfleet.policy.optimizer_choice import build_adam, check_adam_options
from rlfleet.policy.policy import Policy
from rlfleet.policy.policy_state import load_optimizer_state, optimizer_state, policy_rngs, rng_state, set_rng_state
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.policy.tensor_batch import TensorBatch, as_tensor, batch_tensors, take_rows
from rlfleet.policy.towers import Towers, learner_devices
from rlfleet.utils.schedules import make_schedule

# Names algorithm policies and tests import from here.
_obs_array = obs_array
_tensor = as_tensor
__all__ = ["DEFAULT_OPTIMIZER", "EXPLORATION_WEIGHTS", "TorchPolicy", "load_optimizer_state", "masked_mean",
           "model_forward", "optimizer_state"]


class TorchPolicy(Policy):
    """Policy with a torch model from the ModelCatalog and an Adam optimizer.

    Subclasses set `loss_columns` (the batch columns the loss reads) and implement `loss`.
    """

    loss_columns: Sequence[str] = (SampleBatch.OBS, SampleBatch.ACTIONS)
    # Whether acting records value predictions (`vf_preds`) for the loss.
    records_values: bool = False
    # "mean": the loss is a mean over the batch's rows; "sum": a sum (towers.py combines
    # the towers' gradients accordingly).
    loss_reduction: str = "mean"

    def __init__(self, observation_space, action_space, config: dict, *, policy_id: str = "default_policy"):
        super().__init__(observation_space, action_space, config)
        self.policy_id = policy_id
        self.generator, self.np_random = policy_rngs(config, policy_id)
        # Learner devices, one per tower (num_gpus / num_gpus_per_worker, _fake_gpus): see towers.py.
        self.devices = learner_devices(config)
        self.device = self.devices[0]

        # Model init draws from torch's global RNG; fork it so that seeding here never
        # disturbs (or depends on) anybody else's draws.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.generator.initial_seed()) & 0xFFFFFFFF)
            self.dist_class, self.model = self.make_model_and_action_dist()
        self.model.to(self.device)
        self.towers: Optional[Towers] = Towers(self.model, self.devices) if len(self.devices) > 1 else None
        # What it acts with (acting_state.py) and what it learns with (learning_state.py).
        self.acting = ActingState(make_exploration(config, self.exploration_space(), generator=self.generator,
                                                   np_random=self.np_random, model=self.model))
        self.learning = LearningState(self, on_build=self.refresh_fast_plan)
        self.lr_schedule = make_schedule(config["lr"], config.get("lr_schedule"), "lr_schedule")
        self.cur_lr = self.lr_schedule(0)
        # The `optimizer` key is checked now, so that a bad entry fails at once, though the
        # optimizers are built on first use.
        check_adam_options(config.get("optimizer") or {})
        # Gradient updates so far (one per update): what `optimizers_to_step` may count with.
        self.num_grad_updates = 0
        # Skips updates with a NaN/inf loss or gradient; raises after too many in a row.
        self.nonfinite_guard = NonFiniteGuard(policy_id, config.get("max_nonfinite_updates", 5))
        callbacks_factory = config.get("callbacks")
        self.callbacks = callbacks_factory() if callable(callbacks_factory) else None
        # Whether the learning loop calls `callbacks.on_learn_on_batch` (read once, not per update).
        self.has_learn_callback = self.callbacks is not None and self.callbacks.overrides("on_learn_on_batch")
        self._fast_plan: Optional[FastPathPlan] = None
        self._numpy_learner: Any = None  # the `numpy_learner` instance, built once the plan picks it
        self._initial_state, self.max_seq_len, self.view_columns = recurrence(self, config["model"])
        # Why acting cannot run the NumPy copy of the model (None: it can): see numpy_actor.py.
        self.acting.numpy_reason = static_numpy_reason(
            self, acts_its_own_way=type(self).compute_actions is not TorchPolicy.compute_actions)

    @property
    def exploration(self) -> Exploration:  # type: ignore[override]
        """The policy's exploration (built from `exploration_config`; acting_state.py)."""
        return self.acting.exploration

    def exploration_space(self) -> Any:
        """The action space the exploration draws from: the policy's (QMIX explores per
        member of a group, in one member's space)."""
        return self.action_space

    def make_model_and_action_dist(self) -> Tuple[Any, torch.nn.Module]:
        """`(dist_class, model)`: from the ModelCatalog by default; algorithms with their own
        networks (Q-nets, actor-critics with target copies) override this. Runs with torch's
        RNG seeded from the policy's generator."""
        dist_class, num_outputs = ModelCatalog.get_action_dist(self.action_space, self.config["model"])
        model = ModelCatalog.get_model(self.observation_space, self.action_space, num_outputs, self.config["model"],
                                       name=f"{self.policy_id}_model")
        return dist_class, model

    # --- the fast path plan ------------------------------------------------------------
    # The NumpyLearner class restating this class's update (policy/numpy_learner.py); None: none.
    numpy_learner: Optional[type] = None

    def numpy_actor_reason(self) -> Optional[str]:
        """Why acting can never run on the NumPy snapshot of the model (None: it can, outside
        the exploration's random steps; see numpy_actor.py)."""
        if self.acting.numpy_reason is None:
            self._numpy_net()  # sets the reason when the model has layers the copy cannot run
        return self.acting.numpy_reason

    @property
    def fast_plan(self) -> FastPathPlan:
        """Where this policy acts and learns (see policy/fast_plan.py), computed once and again
        after `refresh_fast_plan` (weights, state or optimizers replaced)."""
        if self._fast_plan is None:
            self._fast_plan = make_plan(self)
        return self._fast_plan

    def refresh_fast_plan(self) -> None:
        """Drops the plan (and the NumPy learner built for it): the next use recomputes them."""
        self._fast_plan = None
        self._numpy_learner = None

    # --- optimizers ------------------------------------------------------------------
    def make_optimizers(self) -> Dict[str, torch.optim.Optimizer]:
        """`{name: optimizer}`; `loss` returns a loss per name. Default: one Adam over the
        model's parameters, named `"default"`, at `lr` (what `lr_schedule` then drives).
        Algorithms with several networks (actor, critic, ...) override this, building each
        optimizer with `make_adam` so that the `optimizer` config key reaches it."""
        return {DEFAULT_OPTIMIZER: self.make_adam(self.model.parameters(), lr=self.cur_lr)}

    def make_adam(self, params, lr: float, **algorithm_defaults: Any) -> Any:
        """Adam over `params` at `lr` with the algorithm's own defaults (e.g. `eps=1e-7`),
        which the user's `optimizer` config entries override: `rlfleet.policy.optim.Adam`
        (torch.optim.Adam's maths without importing torch._dynamo), or torch.optim.Adam for
        the options only it has (see optimizer_choice.build_adam).

        Raises:
            ValueError: naming the `optimizer` key when an entry is not an Adam argument or
                has a value Adam rejects.
        """
        return build_adam(params, lr, algorithm_defaults, self.config.get("optimizer") or {})

    @property
    def optimizers(self) -> Dict[str, Any]:
        """`{name: optimizer}` from `make_optimizers()`, built on first use (with any optimizer
        state `set_state` received before then): a worker that only acts (remote sampling,
        evaluation, `rlfleet evaluate`) never builds one."""
        return self.learning.optimizers

    def optimizers_to_step(self) -> List[str]:
        """The optimizers the next update steps (default: all of them); e.g. TD3 steps its
        actor only every `policy_delay` updates. Reads `self.num_grad_updates`."""
        return list(self.optimizers)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The policy's only optimizer (`policy.optimizers[name]` when it has several)."""
        if len(self.optimizers) != 1:
            # AttributeError: `getattr(policy, "optimizer", None)` then reads as "none".
            raise AttributeError(f"{type(self).__name__} has several optimizers {sorted(self.optimizers)}; "
                                 "use policy.optimizers[name]")
        return next(iter(self.optimizers.values()))

    # --- acting ------------------------------------------------------------------
    def compute_actions(
        self,
        obs_batch,
        state_batches=None,
        prev_action_batch=None,
        prev_reward_batch=None,
        info_batch=None,
        episodes=None,
        explore=None,
        timestep=None,
        **kwargs,
    ) -> Tuple[np.ndarray, List[np.ndarray], Dict[str, np.ndarray]]:
        explore = self.config.get("explore", True) if explore is None else explore
        timestep = self.global_timestep if timestep is None else timestep
        obs_np = obs_array(obs_batch)
        if not state_batches and numpy_actor_unavailable(self, timestep) is None:
            # Same distribution as the torch path, a fraction of the dispatch cost (see
            # rlfleet/fast/inference.py).
            return compute_actions_numpy(self, obs_np, explore, timestep)
        return act_torch(self, obs_np, state_batches, prev_action_batch, prev_reward_batch, explore, timestep)

    def actor(self, explore: Optional[bool], timestep: int, *, steps: Optional[int] = None,
              num_envs: Optional[int] = None, defer: bool = True) -> Actor:
        """The NumPy actor where `numpy_actor_unavailable` allows it (and `defer`), else the
        torch actor (see `Policy.actor`)."""
        if defer and numpy_actor_unavailable(self, timestep) is None:
            explore = self.config.get("explore", True) if explore is None else explore
            return NumpyActor(self, self.acting.net, explore, timestep, steps, num_envs)  # `net`: just checked
        return TorchActor(self, explore, timestep)

    def _numpy_net(self) -> Optional[NumpyMLPInference]:
        """The NumPy snapshot of the model, up to date with its weights (`ActingState.numpy_net`);
        None when the model has layers it cannot copy."""
        return self.acting.numpy_net(self.model)

    def compute_values(self, obs: np.ndarray, state_batches: Optional[List[np.ndarray]] = None,
                       prev_action_batch=None, prev_reward_batch=None) -> np.ndarray:
        """State values for a batch of (filtered) observations (and, for recurrent models,
        the state going into them and the previous actions / rewards)."""
        if len(obs) == 0:
            return np.zeros(0, np.float32)
        if self.acting.numpy_reason is None and not state_batches and self._numpy_net() is not None:
            with single_threaded_blas():  # as the NumPy snapshot acts: see rlfleet/fast/blas.py
                return self.acting.net.values(obs_array(obs))
        input_dict, state = model_inputs(self, obs_array(obs), state_batches, prev_action_batch, prev_reward_batch)
        with torch.inference_mode():
            self.model(input_dict, state, None)
            return self.model.value_function().cpu().numpy()

    # --- recurrent models ------------------------------------------------------------
    def get_initial_state(self) -> List[np.ndarray]:
        return [s.copy() for s in self._initial_state]

    def is_recurrent(self) -> bool:
        return bool(self._initial_state)

    def num_state_tensors(self) -> int:
        return len(self._initial_state)

    # --- learning ----------------------------------------------------------------
    def loss(self, model, dist_class, train_batch: Dict[str, torch.Tensor]
             ) -> Tuple[Union[torch.Tensor, Dict[str, torch.Tensor]], Dict[str, torch.Tensor]]:
        """The algorithm's loss on a dict of tensors; returns `(loss, stats)`, where `loss`
        is `{optimizer name: loss}` (or one tensor when the policy has one optimizer).
        A per-sample `stats["td_error"]` comes back as `learn_on_batch(...)["td_error"]`."""
        raise NotImplementedError  # abstract

    def to_tensors(self, batch: SampleBatch) -> TensorBatch:
        """The loss columns of `batch` as tensors, converted once per train batch
        (tensor_batch.py). For a recurrent model the rows are first cut into padded sequences:
        the `TensorBatch` names its `[S, T, ...]` row columns, which the learning loop
        flattens back to `[S * T, ...]` for the loss (`flat_rows`)."""
        columns = list(self.loss_columns) + [c for c in self.view_columns if c not in self.loss_columns]
        seq_len = self.max_seq_len if self.is_recurrent() else 0
        return batch_tensors(batch, columns, self.device, type(self).__name__, seq_len, self.num_state_tensors())

    def _step(self, tensors: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """One gradient update with autograd (`learning_loop.torch_step`)."""
        return torch_step(self, tensors)

    def reduce_gradients(self, names: List[str]) -> None:
        """Called between backprop and the optimizers' step, with the gradients in the
        parameters of the optimizers `names`; DD-PPO all-reduces them across its workers."""

    def learn_on_batch(self, samples: SampleBatch) -> Dict[str, Any]:
        """One gradient update on the whole of `samples`.

        Returns:
            `{"learner_stats": {...}}`, plus `"td_error"` (per sample, NumPy) when the loss
            reports one (off-policy trainers update replay priorities with it).
        """
        numpy_learner = planned_numpy_learner(self, LEARN_ON_BATCH)
        if numpy_learner is not None:
            return numpy_learner.learn_on_batch(samples)
        result = start_result(self, samples)
        return finish_result(self, result, self._step(self.to_tensors(samples)))

    def learner_stats(self, stats: Dict[str, float]) -> Dict[str, float]:
        """Adds the scheduled learning rate (when `lr` drives an optimizer) and the
        exploration's schedule values (epsilon, noise scale) to the loss's stats."""
        if DEFAULT_OPTIMIZER in self.optimizers:
            stats["cur_lr"] = self.cur_lr
        stats.update(self.exploration.get_info())
        return stats

    def multi_epoch_sgd(
        self, samples: SampleBatch, num_sgd_iter: int, minibatch_size: int, shuffle: bool = True
    ) -> Dict[str, Any]:
        """`num_sgd_iter` passes of minibatch SGD over `samples`, tensors built once
        (`learning_loop.sgd_passes`).

        Returns `{"learner_stats": mean of each stat over the last pass}`.
        """
        numpy_learner = planned_numpy_learner(self, MULTI_EPOCH_SGD)
        if numpy_learner is not None:
            return numpy_learner.multi_epoch_sgd(samples, num_sgd_iter, minibatch_size, shuffle)
        result = start_result(self, samples)
        tensors = self.to_tensors(samples)
        if self.towers is not None:
            self.towers.load(tensors)  # the train batch on every tower's device, once
        n = samples.count
        if self.is_recurrent():
            # Minibatches of whole sequences, about `minibatch_size` real steps each.
            num_seqs = len(tensors[SampleBatch.SEQ_LENS])
            minibatch_size = max(1, round(int(minibatch_size) * num_seqs / max(n, 1)))
            n = num_seqs
        towers = self.towers
        last_pass = sgd_passes(
            self, tensors, n, num_sgd_iter, minibatch_size, shuffle,
            gather=lambda cols, order: take_rows(cols, torch.from_numpy(order)), step=self._step,
            minibatch=None if towers is None else lambda idx: towers.minibatch(torch.from_numpy(idx)))
        stats = {k: float(torch.stack([s[k] for s in last_pass]).float().mean()) for k in last_pass[0]}
        return finish_result(self, result, stats)

    def on_global_var_update(self, global_vars: Dict[str, Any]) -> None:
        super().on_global_var_update(global_vars)
        lr = self.lr_schedule(self.global_timestep)
        if lr != self.cur_lr:
            self.cur_lr = lr
            scheduled = (self.learning.built or {}).get(DEFAULT_OPTIMIZER)  # one built later starts at cur_lr
            for group in scheduled.param_groups if scheduled is not None else []:
                group["lr"] = lr

    # --- state -------------------------------------------------------------------
    def get_weights(self) -> Dict[str, np.ndarray]:
        """The model's state_dict, plus the weights of an exploration that has its own
        networks (Curiosity's ICM), prefixed `exploration.`: every worker postprocesses with them."""
        weights = {k: v.detach().cpu().numpy().copy() for k, v in self.model.state_dict().items()}
        weights.update(self.acting.exploration_weights())
        return weights

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        """Loads the model's weights and, where both sides have them, the exploration's:
        an evaluation policy with another exploration ignores the ICM's, and weights of the
        model alone (an imported model) leave the exploration's networks as they are."""
        weights = self.acting.load_exploration_weights(weights)
        own = self.model.state_dict()
        unknown = sorted(set(weights) - set(own))
        missing = sorted(set(own) - set(weights))
        if unknown or missing:
            raise ValueError(f"weights do not match the model: missing {missing}, unexpected {unknown}")
        for name, value in weights.items():
            if tuple(np.shape(value)) != tuple(own[name].shape):
                raise ValueError(
                    f"weight {name!r} has shape {tuple(np.shape(value))}, the model expects {tuple(own[name].shape)}"
                )
        # np.array copies: weights from Ray's object store arrive as read-only views.
        self.model.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in weights.items()})
        self.refresh_fast_plan()

    def get_state(self) -> Dict[str, Any]:
        """Weights, counters, exploration, every optimizer (`{"optimizers": {name: ...}}`)
        and RNG state: NumPy arrays and JSON-able scalars only (checkpoint.py splits them
        into safetensors and JSON)."""
        state = super().get_state()
        state["num_grad_updates"] = int(self.num_grad_updates)
        state["exploration"] = self.exploration.get_state()
        state["optimizers"] = self.learning.state()
        state["rng"] = rng_state(self)
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        # `num_critic_updates`: DDPG/TD3's name for the count in states saved before it moved here.
        self.num_grad_updates = int(state.get("num_grad_updates", state.get("num_critic_updates", 0)))
        if "exploration" in state:
            self.exploration.set_state(state["exploration"])
        # Not built yet (a worker that may only act): applied when they are.
        self.learning.load({k: v for k, v in state.items() if k == "optimizers" or k.endswith("optimizer")})
        if "rng" in state:
            set_rng_state(self, state["rng"])
        self.on_global_var_update({"timestep": self.global_timestep})
        self.refresh_fast_plan()

    # --- export --------------------------------------------------------------------
    def export_model(self, export_dir: str, onnx: Optional[int] = None, *, preprocessor: Any = None,
                     observation_filter: Any = None, include_filter: bool = True) -> str:
        """TorchScript (or ONNX with opset `onnx`) of obs -> (greedy actions, dist inputs,
        value); raw observations in when a worker's `preprocessor` (and `observation_filter`)
        are given; see policy/export.py."""
        from rlfleet.policy.export import export_policy_model

        return export_policy_model(self, export_dir, onnx, preprocessor=preprocessor,
                                   observation_filter=observation_filter, include_filter=include_filter)

    def acting_greedily(self) -> ContextManager[None]:
        """The model as greedy acting (`explore=False`) runs it, for the length of a `with`
        (what an export traces). No change here; DQN's noisy nets switch their noise off."""
        return contextlib.nullcontext()

    def export_checkpoint(self, export_dir: str, filename_prefix: str = "model") -> str:
        """The model's weights alone: `<prefix>.safetensors` + `<prefix>.json`."""
        from rlfleet.policy.export import export_policy_weights

        return export_policy_weights(self, export_dir, filename_prefix)

    def import_model(self, path: str) -> None:
        """Loads weights written by `export_checkpoint` (checksum and shapes checked)."""
        from rlfleet.policy.export import import_policy_weights

        import_policy_weights(self, path)

    def import_model_from_h5(self, import_file: str) -> None:
        raise ValueError(
            f"import_model_from_h5({import_file!r}): rlfleet has no Keras, so .h5 files cannot be imported; "
            "export weights with export_checkpoint(dir) and load them with import_model(path)")

