"""An exploration written against `rlfleet.exploration.Exploration` alone, defined here and
nowhere else, runs on PPO and DQN, with the local worker sampling (`num_workers: 0`) and
with one remote Ray worker; every hook it overrides really runs (its counts come back through
the learner stats and the policy's weights). Also: the base's defaults and `overrides`."""
from __future__ import annotations

from typing import Any, Dict

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlfleet.algorithms.dqn import DQNTrainer
from rlfleet.algorithms.ppo import PPOTrainer
from rlfleet.exploration import Exploration
from rlfleet.exploration.base import HOOKS
from rlfleet.exploration.epsilon_greedy import EpsilonGreedy
from rlfleet.exploration.parameter_noise import ParameterNoise
from rlfleet.exploration.stochastic_sampling import StochasticSampling, make_exploration, resolve_exploration_class
from rlfleet.models.distributions import Categorical

COUNTS = ("actions", "forwards", "episodes", "trajectories", "postprocessed_rows", "learn_calls", "learned_rows",
          "weight_loads")


class CountingExploration(Exploration):
    """Acts as the base class does (a sample of the distribution) and counts each hook call.

    Its counts travel as its "weights" (`exploration.counts` among the policy's), so that a
    remote worker's counts can be read from the driver; loading weights (the driver's weight
    sync) is counted instead of overwriting them.
    """

    def __init__(self, action_space: gym.Space, *, bonus: float = 0.0, policy_config: Any = None, **context: Any):
        super().__init__(action_space)
        self.bonus = float(bonus)
        self.counts = dict.fromkeys(COUNTS, 0)

    def get_exploration_action(self, dist, explore, timestep, generator=None):
        self.counts["actions"] += 1
        return super().get_exploration_action(dist, explore, timestep, generator)

    def forward_for_acting(self, model, input_dict, state, explore, timestep):
        self.counts["forwards"] += 1
        return super().forward_for_acting(model, input_dict, state, explore, timestep)

    def on_episode_start(self) -> None:
        self.counts["episodes"] += 1

    def postprocess_trajectory(self, policy, batch):
        self.counts["trajectories"] += 1
        self.counts["postprocessed_rows"] += batch.count
        batch["rewards"] = batch["rewards"] + np.float32(self.bonus)
        return batch

    def on_learn_on_batch(self, policy, batch) -> None:
        self.counts["learn_calls"] += 1
        self.counts["learned_rows"] += batch.count

    def get_info(self) -> Dict[str, float]:
        return {f"counting_{name}": float(n) for name, n in self.counts.items()}

    def get_weights(self) -> Dict[str, np.ndarray]:
        return {"counts": np.array([self.counts[name] for name in COUNTS], np.int64)}

    def set_weights(self, weights: Dict[str, np.ndarray]) -> None:
        self.counts["weight_loads"] += 1

    def get_state(self) -> Dict[str, Any]:
        return {**super().get_state(), "counts": dict(self.counts)}

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        self.counts.update(state.get("counts", {}))


SETUPS = {
    "PPO": (PPOTrainer, {"rollout_fragment_length": 32, "train_batch_size": 64, "sgd_minibatch_size": 32,
                         "num_sgd_iter": 2, "model": {"fcnet_hiddens": [16]}}),
    "DQN": (DQNTrainer, {"learning_starts": 16, "train_batch_size": 16, "timesteps_per_iteration": 64,
                         "rollout_fragment_length": 16, "min_iter_time_s": 0, "model": {"fcnet_hiddens": [16]},
                         "hiddens": [16]}),
}


def _counts(weights: Dict[str, np.ndarray]) -> Dict[str, int]:
    return dict(zip(COUNTS, (int(n) for n in weights["exploration.counts"])))


def _train(algo: str, num_workers: int):
    trainer_cls, config = SETUPS[algo]
    trainer = trainer_cls(env="CartPole-v1", config={
        **config, "seed": 0, "num_workers": num_workers,
        "exploration_config": {"type": CountingExploration, "bonus": 0.5}})
    try:
        result = trainer.train()
        local = _counts(trainer.get_policy().get_weights())
        samplers = trainer.workers.foreach_worker(lambda w: w.get_policy().get_weights())
        return result, local, [_counts(w) for w in samplers[1:]], trainer.get_policy()
    finally:
        trainer.stop()


def _check_sampled(counts: Dict[str, int], algo: str) -> None:
    assert counts["episodes"] >= 1, counts  # on_episode_start, from the sampler
    assert counts["trajectories"] >= 1 and counts["postprocessed_rows"] >= 16, counts
    # Acting went through the exploration (torch path: it is not StochasticSampling) ...
    assert counts["actions"] >= 1 and counts["forwards"] == counts["actions"], counts


def _check_learned(result: Dict[str, Any], local: Dict[str, int]) -> None:
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    # get_info reached the learner stats, counting the learner's on_learn_on_batch calls.
    assert stats["counting_learn_calls"] >= 1 and stats["counting_learned_rows"] >= 16, stats
    assert local["learn_calls"] >= 1


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_an_exploration_on_the_base_class_runs_locally(algo):
    result, local, remote, policy = _train(algo, num_workers=0)
    assert remote == []
    _check_sampled(local, algo)
    _check_learned(result, local)
    assert policy.exploration.counts == local  # the counts its weights carried are its own


