"""The Trainer's policy-facing API: actions for raw observations (`rlfleet.trainer.acting`),
policies and weights at run time, and a policy's export and import (`policy/export.py`).

A base class of `Trainer`, in its own module for size; it reaches the policies through the
trainer's `workers` (a `WorkerSet`) and `evaluator`.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Optional

from rlfleet.trainer import acting
from rlfleet.policy.export import export_policy_formats
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID

logger = logging.getLogger(__name__)


class TrainerPolicies:
    """Acting, policies, weights, export: everything `Trainer` does through its local worker's policies."""

    # --- acting (see acting.py) ------------------------------------------------------
    def compute_single_action(self, observation, state: Optional[List[Any]] = None, prev_action=None,
                              prev_reward: Optional[float] = None, info: Optional[dict] = None,
                              policy_id: str = DEFAULT_POLICY_ID, full_fetch: bool = False,
                              explore: Optional[bool] = None, unsquash_actions: Optional[bool] = None,
                              clip_actions: Optional[bool] = None):
        """The action for one raw env observation (preprocessed and filtered as in sampling).

        Returns:
            The action; or `(action, state_out, extra_fetches)` when `state` is given or
            `full_fetch` is True.
        """
        return acting.compute_single_action(
            self.workers.local_worker(), observation, state, prev_action, prev_reward, info, policy_id=policy_id,
            full_fetch=full_fetch, explore=explore, unsquash_actions=unsquash_actions, clip_actions=clip_actions)

    def compute_action(self, *args, **kwargs):
        """Deprecated name of `compute_single_action`."""
        logger.warning("compute_action is deprecated; use compute_single_action")
        return self.compute_single_action(*args, **kwargs)

    def compute_actions(self, observations: Dict[Any, Any], state: Optional[Dict[Any, List[Any]]] = None,
                        prev_action=None, prev_reward=None, info=None, policy_id: str = DEFAULT_POLICY_ID,
                        full_fetch: bool = False, explore: Optional[bool] = None,
                        normalize_actions: Optional[bool] = None, clip_actions: Optional[bool] = None):
        """Actions for a dict `{key: raw observation}` in one batched forward pass.

        Returns:
            `{key: action}`; or `(actions, states, extra_fetches)` when `state` is given
            or `full_fetch` is True.
        """
        return acting.compute_actions(
            self.workers.local_worker(), self.config, observations, state, prev_action, prev_reward, info,
            policy_id=policy_id, full_fetch=full_fetch, explore=explore, normalize_actions=normalize_actions,
            clip_actions=clip_actions)

    # --- policies and weights ------------------------------------------------------
    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID):
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: Optional[List[str]] = None) -> Dict[str, dict]:
        return self.workers.local_worker().get_weights(policies)

    def set_weights(self, weights: Dict[str, dict]) -> None:
        self.workers.local_worker().set_weights(weights)
        self.workers.sync_weights()

    def add_policy(self, policy_id: str, policy_cls: Optional[type] = None, *, observation_space=None,
                   action_space=None, config: Optional[dict] = None, policy_mapping_fn: Optional[Callable] = None,
                   policies_to_train: Optional[List[str]] = None):
        """Adds a policy to every worker (evaluation workers included, and workers made
        later) while training goes on.

        Args:
            policy_id: the new policy's id.
            policy_cls: its Policy class (None: this trainer's default policy class).
            observation_space: None: inferred from the env (an agent the mapping sends to it,
                else the env's shared space).
            action_space: likewise.
            config: overrides merged over the trainer config for this policy.
            policy_mapping_fn: the mapping from now on; episodes already running keep the
                one they started with until they end.
            policies_to_train: the new list of policies to train (None: unchanged, plus the
                new policy when all policies train).

        Returns:
            The new policy (the local worker's copy). Remote copies get its weights.
        """
        change = dict(policy_id=policy_id, policy_cls=policy_cls, observation_space=observation_space,
                      action_space=action_space, config=config, policy_mapping_fn=policy_mapping_fn,
                      policies_to_train=policies_to_train)
        self.workers.add_policy(**change)
        self.evaluator.add_policy(**change)
        if self.workers.remote_workers():  # copies on other workers start from the local weights
            self.workers.sync_weights(policies=[policy_id])
        return self.get_policy(policy_id)

    def remove_policy(self, policy_id: str = DEFAULT_POLICY_ID, *, policy_mapping_fn: Optional[Callable] = None,
                      policies_to_train: Optional[List[str]] = None) -> None:
        """Removes a policy from every worker (evaluation workers included).

        Args:
            policy_id: the policy to remove.
            policy_mapping_fn: the mapping from now on (episodes running keep theirs and
                finish with the removed policy; its samples are dropped).
            policies_to_train: the new list (None: the old one without `policy_id`).
        """
        change = dict(policy_id=policy_id, policy_mapping_fn=policy_mapping_fn, policies_to_train=policies_to_train)
        self.workers.remove_policy(**change)
        self.evaluator.remove_policy(**change)

    def export_policy_model(self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID,
                            onnx: Optional[int] = None, *, include_filter: bool = True) -> str:
        """TorchScript (`model.pt`), or ONNX (`model.onnx`) with opset `onnx`, of the policy:
        raw env observations -> greedy env actions, action-distribution inputs (and values),
        with the preprocessor and the observation filter's current statistics in the graph;
        `include_filter=False`: the bare model (preprocessed, filtered observations in), the
        statistics in `filter.json` beside it. See policy/export.py."""
        worker = self.workers.local_worker()
        return self.get_policy(policy_id).export_model(
            export_dir, onnx, preprocessor=worker.preprocessors[policy_id],
            observation_filter=worker.filters[policy_id], include_filter=include_filter)

    def export_policy_checkpoint(self, export_dir: str, filename_prefix: str = "model",
                                 policy_id: str = DEFAULT_POLICY_ID) -> str:
        """The policy's weights alone (`<prefix>.safetensors` + `<prefix>.json`)."""
        return self.get_policy(policy_id).export_checkpoint(export_dir, filename_prefix)

    def import_model(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Loads weights written by `export_policy_checkpoint` and pushes them to all workers."""
        self.get_policy(policy_id).import_model(import_file)
        self.workers.sync_weights()

    def import_policy_model_from_h5(self, import_file: str, policy_id: str = DEFAULT_POLICY_ID) -> None:
        """Not available: rlfleet has no Keras; use `import_model` with exported safetensors weights."""
        self.get_policy(policy_id).import_model_from_h5(import_file)

    def export_model(self, export_formats, export_dir: str) -> Dict[str, str]:
        """Exports the default policy in each of `export_formats` ("model": TorchScript,
        "onnx": ONNX with opset `$ONNX_OPSET` (default 11), "checkpoint": weights) into
        `export_dir/<format>/` (the models take raw observations); returns `{format: path}`."""
        worker = self.workers.local_worker()
        return export_policy_formats(self.get_policy(), export_formats, export_dir,
                                     preprocessor=worker.preprocessors[DEFAULT_POLICY_ID],
                                     observation_filter=worker.filters[DEFAULT_POLICY_ID])
