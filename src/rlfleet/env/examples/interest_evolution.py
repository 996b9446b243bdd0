"""A slate recommendation env in the spirit of RecSim's interest evolution (Ie et al. 2019,
"RecSim: A Configurable Simulation Platform for Recommender Systems", arXiv:1909.04847),
written with NumPy alone (RecSim itself needs TensorFlow).

Each step the recommender sees the user and `num_candidates` fresh candidate documents and
shows a slate of `slate_size` distinct ones. The user picks at most one:

| piece            | rule                                                                      |
|------------------|---------------------------------------------------------------------------|
| user             | interests `u` in [-1, 1]^num_topics (uniform at reset), a session budget   |
| document         | one topic `k` (uniform), a quality `q` in [-1, 1] (uniform)               |
| click score      | `s = interest_weight * u[k] - clickbait_appeal * q` (low quality = sensational headline) |
| choice model     | conditional logit: P(doc i) = exp(s_i) / (exp(no_click_score) + sum_j exp(s_j)) over the slate; the rest is no click |
| reward           | engagement: `doc_length` (time watched) on a click, 0 otherwise             |
| budget           | every step costs `step_cost`; a click adds `quality_bonus * q` (quality extends the session, clickbait cuts it short) |
| interest         | a click moves `u[k]` by `interest_step * q` (clipped to [-1, 1])           |
| end              | terminated when the budget runs out; truncated after `max_steps`          |

So the slate with the most immediate engagement (the most clickable documents) is not the one
with the most engagement over a session: clickbait ends sessions early and sours interests.

Observation (a Dict, as RecSim's): `user`: the interests and the remaining budget as a
fraction of the initial one; `doc`: `[num_candidates, num_topics + 1]`, each row the topic
one-hot then the quality; `response`: `[slate_size, 2]`, for the previous slate's positions
`(clicked, engagement)` (zeros at reset). RecSim gives `doc` as a Dict of documents keyed by id
and `response` as a tuple of Dicts, and hides the user's state; here arrays keep the layout
fixed, and the user's interests and budget are observed so that a learner can tell states apart.

Action: `MultiDiscrete([num_candidates] * slate_size)`, the candidates' indices; they must be
distinct.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

DEFAULTS: Dict[str, Any] = {
    "num_topics": 5,
    "num_candidates": 10,
    "slate_size": 2,
    "budget": 10.0,
    "step_cost": 1.0,
    "quality_bonus": 1.0,
    "doc_length": 1.0,
    "interest_weight": 2.0,
    "clickbait_appeal": 1.0,
    "no_click_score": 0.5,
    "interest_step": 0.2,
    "max_steps": 60,
}


class InterestEvolutionEnv(gym.Env):
    """The env of the module docstring; `config` overrides `DEFAULTS` (unknown keys raise).

    Args:
        config: an env config (a dict or `EnvContext`); `seed` seeds the user and documents.
    """

    metadata: Dict[str, Any] = {}

    def __init__(self, config: Optional[Dict[str, Any]] = None):
        config = dict(config or {})
        seed = config.pop("seed", None)
        unknown = sorted(set(config) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"InterestEvolutionEnv: unknown env_config key(s) {unknown}; known: {sorted(DEFAULTS)}")
        cfg = dict(DEFAULTS, **config)
        self.num_topics, self.num_candidates = int(cfg["num_topics"]), int(cfg["num_candidates"])
        self.slate_size = int(cfg["slate_size"])
        if not 1 <= self.slate_size <= self.num_candidates:
            raise ValueError(f"InterestEvolutionEnv: slate_size ({self.slate_size}) must be between 1 and "
                             f"num_candidates ({self.num_candidates})")
        if float(cfg["budget"]) <= 0 or float(cfg["step_cost"]) <= 0:
            raise ValueError("InterestEvolutionEnv: 'budget' and 'step_cost' must be > 0 (sessions must end)")
        self.cfg = cfg
        self.observation_space = gym.spaces.Dict({
            "user": gym.spaces.Box(-1.0, np.inf, (self.num_topics + 1,), np.float32),
            "doc": gym.spaces.Box(-1.0, 1.0, (self.num_candidates, self.num_topics + 1), np.float32),
            "response": gym.spaces.Box(0.0, np.inf, (self.slate_size, 2), np.float32),
        })
        self.action_space = gym.spaces.MultiDiscrete([self.num_candidates] * self.slate_size)
        if seed is not None:  # Gymnasium's generator (self.np_random), seeded as reset(seed=...) seeds it
            super().reset(seed=seed)
        self.interests = np.zeros(self.num_topics)
        self.budget, self.t = 0.0, 0
        self.topics = np.zeros(self.num_candidates, np.int64)
        self.quality = np.zeros(self.num_candidates)

    # --- the user's model --------------------------------------------------------------
    def click_scores(self) -> np.ndarray:
        """`[num_candidates]` conditional-logit scores of the current candidates."""
        return (self.cfg["interest_weight"] * self.interests[self.topics]
                - self.cfg["clickbait_appeal"] * self.quality)

    def choice_probabilities(self, slate) -> np.ndarray:
        """`[len(slate) + 1]`: P(click on each slate position), then P(no click)."""
        scores = np.append(self.click_scores()[np.asarray(slate)], self.cfg["no_click_score"])
        weights = np.exp(scores - scores.max())
        return weights / weights.sum()

    def greedy_slate(self) -> np.ndarray:
        """The slate with the most expected immediate engagement under the true choice model
        (an oracle myopic recommender: exact, by enumerating every set of `slate_size`)."""
        best, best_value = None, -np.inf
        for slate in itertools.combinations(range(self.num_candidates), self.slate_size):
            value = self.choice_probabilities(slate)[:-1].sum() * self.cfg["doc_length"]
            if value > best_value:
                best, best_value = slate, value
        return np.asarray(best, np.int64)

    # --- gym API -----------------------------------------------------------------------
    def _new_candidates(self) -> None:
        self.topics = self.np_random.integers(self.num_topics, size=self.num_candidates)
        self.quality = self.np_random.uniform(-1.0, 1.0, self.num_candidates)

    def _obs(self, response: np.ndarray) -> Dict[str, np.ndarray]:
        user = np.append(self.interests, self.budget / self.cfg["budget"]).astype(np.float32)
        doc = np.zeros((self.num_candidates, self.num_topics + 1), np.float32)
        doc[np.arange(self.num_candidates), self.topics] = 1.0
        doc[:, -1] = self.quality
        return {"user": user, "doc": doc, "response": response.astype(np.float32)}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.interests = self.np_random.uniform(-1.0, 1.0, self.num_topics)
        self.budget, self.t = float(self.cfg["budget"]), 0
        self._new_candidates()
        return self._obs(np.zeros((self.slate_size, 2))), {}

    def step(self, action) -> Tuple[Dict[str, np.ndarray], float, bool, bool, Dict[str, Any]]:
        slate = np.asarray(action, np.int64).reshape(-1)
        if slate.shape != (self.slate_size,) or slate.min() < 0 or slate.max() >= self.num_candidates:
            raise ValueError(f"InterestEvolutionEnv: a slate is {self.slate_size} candidate indices in "
                             f"[0, {self.num_candidates}), got {action!r}")
        if len(set(slate.tolist())) != self.slate_size:
            raise ValueError(f"InterestEvolutionEnv: the slate {slate.tolist()} repeats a document; show "
                             f"{self.slate_size} distinct candidates")
        probs = self.choice_probabilities(slate)
        choice = int(self.np_random.choice(self.slate_size + 1, p=probs))
        response = np.zeros((self.slate_size, 2))
        reward = 0.0
        self.budget -= self.cfg["step_cost"]
        if choice < self.slate_size:
            doc = slate[choice]
            q, k = float(self.quality[doc]), int(self.topics[doc])
            reward = float(self.cfg["doc_length"])
            response[choice] = (1.0, reward)
            self.budget += self.cfg["quality_bonus"] * q
            self.interests[k] = np.clip(self.interests[k] + self.cfg["interest_step"] * q, -1.0, 1.0)
        self.t += 1
        terminated = self.budget <= 0
        truncated = not terminated and self.t >= int(self.cfg["max_steps"])
        self._new_candidates()
        info = {"clicked": choice if choice < self.slate_size else -1}
        return self._obs(response), reward, bool(terminated), bool(truncated), info


def play_sessions(policy: Callable[[InterestEvolutionEnv, Dict[str, np.ndarray]], Any], env_config: Dict[str, Any],
                  first_seed: int, episodes: int) -> Tuple[np.ndarray, np.ndarray]:
    """Plays `episodes` sessions, session i from `reset(seed=first_seed + i)` (so two policies
    played with one `first_seed` meet the same users and first candidates).

    Args:
        policy: `(env, observation) -> slate`; the env is passed so that an oracle such as
            `env.greedy_slate()` can read the true user model.
        env_config: the env's config (without `seed`).
        first_seed, episodes: which sessions.

    Returns:
        `(engagement [episodes], session lengths [episodes])`.
    """
    env = InterestEvolutionEnv(dict(env_config))
    returns, lengths = np.zeros(episodes), np.zeros(episodes, np.int64)
    for i in range(episodes):
        obs, _ = env.reset(seed=first_seed + i)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(env, obs))
            returns[i] += reward
            lengths[i] += 1
            done = terminated or truncated
    return returns, lengths
