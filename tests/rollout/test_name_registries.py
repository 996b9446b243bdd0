"""Names registered on the driver (envs, custom models, action distributions, preprocessors)
resolve in remote workers and Tune trials too (issue 26)."""
from __future__ import annotations

import numpy as np
import pytest

import rlfleet.env.registry as env_registry
import rlfleet.models.catalog as catalog
import rlfleet.models.preprocessors as preprocessors
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.models.catalog import ModelCatalog
from rlfleet.models.distributions import Categorical
from rlfleet.models.preprocessors import Preprocessor
from rlfleet.rollout.name_registries import NameRegistries
from tests.tiny_models import TwoLayerModel


class NamedModel(TwoLayerModel):
    """A custom model registered by name only."""


class NamedCategorical(Categorical):
    """A custom action distribution registered by name only."""


class Doubled(Preprocessor):
    """A custom preprocessor registered by name only: obs -> [obs, obs]."""

    def _init_shape(self, space, options):
        return (2 * space.shape[0],)

    def transform(self, obs):
        obs = np.asarray(obs, np.float32)
        return np.concatenate([obs, obs])


def _register_all() -> None:
    ModelCatalog.register_custom_model("named_model", NamedModel)
    ModelCatalog.register_custom_action_dist("named_categorical", NamedCategorical)
    ModelCatalog.register_custom_preprocessor("doubled", Doubled)


NAMED = {"custom_model": "named_model", "custom_model_config": {"width": 12},
         "custom_action_dist": "named_categorical", "custom_preprocessor": "doubled"}


def test_capture_then_install_restores_every_table(monkeypatch):
    _register_all()
    names = NameRegistries.capture()
    assert names.models["named_model"] is NamedModel
    assert names.action_dists["named_categorical"] is NamedCategorical
    assert names.preprocessors["doubled"] is Doubled
    # A fresh process: empty tables.
    monkeypatch.setattr(env_registry, "_ENV_REGISTRY", {})
    monkeypatch.setattr(catalog, "_CUSTOM_MODELS", {})
    monkeypatch.setattr(catalog, "_CUSTOM_ACTION_DISTS", {})
    monkeypatch.setattr(preprocessors, "_CUSTOM_PREPROCESSORS", {})
    env_registry.register_env("named_env", lambda ctx: None)
    NameRegistries(envs={"named_env": NamedModel}, models=names.models, action_dists=names.action_dists,
                   preprocessors=names.preprocessors).install()
    assert catalog.registered_custom_models()["named_model"] is NamedModel
    assert catalog.registered_custom_action_dists()["named_categorical"] is NamedCategorical
    assert preprocessors.registered_custom_preprocessors()["doubled"] is Doubled
    assert env_registry.registered_env_creators()["named_env"] is NamedModel  # the driver's wins


def _registered_here(worker) -> tuple:
    """What a worker's process has registered, and the classes its policy was built from."""
    policy = worker.policy_map["default_policy"]
    return (sorted(catalog.registered_custom_models()), sorted(catalog.registered_custom_action_dists()),
            sorted(preprocessors.registered_custom_preprocessors()), type(policy.model).__name__,
            policy.dist_class.__name__, policy.observation_space.shape)


def test_names_registered_on_the_driver_resolve_in_two_remote_workers(ray_session, tmp_path):
    _register_all()
    trainer = PPOTrainer(env="CartPole-v1", logdir=str(tmp_path), config={
        "seed": 0, "num_workers": 2, "train_batch_size": 100, "rollout_fragment_length": 50,
        "sgd_minibatch_size": 50, "num_sgd_iter": 1, "model": NAMED})
    try:
        result = trainer.train()
        assert result["timesteps_total"] == 100 and result["num_healthy_workers"] == 2
        remote = trainer.workers.foreach_worker(_registered_here)[1:]
        assert len(remote) == 2
        for models, dists, preps, model_cls, dist_cls, obs_shape in remote:
            assert "named_model" in models and "named_categorical" in dists and "doubled" in preps
            assert (model_cls, dist_cls, obs_shape) == ("NamedModel", "NamedCategorical", (8,))
    finally:
        trainer.stop()


def test_names_registered_on_the_driver_resolve_in_a_tune_trial(ray_session, tmp_path):
    pytest.importorskip("ray.tune")
    from ray import tune

    import rlfleet.tune

    _register_all()
    config = {"env": "CartPole-v1", "seed": 0, "num_workers": 1, "num_cpus_per_worker": 0.5,
              "train_batch_size": 100, "rollout_fragment_length": 100, "sgd_minibatch_size": 50,
              "num_sgd_iter": 1, "model": NAMED}
    run = tune.run(rlfleet.tune.trainable("PPO"), config=config, stop={"training_iteration": 1},
                   storage_path=str(tmp_path), verbose=0)
    (trial,) = run.trials
    assert trial.status == "TERMINATED", trial.error_file and open(trial.error_file).read()
    assert trial.last_result["timesteps_total"] == 100
