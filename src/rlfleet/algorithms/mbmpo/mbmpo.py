"""MB-MPO trainer: real data from adapted policies, a refitted dynamics ensemble, MAML steps
in imagined rollouts with each ensemble member as one task."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import torch

from rlfleet.algorithms.maml import ALGO_KEYS as MAML_KEYS, MAMLTorchPolicy, adapt
from rlfleet.algorithms.maml.adaptation import model_params
from rlfleet.algorithms.maml.maml import refuse_multi_agent_and_recurrent
from rlfleet.algorithms.mbmpo.dynamics import DynamicsEnsemble
from rlfleet.algorithms.mbmpo.imagined_env import ImaginedVectorEnv, reward_function
from rlfleet.algorithms.mbmpo.imagined_rollout import imagine
from rlfleet.algorithms.mbmpo.real_data import TransitionStore, sample_adapted
from rlfleet.config import (ConfigKey, activation, algorithm_config, dict_value, int_at_least, number_above,
                            number_in, override, positive_int_list)
from rlfleet.env.env_context import EnvContext
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from rlfleet.trainer import Trainer
from rlfleet.utils.seeding import derive_seed

K = ConfigKey
# RLlib 1.x's MB-MPO defaults (rllib/agents/mbmpo/mbmpo.py) where they differ from MAML's.
_ADAPT_COLUMNS = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ACTION_LOGP, SampleBatch.ACTION_DIST_INPUTS,
                  SampleBatch.ADVANTAGES, SampleBatch.VALUE_TARGETS)
_MBMPO_DEFAULTS = {"maml_optimizer_steps": 8, "inner_lr": 1e-3, "clip_param": 0.5}

ALGO_KEYS: List[ConfigKey] = [k._replace(default=_MBMPO_DEFAULTS.get(k.name, k.default)) for k in MAML_KEYS
                              if k.name != "meta_batch_size"] + [
    K("num_maml_steps", 5, "MAML meta updates (in imagination) per iteration, i.e. per refit of the ensemble.",
      int_at_least(1)),
    K("ensemble_size", 5, "Dynamics models in the ensemble; each is one MAML task.", int_at_least(1)),
    K("num_worker_envs", 50, "Imagined episodes per ensemble member and adaptation stage (stepped together).",
      int_at_least(1)),
    K("dynamics_model", {}, "The ensemble's networks and their fit; see dynamics_model.*.", dict_value()),
    K("dynamics_model.model_hiddens", [512, 512], "Hidden layer sizes of each dynamics model.", positive_int_list),
    K("dynamics_model.model_activation", "relu", "Hidden activation of each dynamics model.", activation),
    K("dynamics_model.model_lr", 1e-3, "Adam learning rate of the dynamics models.", number_above(0)),
    K("dynamics_model.model_train_epochs", 1000, "Most epochs of each model's fit per iteration (early stopping "
      "usually ends it first).", int_at_least(1)),
    K("dynamics_model.model_batch_size", 500, "Minibatch size of the dynamics models' fit.", int_at_least(1)),
    K("dynamics_model.valid_split_ratio", 0.2, "Share of the real transitions each model holds out for "
      "validation (its early stopping).", number_in(0, 0.9)),
    K("dynamics_model.patience", 5, "Epochs without a better validation loss before a model's fit stops.",
      int_at_least(1)),
    override("horizon", 200),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class MBMPOTrainer(Trainer):
    """Model-Based Meta-Policy Optimisation (Clavera et al. 2018, arXiv 1809.05214), as
    RLlib 1.x's MB-MPO: MAML (`rlfleet.algorithms.maml`: its inner adaptation and PPO-style
    meta update) over an ensemble of learned dynamics models, each member one task.

    Each iteration (Algorithm 1 of the paper):

    1. Sample real data (`rollout_fragment_length * num_envs_per_worker` steps per worker)
       with the meta-policy adapted to one ensemble member per worker (worker `i`: member
       `i mod ensemble_size`; in local mode the member turns with the iteration). Before the
       first fit the meta-policy itself samples.
    2. Refit the ensemble on all real data so far (`dynamics_model.*`): per member its own
       train / validation split and early stopping.
    3. `num_maml_steps` times: per member, `num_worker_envs` imagined episodes of `horizon`
       steps with the meta-policy, rewards from the env's `reward(obs, action, next_obs)`;
       `inner_adaptation_steps` inner steps each followed by new imagined episodes; then
       `maml_optimizer_steps` Adam steps of MAML's meta loss over all members.

    The env must expose `reward(obs, action, next_obs)` over NumPy batches (e.g.
    `rlfleet.env.examples.pendulum_with_reward:PendulumWithReward`); an env without it is
    refused at construction. Flat Box observations and Box actions only.

    Results: `episode_reward_mean` is over the real episodes; `imagined_reward_mean_adapt_N`
    the mean imagined return after N inner steps in the last MAML step (and
    `MAMLIter{i}_DynaTrajInner_{N}_episode_reward_mean` per MAML step, RLlib 1.x's names);
    `info/learner/default_policy` has the meta loss stats and `model_valid_loss`.

    Departures from RLlib 1.x's MB-MPO:

    - Local mode runs (RLlib 1.x required `num_workers >= 1`); remote workers only sample
      real data, the imagined rollouts run on the driver, vectorised over
      `num_worker_envs` copies per member.
    - `ensemble_size` is a top-level key (RLlib 1.x: `dynamics_model.model_ensemble_size`);
      data are always normalised (its `dynamics_model.normalize_data` is not offered);
      early stopping waits `dynamics_model.patience` epochs without a better validation
      loss, keeping each model's best weights.
    - Predictions are clipped into the observation space's finite bounds; imagined
      episodes cut at `horizon` are bootstrapped from the value function (RLlib 1.x ended
      them).
    - Inner steps and meta loss are rlfleet's MAML (see its page): the value loss clamps
      the squared error at `vf_clip_param`; `inner_adaptation_steps: 0` is allowed.
    - `num_worker_envs` counts imagined episodes per member and stage on the driver
      (RLlib 1.x: model-backed envs per worker; its `custom_vector_env` is not offered).
    - `horizon` (the common key, default 200 here) also cuts the real episodes, as in
      RLlib 1.x; `None` is refused (the imagined episodes need a length).
    - Imagined episodes and the real data's episode resets are seeded from `seed` and the
      iteration, and a checkpoint holds the real transitions, the ensemble (its
      normalisation statistics included) and the batches the next real-data policies adapt
      on, so a resumed run repeats the original.
    - `train_batch_size` is not read. Single-agent, non-recurrent models only.
    """

    _name = "MBMPO"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = MAMLTorchPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        refuse_multi_agent_and_recurrent("MBMPO", config)
        if config.get("input", "sampler") != "sampler":
            raise ValueError(f"MBMPO: 'input': {config['input']!r} is not supported; it samples real data "
                             "online: set input 'sampler'")
        if config.get("horizon") is None:
            raise ValueError("MBMPO: 'horizon': None leaves the imagined episodes without a length; set "
                             "horizon to the env's episode length (200 for Pendulum)")

    def setup(self, config: dict) -> None:
        # The trainer's own env copy: its reward function scores imagined steps, its resets
        # give the imagined episodes' start states.
        self._env = self.env_creator(EnvContext(config.get("env_config") or {}, worker_index=0))
        self._reward_fn = reward_function(self._env)
        obs_space, act_space = self._env.observation_space, self._env.action_space
        for role, space in (("observation", obs_space), ("action", act_space)):
            if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
                raise ValueError(f"MBMPO models flat (1-D) Box observation and action spaces only; the env's "
                                 f"{role} space: got {type(space).__name__} {space}")
        seed = config.get("seed")
        self._rng = np.random.default_rng(derive_seed(seed, "mbmpo", 0) if seed is not None else None)
        self._env.reset(seed=int(self._rng.integers(2 ** 31)))
        dm = config["dynamics_model"]
        if seed is not None:
            torch.manual_seed(derive_seed(seed, "mbmpo_ensemble", 0) & 0x7FFFFFFF)
        self.ensemble = DynamicsEnsemble(obs_space.shape[0], act_space.shape[0], config["ensemble_size"],
                                         dm["model_hiddens"], dm["model_activation"])
        self.store = TransitionStore(act_space, config["normalize_actions"], config["clip_actions"])
        low, high = obs_space.low, obs_space.high
        self._obs_bounds = (low, high) if np.all(np.isfinite(low)) and np.all(np.isfinite(high)) else (None, None)
        self._adapt_batches: List[Optional[SampleBatch]] = [None] * int(config["ensemble_size"])
        self._metrics: Dict[str, float] = {}
        self._generator: Optional[torch.Generator] = None

    def training_step(self) -> Dict[str, Any]:
        cfg = self.config
        self._generator = None
        if cfg.get("seed") is not None:
            # Imagined start states and actions drawn per iteration from the seed: a resumed run
            # draws the same.
            self._env.reset(seed=derive_seed(cfg["seed"], "mbmpo_starts", self.iteration) & 0x7FFFFFFF)
            self._generator = torch.Generator().manual_seed(derive_seed(cfg["seed"], "mbmpo_imagine", self.iteration))
        # === sample: real data with the adapted policies ===
        for batch in self._sample_real():
            self.store.add(batch)
            self.count_sampled(batch.count, batch.count)
        # === learn (1): refit the dynamics ensemble ===
        data, dm = self.store.arrays(), cfg["dynamics_model"]
        model_stats = self.ensemble.fit(data["obs"], data["actions"], data["new_obs"], lr=dm["model_lr"],
                                        batch_size=dm["model_batch_size"], train_epochs=dm["model_train_epochs"],
                                        valid_split_ratio=dm["valid_split_ratio"], patience=dm["patience"],
                                        rng=self._rng)
        # === learn (2): MAML steps in imagination, one task per member ===
        policy = self.get_policy(DEFAULT_POLICY_ID)
        self._metrics = {}
        info: Dict[str, Any] = {}
        for i in range(int(cfg["num_maml_steps"])):
            task_batches = [self._imagine_task(policy, m, i) for m in range(self.ensemble.size)]
            self._adapt_batches = [batches[0] for batches in task_batches]
            info = policy.meta_update(task_batches)
            trained = sum(b.count for batches in task_batches for b in batches)
            self.counters["num_env_steps_trained"] += trained
            self.counters["num_agent_steps_trained"] += trained
        info["learner_stats"].update(model_stats)
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return {DEFAULT_POLICY_ID: info}

    def _imagine_task(self, policy, member: int, maml_iter: int) -> List[SampleBatch]:
        """One member's batches: imagined with the meta parameters, then after each inner step."""
        cfg = self.config
        env = ImaginedVectorEnv(self.ensemble, member, self._reward_fn, self._reset_states, cfg["num_worker_envs"],
                                cfg["horizon"], *self._obs_bounds)
        params = {k: v.detach() for k, v in model_params(policy.model).items()}
        batches = []
        for step in range(int(cfg["inner_adaptation_steps"]) + 1):
            batch, returns = imagine(policy, params, env, gamma=cfg["gamma"], lambda_=cfg["lambda"],
                                     normalize_actions=cfg["normalize_actions"], clip_actions=cfg["clip_actions"],
                                     generator=self._generator)
            batches.append(batch)
            self._record(f"MAMLIter{maml_iter}_DynaTrajInner_{step}_episode_reward_mean", member, returns)
            self._record(f"imagined_reward_mean_adapt_{step}", member, returns)
            if step < int(cfg["inner_adaptation_steps"]):
                params = self._adapted(policy, params, batch)
        return batches

    def _adapted(self, policy, params, batch: SampleBatch) -> Dict[str, torch.Tensor]:
        cfg = self.config
        chain, _ = adapt(policy.model, policy.dist_class, params, [policy.to_tensors(batch)],
                         inner_lr=float(cfg["inner_lr"]), vf_loss_coeff=float(cfg["vf_loss_coeff"]),
                         vf_clip_param=float(cfg["vf_clip_param"]), create_graph=False)
        return {k: v.detach() for k, v in chain[-1].items()}

    def _record(self, key: str, member: int, returns: np.ndarray) -> None:
        # Mean over members: each member's share arrives in turn (member 0 starts the sum).
        size = self.ensemble.size
        mean = float(np.mean(returns)) / size
        self._metrics[key] = mean if member == 0 else self._metrics.get(key, 0.0) + mean

    def _reset_states(self, n: int) -> np.ndarray:
        return np.stack([np.asarray(self._env.reset()[0], np.float32).reshape(-1) for _ in range(n)])

    def _adapted_weights(self, member: int) -> Optional[Dict[str, np.ndarray]]:
        """The meta-policy adapted on member `member`'s last imagined batch (None before any)."""
        batch = self._adapt_batches[member]
        steps = int(self.config["inner_adaptation_steps"])
        if batch is None or steps == 0:
            return None
        policy = self.get_policy(DEFAULT_POLICY_ID)
        params = self._adapted(policy, {k: v.detach() for k, v in model_params(policy.model).items()}, batch)
        return {k: v.cpu().numpy() for k, v in params.items()}

    def _sample_real(self) -> List[SampleBatch]:
        indices = self.workers.remote_worker_indices()
        seed = self.config.get("seed")
        seed = derive_seed(seed, "mbmpo_real", self.iteration) if seed is not None else None
        if not indices:
            member = self.iteration % self.ensemble.size
            return [sample_adapted(self.workers.local_worker(), self._adapted_weights(member), seed)]
        weights = {index: self._adapted_weights(j % self.ensemble.size) for j, index in enumerate(indices)}
        answers = self.workers.foreach_worker_with_index(
            lambda worker, i: sample_adapted(worker, weights[i], seed) if i in weights else None)
        return [b for b in answers[1:] if b is not None]

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        result.update(self._metrics)
        return result

    # --- state: the ensemble (with its normalisation) and the real data ---------------------
    def get_state(self) -> Dict[str, Any]:
        return dict(super().get_state(), mbmpo={
            "ensemble": {k: v.detach().cpu().numpy() for k, v in self.ensemble.state_dict().items()},
            "transitions": self.store.get_state(),
            "rng": self._rng.bit_generator.state,
            # What the next iteration's real-data policies adapt on.
            "adapt_batches": {str(m): {c: np.asarray(b[c]) for c in _ADAPT_COLUMNS}
                              for m, b in enumerate(self._adapt_batches) if b is not None},
        })

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        mbmpo = state.get("mbmpo") or {}
        if mbmpo:
            self.ensemble.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in mbmpo["ensemble"].items()})
            self.store.set_state(mbmpo["transitions"])
            self._rng.bit_generator.state = mbmpo["rng"]
            saved = mbmpo.get("adapt_batches") or {}
            self._adapt_batches = [SampleBatch({c: np.asarray(v) for c, v in saved[str(m)].items()})
                                   if str(m) in saved else None for m in range(self.ensemble.size)]

    def stop(self) -> None:
        env = getattr(self, "_env", None)
        if env is not None:
            env.close()
        super().stop()


__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "MBMPOTrainer"]
