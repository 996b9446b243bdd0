"""Self-play: whole episodes on one worker's envs, every move chosen by a tree search.

`self_play_on_worker(worker, request)` runs on a `RolloutWorker` (the trainer's own with
`num_workers: 0`, each remote one otherwise): its sub-envs (`num_envs_per_worker`) play in
lockstep, so each simulation step evaluates one batch of positions for all of them. It plays
until `request.min_steps` moves were made in finished episodes and answers with one row per
move: the mover's observation (preprocessed), the search's visit distribution and the value
label (see `alphazero_policy.py`), plus each finished episode's metrics and raw return.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional

import numpy as np

from rlfleet.algorithms.alphazero.alphazero_policy import MCTS_POLICIES, VALUE_LABEL, network_evaluator
from rlfleet.algorithms.alphazero.game import SearchGame
from rlfleet.algorithms.alphazero.mcts import SearchSettings, choose_action, search, tree_policy
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.episode import RolloutMetrics
from rlfleet.utils.seeding import derive_seed

EPISODE_RETURN = "episode_return"


@dataclass(frozen=True)
class SelfPlayRequest:
    """What the trainer asks of one worker per round."""

    policy_id: str
    settings: SearchSettings
    min_steps: int
    ranked_threshold: Optional[float]  # None: raw rewards (or a two-player game)
    seed: Optional[int]
    round: int
    local_plays: bool  # False with remote workers: then they alone play, as they alone sample elsewhere


@dataclass
class SelfPlayAnswer:
    """One worker's moves and finished episodes."""

    batch: SampleBatch
    episodes: List[RolloutMetrics] = field(default_factory=list)
    returns: List[float] = field(default_factory=list)  # raw episode returns (summed over players)


@dataclass
class _Episode:
    state: Any
    obs: Any
    mover: Hashable
    ret: float = 0.0
    rewards: Dict[Hashable, float] = field(default_factory=dict)
    rows: List[tuple] = field(default_factory=list)  # (flat obs, visit distribution, mover, gain)


def _labels(rows: List[tuple], two_player: bool) -> np.ndarray:
    """Each row's outcome from its mover's point of view: the gains still to come, a gain
    counting against the mover when the opponent made it."""
    labels = np.zeros(len(rows), np.float32)
    for t, (_, _, mover, _) in enumerate(rows):
        labels[t] = sum(gain if (not two_player or m == mover) else -gain for _, _, m, gain in rows[t:])
    return labels


def self_play_on_worker(worker: Any, request: SelfPlayRequest) -> Optional[SelfPlayAnswer]:
    """Plays on `worker`'s sub-envs (see the module doc); None from the trainer's own worker
    when remote workers play (or when a worker has no env)."""
    if worker.worker_index == 0 and not request.local_plays:
        return None
    envs = worker.foreach_env(lambda env: env) if worker.env is not None else []
    if not envs:
        return None
    games = [SearchGame(env) for env in envs]
    policy, preprocessor = worker.get_policy(request.policy_id), worker.preprocessors[request.policy_id]
    evaluate = network_evaluator(policy, preprocessor.transform)
    base = None if request.seed is None else derive_seed(request.seed, worker.worker_index, "alphazero", request.round)
    rng = np.random.default_rng(base)
    two_player = games[0].two_player
    bounded = two_player or request.ranked_threshold is not None
    answer = SelfPlayAnswer(batch=SampleBatch())
    obs_rows: List[np.ndarray] = []
    pi_rows: List[np.ndarray] = []
    labels: List[np.ndarray] = []
    returns_col: List[np.ndarray] = []
    episodes_started = 0

    def start(game: SearchGame) -> _Episode:
        nonlocal episodes_started
        seed = None if base is None else derive_seed(base, "episode", episodes_started)
        episodes_started += 1
        state, obs, mover = game.reset(seed)
        return _Episode(state, obs, mover)

    running = [start(game) for game in games]
    steps = 0
    while steps < request.min_steps:
        trees = search(games, [(e.state, e.obs, e.mover, e.ret) for e in running], evaluate, request.settings, rng,
                       bounded=bounded, ranked_threshold=request.ranked_threshold)
        for i, (game, episode, tree) in enumerate(zip(games, running, trees)):
            action = choose_action(tree, request.settings, rng)
            step = game.step_from(episode.state, episode.mover, action)
            episode.rows.append((preprocessor.transform(episode.obs), tree_policy(tree), episode.mover, step.gain))
            for agent, r in step.rewards.items():
                episode.rewards[agent] = episode.rewards.get(agent, 0.0) + r
            episode.ret += sum(step.rewards.values())
            if not step.done:
                episode.state, episode.obs, episode.mover = step.state, step.obs, step.mover
                continue
            steps += len(episode.rows)
            obs_rows.extend(r[0] for r in episode.rows)
            pi_rows.extend(r[1] for r in episode.rows)
            labels.append(_labels(episode.rows, two_player))
            returns_col.append(np.full(len(episode.rows), episode.ret, np.float32))
            answer.returns.append(episode.ret)
            answer.episodes.append(RolloutMetrics(
                episode_length=len(episode.rows), episode_reward=episode.ret,
                agent_rewards={(a, request.policy_id): r for a, r in episode.rewards.items()} if two_player else {}))
            running[i] = start(game)
    answer.batch = SampleBatch({
        SampleBatch.OBS: np.asarray(obs_rows, np.float32),
        MCTS_POLICIES: np.asarray(pi_rows, np.float32),
        VALUE_LABEL: np.concatenate(labels).astype(np.float32),
        EPISODE_RETURN: np.concatenate(returns_col),
    })
    return answer


__all__ = ["SelfPlayRequest", "SelfPlayAnswer", "self_play_on_worker", "EPISODE_RETURN"]
