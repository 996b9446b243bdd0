"""RLlib 2.x's AlgorithmConfig builder: its keywords are declared keys, every declared key is
reachable, misspelt keywords name the right one, and a 2.x-style chain builds and trains."""
from __future__ import annotations

import importlib
import pickle

import pytest

import rlfleet
from rlfleet.config import KEY_INDEX, RLLIB2_NAMES
from rlfleet.config.builder import AlgorithmConfig, config_class
from rlfleet.config.builder_keywords import ACCEPTED_DEFAULTS, BUILDER_METHODS
from rlfleet.registry import config_class_name, config_classes, get_trainer_class, list_algorithms

ALGORITHMS = list_algorithms()

# Declared common keys no builder method sets, and why.
UNREACHABLE = {
    "tf_session_args": "TensorFlow only; accepted in dicts and ignored",
    "local_tf_session_args": "TensorFlow only; accepted in dicts and ignored",
    "in_evaluation": "set by the trainer on its evaluation workers",
    "_record_env_episodes": "set by `rlfleet evaluate --video` for the episodes it runs",
    "multiagent": "the parent dict: each of its keys is a multi_agent() keyword",
}


def _declared(algo: str) -> set:
    cls = get_trainer_class(algo)
    return set(KEY_INDEX) | {k.name for k in cls._algo_keys}


def _resolved(name: str) -> str:
    # A keyword may set a 2.x name, which the dict config translates (None: it sets nothing).
    return RLLIB2_NAMES[name].key if name in RLLIB2_NAMES else name


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_keyword_sets_a_declared_key(algo):
    builder = config_class(algo)()
    declared = _declared(algo)
    for method in BUILDER_METHODS:
        for keyword, name in builder.keywords(method).items():
            key = _resolved(name)
            assert key is None and name == "num_learners" or key in declared, (algo, method, keyword, name)


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_declared_key_is_reachable_from_a_method(algo):
    builder = config_class(algo)()
    reached = {_resolved(name) for method in BUILDER_METHODS for name in builder.keywords(method).values()}
    top_level_own = {k.name.split(".")[0] for k in get_trainer_class(algo)._algo_keys}
    missing = [key for key in sorted(set(KEY_INDEX) | top_level_own)
               if key not in UNREACHABLE and key not in reached and key.split(".")[0] not in reached
               and not (key.startswith("multiagent.") and key in reached)]
    assert not missing, f"{algo}: no builder method sets {missing}"


@pytest.mark.parametrize("method, keyword, suggestion", [
    ("training", "num_epoch", "did you mean 'num_epochs'"),
    ("training", "lamda_", "did you mean 'lambda_'"),
    ("env_runners", "num_env_runner", "did you mean 'num_env_runners'"),
    ("environment", "env_conf", "did you mean 'env_config'"),
    ("evaluation", "evaluation_intervall", "did you mean 'evaluation_interval'"),
    ("training", "num_env_runners", "it is a keyword of env_runners()"),
])
def test_a_misspelt_keyword_names_the_right_one(method, keyword, suggestion):
    with pytest.raises(TypeError, match=f"PPOConfig.{method}\\(\\) got an unexpected keyword argument "
                                        f"'{keyword}'; {suggestion}"):
        getattr(rlfleet.PPOConfig(), method)(**{keyword: 1})


def test_a_2x_spelling_of_a_key_the_algorithm_lacks_says_so():
    with pytest.raises(TypeError, match="'minibatch_size'; it is RLlib 2.x's name of 'sgd_minibatch_size', which DQN"):
        rlfleet.DQNConfig().training(minibatch_size=32)


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_each_algorithm_has_its_builder_in_its_package_and_in_rlfleet(algo):
    name = config_class_name(algo)
    package = importlib.import_module(config_classes()[name][0])
    cls = getattr(package, name)
    assert cls is getattr(rlfleet, name) is config_class(algo) and name in package.__all__
    assert issubclass(cls, AlgorithmConfig) and cls().algo_name == algo
    assert pickle.loads(pickle.dumps(cls().training(lr=0.5))).to_dict() == {"lr": 0.5}


