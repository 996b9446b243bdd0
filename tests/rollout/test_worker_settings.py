"""Settings read once: `MultiAgentSettings` (the one reader of `config["multiagent"]`) and a
worker that reads each settings object from its config exactly once."""
from __future__ import annotations

import gymnasium as gym
import pytest

from rlfleet.env.episode_rules import EpisodeRules
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.rollout.multi_agent_settings import MultiAgentSettings
from rlfleet.rollout.policy_mapping import wants_multi_agent
from tests.envs import make_worker


def test_defaults_without_a_multiagent_section():
    for config in ({}, {"multiagent": None}, {"multiagent": {}}):
        ma = MultiAgentSettings.from_config(config)
        assert ma == MultiAgentSettings()
        assert not ma.count_agent_steps and not ma.lockstep and not ma.configured
        assert ma.policies == {} and ma.policy_map_capacity == 100


def test_values_are_read_as_given():
    fn = lambda aid, *a, **k: "p"  # noqa: E731
    ma = MultiAgentSettings.from_config({"multiagent": {
        "policies": {"p": PolicySpec()}, "policy_mapping_fn": fn, "policies_to_train": ["p"],
        "count_steps_by": "agent_steps", "replay_mode": "lockstep", "policy_map_capacity": 3,
        "policy_map_cache": "/tmp/x"}})
    assert ma.count_agent_steps and ma.lockstep and ma.configured
    assert (ma.policy_mapping_fn, ma.policies_to_train, ma.policy_map_capacity, ma.policy_map_cache) == (
        fn, ["p"], 3, "/tmp/x")


@pytest.mark.parametrize("multiagent, configured", [
    ({"policies": {"default_policy": PolicySpec()}}, False),
    ({"policies": {"default_policy": PolicySpec(config={"lr": 0.1})}}, True),
    ({"policies": {"default_policy": PolicySpec(), "other": PolicySpec()}}, True),
    ({"policy_mapping_fn": lambda aid, *a, **k: "default_policy"}, True),
    ({"observation_fn": lambda **kw: kw["agent_obs"]}, True),
])
def test_which_configs_take_the_multi_agent_path(multiagent, configured):
    ma = MultiAgentSettings.from_config({"multiagent": multiagent})
    assert ma.configured is configured
    assert wants_multi_agent(None, ma) is configured
    assert wants_multi_agent(None, {"multiagent": multiagent}) is configured  # a config still works
    assert wants_multi_agent(gym.make("CartPole-v1"), ma) is configured


def test_a_worker_reads_each_settings_object_once(monkeypatch):
    calls = {"rules": 0, "multiagent": 0}
    rules_from, ma_from = EpisodeRules.from_config.__func__, MultiAgentSettings.from_config.__func__

    def count(key, original):
        def from_config(cls, config):
            calls[key] += 1
            return original(cls, config)
        return classmethod(from_config)

    monkeypatch.setattr(EpisodeRules, "from_config", count("rules", rules_from))
    monkeypatch.setattr(MultiAgentSettings, "from_config", count("multiagent", ma_from))
    worker = make_worker("CartPole-v1", {"horizon": 7, "multiagent": {"count_steps_by": "agent_steps"}})
    assert calls == {"rules": 1, "multiagent": 1}
    # ... and hands the same objects down: the env, the sampler and the worker agree.
    assert worker.env.rules is worker.rules is worker.sampler.settings.rules
    assert worker.rules.horizon == 7 and worker.sampler.settings.count_agent_steps
    worker.stop()