@pytest.mark.parametrize("algo", ["PPO", "DQN"])
def test_an_exploration_on_the_base_class_runs_on_a_remote_worker(algo, ray_session):
    result, local, remote, _ = _train(algo, num_workers=1)
    assert len(remote) == 1
    _check_sampled(remote[0], algo)
    # The remote worker loaded the learner's weights (its exploration's included) at least once.
    assert remote[0]["weight_loads"] >= 1, remote[0]
    _check_learned(result, local)
    # The learner's worker only learns: it sampled nothing itself.
    assert local["episodes"] == 0 and local["trajectories"] == 0, local


def test_postprocess_trajectory_changes_what_the_learner_sees():
    trainer_cls, config = SETUPS["PPO"]
    seen = []

    class Rewards(CountingExploration):
        def on_learn_on_batch(self, policy, batch) -> None:
            seen.append(np.unique(batch["rewards"]))

    trainer = trainer_cls(env="CartPole-v1", config={**config, "seed": 0,
                                                     "exploration_config": {"type": Rewards, "bonus": 0.5}})
    try:
        trainer.train()
    finally:
        trainer.stop()
    assert seen and all(np.array_equal(u, [1.5]) for u in seen), seen


# --- the base class itself ------------------------------------------------------------------
def test_the_base_defaults_change_nothing():
    space = gym.spaces.Discrete(3)
    base = Exploration(space)
    dist = Categorical(torch.tensor([[0.0, 5.0, 0.0], [3.0, 0.0, 0.0]]))
    greedy, logp = base.get_exploration_action(dist, False, 7)
    assert greedy.tolist() == [1, 0] and logp.tolist() == [0.0, 0.0] and base.last_timestep == 7
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    sampled, logp = base.get_exploration_action(dist, True, 8, g1)
    expected = dist.sample(g2)
    assert sampled.tolist() == expected.tolist()
    torch.testing.assert_close(logp, dist.logp(expected))
    batch = {"rewards": np.ones(3, np.float32)}
    assert base.postprocess_trajectory(None, batch) is batch
    assert base.on_learn_on_batch(None, batch) is None and base.on_episode_start() is None
    assert base.get_info() == {} and base.get_weights() == {} and base.acting_exploration is base
    base.set_weights({"anything": np.zeros(1)})  # nothing of its own to load
    restored = Exploration(space)
    restored.set_state(base.get_state())
    assert restored.last_timestep == 8


def test_overrides_tells_which_hooks_a_class_replaces():
    assert not any(Exploration.overrides(hook) for hook in HOOKS)
    assert StochasticSampling.overrides("get_exploration_action")
    assert not StochasticSampling.overrides("on_episode_start")
    assert ParameterNoise.overrides("on_episode_start") and ParameterNoise.overrides("forward_for_acting")
    assert CountingExploration.overrides("postprocess_trajectory") and not EpsilonGreedy.overrides("get_weights")
    counting = CountingExploration(gym.spaces.Discrete(2))
    assert counting.bound_hook("on_episode_start") == counting.on_episode_start
    assert EpsilonGreedy(gym.spaces.Discrete(2)).bound_hook("on_episode_start") is None
    with pytest.raises(ValueError, match="not an Exploration hook"):
        Exploration.overrides("on_episode_stat")


def test_every_registered_exploration_subclasses_the_base():
    from rlfleet.exploration.stochastic_sampling import _explorations

    for name, cls in _explorations().items():
        assert issubclass(cls, Exploration), name


def test_a_class_without_the_base_gets_its_defaults_mixed_in():
    class Greedy:  # written before the base class existed: one hook only
        def __init__(self, action_space, *, x: int = 1):
            self.x = x

        def get_exploration_action(self, dist, explore, timestep, generator=None):
            actions = dist.deterministic_sample()
            return actions, torch.zeros(actions.shape[0])

    cls = resolve_exploration_class(Greedy)
    assert issubclass(cls, Greedy) and issubclass(cls, Exploration)
    assert resolve_exploration_class(Greedy) is cls  # made once
    assert cls.overrides("get_exploration_action") and not cls.overrides("postprocess_trajectory")
    built = make_exploration({"exploration_config": {"type": Greedy, "x": 2}}, gym.spaces.Discrete(2))
    assert isinstance(built, Greedy) and built.x == 2 and built.get_info() == {}


def test_a_class_the_base_cannot_be_mixed_into_is_refused_with_the_fix():
    class Sealed:  # refuses every subclass
        def __init_subclass__(cls, **kwargs):
            raise TypeError("Sealed takes no subclasses")

        def get_exploration_action(self, dist, explore, timestep, generator=None):
            return dist.deterministic_sample(), torch.zeros(1)

    with pytest.raises(ValueError, match=r"Sealed does not subclass rlfleet.exploration.Exploration.*"
                                         r"class Sealed\(Exploration\)"):
        resolve_exploration_class(Sealed)