def test_rllib2_class_spellings():
    from rlfleet.algorithms.impala import IMPALAConfig, ImpalaConfig

    assert IMPALAConfig is ImpalaConfig is rlfleet.IMPALAConfig
    assert rlfleet.ApexDQNConfig().algo_name == "APEX"


def test_methods_chain_and_to_dict_holds_the_1x_keys():
    config = rlfleet.PPOConfig()
    chained = (config.environment("CartPole-v1", env_config={"a": 1}).env_runners(num_env_runners=1)
               .rollouts(num_envs_per_worker=2).training(lambda_=0.9, model={"fcnet_hiddens": [8]})
               .training(model={"vf_share_layers": True}).evaluation(evaluation_num_env_runners=1)
               .resources(num_cpus_for_main_process=2).learners(num_learners=0, num_gpus_per_learner=0)
               .multi_agent(count_steps_by="agent_steps").offline_data(input_="sampler").debugging(seed=3)
               .fault_tolerance(recreate_failed_env_runners=True).reporting(min_time_s_per_iteration=0)
               .checkpointing(export_native_model_files=False).framework("torch")
               .exploration(explore=False).api_stack(enable_rl_module_and_learner=True)
               .env_runners(gym_env_vectorize_mode="ASYNC"))
    assert chained is config
    assert config.to_dict() == {
        "env": "CartPole-v1", "env_config": {"a": 1}, "num_workers": 1, "num_envs_per_worker": 2, "lambda": 0.9,
        "model": {"fcnet_hiddens": [8], "vf_share_layers": True}, "evaluation_num_workers": 1,
        "num_cpus_for_driver": 2, "num_gpus": 0, "multiagent": {"count_steps_by": "agent_steps"},
        "input": "sampler", "seed": 3, "recreate_failed_workers": True, "min_iter_time_s": 0, "framework": "torch",
        "explore": False, "gym_env_vectorize_mode": "ASYNC"}
    config.validate()


def test_dict_round_trip_copy_and_validate():
    config = rlfleet.PPOConfig.from_dict({"num_env_runners": 0, "num_epochs": 3, "lr": 0.01})
    assert config.to_dict() == {"num_workers": 0, "num_sgd_iter": 3, "lr": 0.01}
    other = config.copy().update_from_dict({"model": {"fcnet_hiddens": [4]}})
    assert "model" not in config.to_dict() and other.to_dict()["model"] == {"fcnet_hiddens": [4]}
    both = config.copy().multi_agent(count_steps_by="agent_steps").update_from_dict(
        {"multiagent": {"replay_mode": "lockstep"}})
    assert both.to_dict()["multiagent"] == {"count_steps_by": "agent_steps", "replay_mode": "lockstep"}
    with pytest.raises(ValueError, match="did you mean 'num_sgd_iter'"):
        config.update_from_dict({"num_sgd_iters": 3})
    with pytest.raises(ValueError, match="'lr'"):
        config.training(lr=-1.0).validate()


def test_overrides_is_a_dict_overlay_with_the_1x_keys():
    overlay = rlfleet.PPOConfig.overrides(explore=False, num_envs_per_env_runner=2)
    assert overlay == {"explore": False, "num_envs_per_worker": 2}
    config = rlfleet.PPOConfig().evaluation(evaluation_interval=1, evaluation_config=overlay)
    config.validate()
    with pytest.raises(ValueError, match="evaluation_config.explor'; did you mean 'evaluation_config.explore'"):
        config.evaluation(evaluation_config=rlfleet.PPOConfig.overrides(explor=False)).validate()
    # 2.x's keywords here are its config's attribute names: `input_`, `lambda_`.
    assert rlfleet.BCConfig.overrides(input_="sampler") == {"input": "sampler"}
    assert rlfleet.PPOConfig.overrides(lambda_=0.9) == {"lambda": 0.9}


def test_sac_takes_2x_learning_rates():
    config = rlfleet.SACConfig().training(actor_lr=1e-3, critic_lr=2e-3, alpha_lr=3e-3)
    assert config.to_dict()["optimization"] == {"actor_learning_rate": 1e-3, "critic_learning_rate": 2e-3,
                                                "entropy_learning_rate": 3e-3}
    config.validate()


