"""Every declared config key, fed junk: a trainer is built or a ValueError names the key.

Values are drawn for every key `rlfleet.config` declares (common and model keys) and for
each algorithm's `ALGO_KEYS`: wrong types, negatives, None, strings, huge and non-finite
numbers, nested junk, and mutations of the key's default (a dict default with one entry
made junk, a list default holding junk). Two layers:

- `test_validation_*`: merge + validate only (no env, no model), many examples: fast.
- `test_building_*`: a real trainer with tiny settings for a subset: what validation lets
  through must build (or fail with a ValueError naming the key at build time).

Never a TypeError, AttributeError or KeyError from inside.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Dict, List, Tuple

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rlfleet.config import KEY_INDEX  # noqa: E402
from rlfleet.registry import get_trainer_class, list_algorithms  # noqa: E402
from rlfleet.utils.nested import set_nested  # noqa: E402

ALGORITHMS = list_algorithms()
CONTINUOUS = {"SAC", "DDPG", "TD3", "CQL", "APEX_DDPG"}
# Keys an algorithm cannot run without (no default exists), set under every draw.
REQUIRED: Dict[str, Dict[str, Any]] = {"DT": {"target_return": 1.0}}
# Algorithms that need an env of their own kind: a grouped env for QMIX (it learns for a group of
# agents), a task family for MAML (sample_tasks / set_task), an env with a reward function for
# MB-MPO (reward(obs, action, next_obs)), an env AlphaZero's search can save and restore
# (get_state / set_state).
GROUPED_ENVS = {"QMIX": "rlfleet.env.examples.team_envs:two_step_team",
                "MAML": "rlfleet.env.examples.point_navigation:PointNavigationEnv",
                "MBMPO": "rlfleet.env.examples.pendulum_with_reward:PendulumWithReward",
                "AlphaZero": "rlfleet.env.examples.sparse_corridor:SparseCorridorEnv"}


def _keys_of(algo: str) -> List[Tuple[str, Any]]:
    """(dotted name, default) of every key the algorithm takes, its own first."""
    cls = get_trainer_class(algo)
    own = {k.name: k.default for k in cls._algo_keys}
    common = {name: k.default for name, k in KEY_INDEX.items() if name not in own}
    return sorted(own.items()) + sorted(common.items())


KEYS = {algo: _keys_of(algo) for algo in ALGORITHMS}

# Atoms of junk: every type a JSON/YAML/Python config might hold by mistake.
ATOMS = st.sampled_from([
    None, True, False, 0, 1, -1, 3, 2, -7, 10 ** 30, -(10 ** 30), 0.5, -0.5, 1e308, -1e308,
    float("nan"), float("inf"), float("-inf"), "", "x", "auto", "None", "1", "relu", "tanh",
    "torch", "CartPole-v1", "a.b:C", b"x", (), (1, 2), (0.9, 0.999), [], [0], [1, -1], [8, 8],
    ["x"], [[1, 2], [3]], {}, {"type": "x"}, {"x": 1}, object(),
])
JUNK = st.recursive(ATOMS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["x", "type", "eps", "betas", "fcnet_hiddens", "capacity", "0"]),
                    inner, max_size=3)), max_leaves=6)


def _value_for(default: Any) -> st.SearchStrategy:
    """Junk, or the key's default with one part made junk."""
    options = [JUNK, st.just(default)]
    if isinstance(default, dict) and default:
        options.append(st.builds(lambda k, v: {**default, k: v}, st.sampled_from(sorted(default)), JUNK))
    if isinstance(default, dict):
        options.append(st.builds(lambda v: {**default, "not_a_key": v}, JUNK))
    if isinstance(default, list):
        options.append(st.builds(lambda v: default + [v], JUNK))
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        options.append(st.sampled_from([-default, default * 10 ** 12, -1, 0]))
    return st.one_of(*options)


# Strategies built once (building them per draw costs more than the validation they feed).
_VALUE_STRATEGIES: Dict[Tuple[str, str], st.SearchStrategy] = {
    (algo, name): _value_for(default) for algo, keys in KEYS.items() for name, default in keys}


def drawn_configs(skip=(), algorithms=ALGORITHMS) -> st.SearchStrategy:
    """(algorithm, {dotted key: value}) with 1-3 keys of that algorithm drawn."""
    def for_algo(algo: str) -> st.SearchStrategy:
        names = [name for name, _ in KEYS[algo] if name not in skip]
        chosen = st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)
        return st.tuples(st.just(algo), chosen.flatmap(lambda ks: st.fixed_dictionaries(
            {k: _VALUE_STRATEGIES[(algo, k)] for k in ks})))

    return st.one_of(*[for_algo(algo) for algo in algorithms])


def _as_config(drawn: Dict[str, Any], base: Dict[str, Any]) -> Dict[str, Any]:
    import copy

    config = copy.deepcopy(base)
    for path, value in drawn.items():
        # A drawn value may be a key's default itself (e.g. the shared MODEL_DEFAULTS dict);
        # a later dotted key of the same draw would write into it and change every later test.
        set_nested(config, path, copy.deepcopy(value))
    return config


def _assert_names_a_key(error: ValueError, drawn: Dict[str, Any]) -> None:
    message = str(error)
    names = set()
    for path in drawn:
        parts = path.split(".")
        names |= {path, parts[0], parts[-1]}
    assert any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", message) for n in names), (
        f"the error does not name any of the keys set {sorted(drawn)}: {message}")


