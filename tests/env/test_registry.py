"""Env registry: every `env` form, error messages, EnvContext."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import pytest

from rlfleet.env import registry as reg
from rlfleet.env.env_context import EnvContext
from rlfleet.env.registry import register_env, resolve_env
from tests.envs import CountingEnv


@pytest.fixture(autouse=True)
def _clean_registry():
    saved = dict(reg._ENV_REGISTRY)
    yield
    reg._ENV_REGISTRY.clear()
    reg._ENV_REGISTRY.update(saved)


def test_none():
    assert resolve_env(None) == (None, None)


def test_registered_name_wins():
    def creator(ctx):
        return CountingEnv(ctx)

    register_env("my_env", creator)
    assert resolve_env("my_env") == ("my_env", creator)
    # A registered name shadows a Gymnasium id of the same name.
    register_env("CartPole-v1", creator)
    assert resolve_env("CartPole-v1")[1] is creator


def test_register_env_type_errors():
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        register_env(3, lambda c: None)
    with pytest.raises(TypeError, match="env_creator must be callable"):
        register_env("x", "not callable")


def test_gym_id_resolves_without_creating(monkeypatch):
    made = []
    monkeypatch.setattr(gym, "make", lambda *a, **k: made.append(a))
    name, creator = resolve_env("CartPole-v1")
    assert name == "CartPole-v1" and made == []


def test_gym_id_creates_with_env_config():
    name, creator = resolve_env("CartPole-v1")
    env = creator(EnvContext({"max_episode_steps": 7}))
    assert env.spec.id == "CartPole-v1" and env.spec.max_episode_steps == 7
    env.close()
    env = creator(EnvContext({}))
    assert env.observation_space.shape == (4,)
    env.close()


def test_gym_id_rejects_bad_kwargs_naming_env_config():
    _, creator = resolve_env("CartPole-v1")
    with pytest.raises(ValueError, match="env_config") as info:
        creator(EnvContext({"no_such_kwarg": 1}))
    assert "no_such_kwarg" in str(info.value)


@pytest.mark.parametrize("path", ["tests.envs.CountingEnv", "tests.envs:CountingEnv"])
def test_class_path(path):
    name, creator = resolve_env(path)
    assert name == path
    ctx = EnvContext({"episode_len": 3}, worker_index=2, vector_index=1)
    env = creator(ctx)
    assert isinstance(env, CountingEnv) and env.episode_len == 3
    assert env.env_config.worker_index == 2 and env.env_config.vector_index == 1


def test_class_registers_under_its_name():
    name, creator = resolve_env(CountingEnv)
    assert name == "CountingEnv"
    assert "CountingEnv" in reg.registered_envs()
    assert resolve_env("CountingEnv")[1] is creator
    assert isinstance(creator(EnvContext({})), CountingEnv)


def test_creators_pickle():
    for spec in ["CartPole-v1", "tests.envs.CountingEnv", CountingEnv]:
        _, creator = resolve_env(spec)
        restored = pickle.loads(pickle.dumps(creator))
        restored(EnvContext({})).close()


def test_unknown_string_lists_tries_and_suggests():
    register_env("my_custom_env", lambda c: None)
    with pytest.raises(ValueError) as info:
        resolve_env("CartPole-v2")
    msg = str(info.value)
    assert "not a registered env" in msg and "my_custom_env" in msg
    assert "not an importable class path" in msg and "not a Gymnasium id" in msg
    assert "CartPole-v1" in msg

    with pytest.raises(ValueError, match="my_custom_env"):
        resolve_env("my_custom_enb")


def test_missing_module_is_not_a_class_path():
    with pytest.raises(ValueError, match="not an importable class path"):
        resolve_env("no_such_pkg.module.Env")
    with pytest.raises(ValueError, match="not an importable class path"):
        resolve_env("tests.envs.NoSuchEnv")


def test_namespaced_gym_id():
    # Namespaced ids resolve through gym.spec; phys2d ships with Gymnasium.
    ns_ids = [k for k in gym.registry if "/" in k]
    if ns_ids:
        assert resolve_env(ns_ids[0])[0] == ns_ids[0]
    with pytest.raises(ValueError, match="not a Gymnasium id"):
        resolve_env("NoSuchNamespace/Pong-v5")


@pytest.mark.parametrize("bad", [3, 1.5, ["CartPole-v1"], {"env": "x"}])
def test_bad_type(bad):
    with pytest.raises(ValueError) as info:
        resolve_env(bad)
    assert type(bad).__name__ in str(info.value)
    assert "registered env name" in str(info.value)


# ---------------------------------------------------------------- EnvContext


def test_env_context_attrs_and_dict():
    ctx = EnvContext({"a": 1}, worker_index=3, vector_index=2, remote=True, num_workers=4)
    assert ctx["a"] == 1 and dict(ctx) == {"a": 1}
    assert (ctx.worker_index, ctx.vector_index, ctx.remote, ctx.num_workers) == (3, 2, True, 4)
    default = EnvContext({})
    assert (default.worker_index, default.vector_index, default.remote) == (0, 0, False)
    assert default.num_workers is None
    assert EnvContext(None) == {}


def test_env_context_rejects_non_mapping():
    with pytest.raises(TypeError, match="env_config"):
        EnvContext([1, 2])


def test_env_context_copy_with_overrides():
    ctx = EnvContext({"a": 1}, worker_index=1, num_workers=2)
    c2 = ctx.copy_with_overrides(vector_index=5)
    assert isinstance(c2, EnvContext) and c2 == {"a": 1}
    assert (c2.worker_index, c2.vector_index, c2.num_workers) == (1, 5, 2)
    c3 = ctx.copy_with_overrides(env_config={"b": 2}, worker_index=0, remote=True)
    assert c3 == {"b": 2} and c3.worker_index == 0 and c3.remote is True
    c2["a"] = 9
    assert ctx["a"] == 1  # the copy does not share the dict


@pytest.mark.parametrize("clone", [
    lambda c: pickle.loads(pickle.dumps(c)),
    lambda c: pickle.loads(pickle.dumps(c, protocol=2)),
    copy.deepcopy,
    copy.copy,
])
def test_env_context_survives_pickle_and_copy(clone):
    ctx = EnvContext({"nested": {"x": [1, 2]}}, worker_index=2, vector_index=3, remote=True,
                     num_workers=5)
    out = clone(ctx)
    assert isinstance(out, EnvContext) and out == ctx
    assert (out.worker_index, out.vector_index, out.remote, out.num_workers) == (2, 3, True, 5)


def test_env_context_deepcopy_is_deep():
    ctx = EnvContext({"nested": {"x": [1]}})
    out = copy.deepcopy(ctx)
    out["nested"]["x"].append(2)
    assert ctx["nested"]["x"] == [1]