def test_what_rlfleet_cannot_honour_is_refused_by_name():
    with pytest.raises(ValueError, match="framework\\('tf2'\\): rlfleet runs on torch only; use "
                                         "framework\\('torch'\\)"):
        rlfleet.PPOConfig().framework("tf2")
    with pytest.raises(ValueError, match="'num_learners': 2 cannot be honoured"):
        rlfleet.PPOConfig().learners(num_learners=2)
    with pytest.raises(ValueError, match="export_native_model_files=True.*export_policy_model"):
        rlfleet.PPOConfig().checkpointing(export_native_model_files=True)
    with pytest.raises(ValueError, match="'gym_env_vectorize_mode'"):
        rlfleet.PPOConfig().env_runners(gym_env_vectorize_mode="threads").validate()
    with pytest.raises(TypeError, match="keyword arguments only"):
        rlfleet.PPOConfig().training(0.1)
    assert set(m for m, _ in ACCEPTED_DEFAULTS) <= set(BUILDER_METHODS)


def test_a_ppo_chain_trains_and_stores_the_1x_keys(tmp_path):
    from rlfleet.algorithms.ppo import PPOConfig

    trainer = (PPOConfig().environment("CartPole-v1").env_runners(num_env_runners=0, num_envs_per_env_runner=4)
               .training(lr=3e-4, num_epochs=2, minibatch_size=64, train_batch_size=512)
               .build(logdir=str(tmp_path)))
    try:
        for _ in range(2):
            result = trainer.train()
        assert result["timesteps_total"] >= 1024
        assert (trainer.config["num_workers"], trainer.config["num_envs_per_worker"]) == (0, 4)
        assert (trainer.config["num_sgd_iter"], trainer.config["sgd_minibatch_size"]) == (2, 64)
        stored = trainer.user_config()  # what a checkpoint keeps
        assert stored["num_envs_per_worker"] == 4 and stored["num_sgd_iter"] == 2
        assert not set(RLLIB2_NAMES) & (set(stored) | set(trainer.config))
    finally:
        trainer.stop()


def test_a_dqn_builder_builds_and_trains(tmp_path):
    from rlfleet.algorithms.dqn import DQNConfig

    trainer = (DQNConfig().environment("CartPole-v1")
               .training(num_steps_sampled_before_learning_starts=64, train_batch_size=32,
                         model={"fcnet_hiddens": [16]})
               .reporting(min_sample_timesteps_per_iteration=128).debugging(seed=1)
               .build_algo(logdir=str(tmp_path)))
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 128 and trainer.config["learning_starts"] == 64
    finally:
        trainer.stop()


def test_rl_module_model_config_sets_the_model_dict_and_an_rl_module_spec_is_refused_with_the_fix():
    import dataclasses

    from rlfleet.algorithms.ppo import PPOConfig

    @dataclasses.dataclass
    class DefaultModelConfig:  # the shape of RLlib 2.x's dataclass
        fcnet_hiddens: list = dataclasses.field(default_factory=lambda: [32, 32])
        fcnet_activation: str = "tanh"

    config = PPOConfig().rl_module(model_config=DefaultModelConfig())
    assert config.to_dict()["model"] == {"fcnet_hiddens": [32, 32], "fcnet_activation": "tanh"}
    assert PPOConfig().rl_module(model_config_dict={"fcnet_hiddens": [8]}).to_dict()["model"] == {"fcnet_hiddens": [8]}
    PPOConfig().rl_module(rl_module_spec=None)  # changes nothing: accepted
    with pytest.raises(ValueError, match="register_custom_model"):
        PPOConfig().rl_module(rl_module_spec=object())
    with pytest.raises(ValueError, match="PolicySpec"):
        PPOConfig().rl_module(algorithm_config_overrides_per_module={"p0": {"lr": 1e-3}})


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_every_declared_key_and_2x_name_reads_as_an_attribute(algo):
    """A 2.x script reads `config.lr`, `config.num_env_runners`, `config.minibatch_size`: every
    declared top-level key, every 2.x name and every builder keyword reads the default the
    trainer would get."""
    builder = config_class(algo)()
    defaults = get_trainer_class(algo)._default_config
    names = builder.attribute_names()
    methods = set(dir(AlgorithmConfig))  # `callbacks` and `framework` are methods: callbacks_class, framework_str
    assert set(defaults) - methods <= set(names) and set(RLLIB2_NAMES) <= set(names)
    assert {kw for method in BUILDER_METHODS for kw in builder.keywords(method)} - methods <= set(names)
    assert names["callbacks_class"] == "callbacks" and names["framework_str"] == "framework"
    for name, path in names.items():
        if path is None or path.split(".")[0] not in defaults:
            with pytest.raises(AttributeError, match=name):
                getattr(builder, name)
            continue
        expected = defaults[path.split(".")[0]]
        for part in path.split(".")[1:]:
            expected = expected[part]
        assert getattr(builder, name) == expected, (algo, name, path)