def _validate_only(algo: str, config: Dict[str, Any]) -> None:
    from rlfleet.trainer import Trainer

    cls = get_trainer_class(algo)
    merged = cls.merge_trainer_configs(cls._default_config, config)
    trainer = cls.__new__(cls)  # validation needs the class's keys and rules, not workers
    Trainer._validate_config(merged, trainer_obj_or_none=trainer)


def fuzz(max_examples: int) -> settings:
    # Derandomized: CI draws the same examples every run; no example database on disk.
    return settings(max_examples=max_examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@fuzz(500)
@given(drawn_configs())
def test_validation_accepts_or_names_the_key(drawn):
    algo, values = drawn
    try:
        _validate_only(algo, _as_config(values, dict(REQUIRED.get(algo, {}))))
    except ValueError as e:
        _assert_names_a_key(e, values)


# --- real trainers -----------------------------------------------------------------------
# Keys that start Ray or processes, or make the build itself huge, keep their defaults
# here (validation above still draws them); sizes are small so that a build takes ms.
_NOT_BUILT = {"num_workers", "evaluation_num_workers", "remote_worker_envs", "num_envs_per_worker",
              "extra_python_environs_for_driver", "extra_python_environs_for_worker", "log_level",
              "multiagent.policy_map_cache", "buffer_size", "replay_buffer_config",
              # A Gymnasium env given an unknown env_config entry raises a TypeError naming
              # env_config (env/registry.py); see the report of issue 17.
              "env_config"}
# Algorithms that learn on remote workers only (no trainer with num_workers 0): validation
# above draws their keys; tests/algorithms/test_ddppo.py builds them with Ray.
_REMOTE_ONLY = {"DDPPO"}
_SIZE_KEYS = re.compile(r"hiddens|cell_size|dim$|num_atoms|num_envs|_units|_heads|memory_|noise_size")


def _tiny_base(algo: str) -> Dict[str, Any]:
    # Everything in this process: some algorithms default to remote workers (APEX: 32).
    base: Dict[str, Any] = {**REQUIRED.get(algo, {}), "model": {"fcnet_hiddens": [8]}, "log_sys_usage": False,
                            "num_workers": 0, "evaluation_num_workers": 0}
    if algo in ("SAC",):
        base.update(Q_model={"fcnet_hiddens": [8]}, policy_model={"fcnet_hiddens": [8]})
    if algo in ("DDPG", "TD3", "APEX_DDPG"):
        base.update(actor_hiddens=[8], critic_hiddens=[8])
    if algo in ("DQN", "SimpleQ"):
        base.update(hiddens=[8])
    if algo in ("ES", "ARS"):  # the reference's table is 250M floats (1 GB)
        base.update(noise_size=100_000)
    return base


def _small(value: Any) -> bool:
    """No size over 64 anywhere in the value (a [10**30] layer would not fit in memory)."""
    if isinstance(value, (list, tuple)):
        return all(_small(v) for v in value)
    if isinstance(value, dict):
        return all(_small(v) for v in value.values())
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return abs(value) <= 64
    return True


@fuzz(100)
@given(drawn=drawn_configs(skip=_NOT_BUILT, algorithms=[a for a in ALGORITHMS if a not in _REMOTE_ONLY]))
def test_building_a_trainer_works_or_names_the_key(drawn, tmp_path_factory):
    algo, values = drawn
    values = {k: v for k, v in values.items() if not _SIZE_KEYS.search(k) or _small(v)}
    if not values:
        return
    cls = get_trainer_class(algo)
    env = GROUPED_ENVS.get(algo) or ("Pendulum-v1" if algo in CONTINUOUS else "CartPole-v1")
    config = _as_config(values, _tiny_base(algo))
    environ = dict(os.environ)
    trainer = None
    try:
        trainer = cls(env=config.pop("env", env) or env, config=config,
                      logdir=str(tmp_path_factory.mktemp("fuzz")))
    except ValueError as e:
        _assert_names_a_key(e, values)
    finally:
        if trainer is not None:
            trainer.stop()
        os.environ.clear()
        os.environ.update(environ)


@pytest.mark.parametrize("algo,values,key", [
    ("PPO", {"optimizer": {"betas": "x"}}, "optimizer"),
    ("PPO", {"clip_param": None}, "clip_param"),
    ("PPO", {"lambda": -1}, "lambda"),
    ("SAC", {"Q_model": {"fcnet_hiddens": [0]}}, "Q_model.fcnet_hiddens"),
    ("PPO", {"model": {"conv_filters": [[16, [4, 4], 2]]}}, "conv_filters"),
])
def test_the_issue_examples_name_their_key(algo, values, key, tmp_path):
    cls = get_trainer_class(algo)
    env = "Pendulum-v1" if algo in CONTINUOUS else "CartPole-v1"
    with pytest.raises(ValueError, match=re.escape(key)):
        cls(env=env, config=values, logdir=str(tmp_path))


def test_a_drawn_default_is_never_written_into():
    # A draw may hold a key's shared default (KEY_INDEX["model"].default is MODEL_DEFAULTS)
    # and a dotted key under it; building the config must leave the default as declared.
    default = KEY_INDEX["model"].default
    before = dict(default)
    config = _as_config({"model": default, "model.conv_activation": {"eps": [""]}}, {})
    assert config["model"]["conv_activation"] == {"eps": [""]}
    assert default == before