def test_attributes_read_what_was_set_and_an_unknown_name_says_did_you_mean():
    from rlfleet.algorithms.ppo import PPOConfig

    config = (PPOConfig().environment("CartPole-v1", env_config={"a": 1})
              .env_runners(num_env_runners=2, num_envs_per_env_runner=4)
              .training(lr=1e-3, train_batch_size=512, minibatch_size=64, num_epochs=3, lambda_=0.9,
                        model={"fcnet_hiddens": [8]})
              .evaluation(evaluation_num_env_runners=1).offline_data(input_="sampler"))
    assert (config.lr, config.train_batch_size, config.env, config.env_config) == (1e-3, 512, "CartPole-v1", {"a": 1})
    assert config.num_env_runners == config.num_workers == config.num_rollout_workers == 2
    assert config.num_envs_per_env_runner == config.num_envs_per_worker == 4
    assert (config.minibatch_size, config.sgd_minibatch_size, config.num_epochs, config.num_sgd_iter) == (64, 64, 3, 3)
    assert (config.lambda_, config.evaluation_num_env_runners, config.input_) == (0.9, 1, "sampler")
    # A dict key reads as the trainer merges it: the default dict updated with what was set.
    model = config.model
    assert model["fcnet_hiddens"] == [8] and model["fcnet_activation"] == PPOConfig().model["fcnet_activation"]
    model["fcnet_hiddens"].append(1)  # a copy: the builder is unchanged
    assert config.to_dict()["model"] == {"fcnet_hiddens": [8]}
    for name, suggestion in [("lrr", "'lr'"), ("num_env_runner", "'num_env_runners'"),
                             ("minibatchsize", "'minibatch_size'")]:
        with pytest.raises(AttributeError, match=f"no attribute or setting '{name}'; did you mean {suggestion}"):
            getattr(config, name)
    with pytest.raises(AttributeError, match="num_sgd_iter', which DQN does not have"):
        rlfleet.DQNConfig().num_epochs
    assert not hasattr(config, "no_such_setting")
    assert pickle.loads(pickle.dumps(config)).lr == 1e-3 and config.copy().num_env_runners == 2


def test_2x_names_in_a_policy_specs_config_overlay_set_the_1x_keys(tmp_path):
    from rlfleet.algorithms.ppo import PPOConfig
    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
    from rlfleet.policy.policy_spec import PolicySpec

    config = (PPOConfig().environment(MultiAgentCartPole, env_config={"num_agents": 2})
              .env_runners(num_env_runners=0, rollout_fragment_length=64)
              .training(train_batch_size=128, minibatch_size=64, num_epochs=1, model={"fcnet_hiddens": [8]})
              .multi_agent(policies={"p0": PolicySpec(config={"num_epochs": 3, "minibatch_size": 32}),
                                     "p1": (None, None, None, PPOConfig.overrides(lambda_=0.5))},
                           policy_mapping_fn=lambda agent_id, episode, **kwargs: f"p{agent_id}"))
    trainer = config.build(logdir=str(tmp_path))
    try:
        p0, p1 = trainer.get_policy("p0").config, trainer.get_policy("p1").config
        assert (p0["num_sgd_iter"], p0["sgd_minibatch_size"], p1["num_sgd_iter"]) == (3, 32, 1)
        assert p1["lambda"] == 0.5 and "num_epochs" not in p0 and "minibatch_size" not in p0
        trainer.train()
    finally:
        trainer.stop()
