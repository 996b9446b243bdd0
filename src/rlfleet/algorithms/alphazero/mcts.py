"""Monte Carlo tree search guided by a policy-value network (Silver et al. 2018, Science 362:1140,
"A general reinforcement learning algorithm that masters chess, shogi, and Go through self-play").

Each tree is a set of preallocated NumPy arrays, one row per node and one column per action:
visit counts `N`, summed values `W`, priors `P`, the gain `R` of each move, the child's row
(-1: not expanded) and whether the child's mover is the opponent (`flip`). One simulation
walks from the root by PUCT,

    a = argmax over legal a of  Q(s, a) + c_puct * P(s, a) * sqrt(max(1, sum_b N(s, b))) / (1 + N(s, a)),
    Q(s, a) = W(s, a) / N(s, a)  (0 while unvisited),

tries the first unexpanded move on a copy of the env (`SearchGame.step_from`), asks the network
for the new position's priors and value, and backs the value up: each edge adds
`R(s, a) + v'` where `v'` is the child's value seen by the edge's mover (negated when the
opponent moves next). Values are from the point of view of the player to move.

`search` runs the simulations of many trees in lockstep (one per parallel game), so every
simulation costs one batched network call for all of them: per-node work is vectorised over
actions, per-simulation work over trees.

With ranked rewards (`ranked_threshold`, single-player only) a move's gain is 0 until the
episode ends, where it is the ranked reward of the episode's return (+1 above the threshold,
-1 below, a fair coin on a tie; arXiv:1807.01672), so the tree values what the value net learns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, List, Optional, Sequence, Tuple

import numpy as np

from rlfleet.algorithms.alphazero.game import SearchGame, legal_mask

# obs list -> (priors [B, A] (softmax of the logits, before masking), values [B])
Evaluate = Callable[[List[Any]], Tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SearchSettings:
    """The `mcts_config` keys, read once (see the trainer's docs for each)."""

    num_simulations: int = 30
    puct_coefficient: float = 1.0
    dirichlet_epsilon: float = 0.25
    dirichlet_noise: float = 0.03
    add_dirichlet_noise: bool = True
    argmax_tree_policy: bool = False
    temperature: float = 1.5

    @classmethod
    def from_config(cls, mcts_config: dict, **overrides: Any) -> "SearchSettings":
        values = {name: mcts_config[name] for name in cls.__dataclass_fields__ if name in mcts_config}
        values.update(overrides)
        return cls(**values)


def ranked(value: float, threshold: float, rng: np.random.Generator) -> float:
    """The ranked reward of a return against the buffer's threshold: +1, -1, a coin on a tie."""
    if value > threshold:
        return 1.0
    if value < threshold:
        return -1.0
    return float(rng.choice((-1.0, 1.0)))


class Tree:
    """One search tree in preallocated arrays (see the module doc)."""

    def __init__(self, capacity: int, num_actions: int):
        shape = (capacity, num_actions)
        self.N = np.zeros(shape, np.float64)
        self.W = np.zeros(shape, np.float64)
        self.P = np.zeros(shape, np.float64)
        self.R = np.zeros(shape, np.float64)
        self.child = np.full(shape, -1, np.int64)
        self.flip = np.zeros(shape, bool)
        self.legal = np.zeros(shape, bool)
        self.state: List[Any] = [None] * capacity
        self.mover: List[Hashable] = [None] * capacity
        self.ret = np.zeros(capacity)  # the episode's return so far at the node (ranked rewards)
        self.terminal = np.zeros(capacity, bool)
        self.size = 0

    def add(self, state: Any, obs: Any, mover: Hashable, ret: float, terminal: bool, num_actions: int) -> int:
        node = self.size
        self.size += 1
        self.state[node], self.mover[node], self.ret[node], self.terminal[node] = state, mover, ret, terminal
        if not terminal:
            self.legal[node] = legal_mask(obs, num_actions)
        return node

    def select(self, node: int, c_puct: float) -> int:
        n = self.N[node]
        q = np.divide(self.W[node], n, out=np.zeros_like(n), where=n > 0)
        u = c_puct * self.P[node] * (np.sqrt(max(1.0, n.sum())) / (1.0 + n))
        return int(np.argmax(np.where(self.legal[node], q + u, -np.inf)))

    def set_priors(self, node: int, priors: np.ndarray) -> None:
        p = np.where(self.legal[node], priors, 0.0)
        total = p.sum()
        # A network that gives every legal move ~0 probability: fall back on uniform.
        self.P[node] = p / total if total > 1e-12 else self.legal[node] / self.legal[node].sum()

    def backup(self, path: Sequence[Tuple[int, int]], value: float) -> None:
        for node, action in reversed(path):
            value = self.R[node, action] + (-value if self.flip[node, action] else value)
            self.W[node, action] += value
            self.N[node, action] += 1.0


def search(games: Sequence[SearchGame], roots: Sequence[Tuple[Any, Any, Hashable, float]], evaluate: Evaluate,
           settings: SearchSettings, rng: np.random.Generator, *, bounded: bool,
           ranked_threshold: Optional[float] = None) -> List[Tree]:
    """Searches from each root `(state, obs, mover, return so far)` in its own game.

    Args:
        bounded: values lie in [-1, 1] (two-player games, ranked rewards): the network's
            values are clipped there.
        ranked_threshold: the ranked-rewards threshold (None: raw rewards).

    Returns:
        The trees (root in row 0); their visit counts `N[0]` are the search's policy.
    """
    num_actions = games[0].num_actions
    trees = [Tree(settings.num_simulations + 1, num_actions) for _ in games]
    for tree, (state, obs, mover, ret) in zip(trees, roots):
        tree.add(state, obs, mover, ret, False, num_actions)
    priors, _ = evaluate([obs for _, obs, _, _ in roots])
    for tree, p in zip(trees, priors):
        tree.set_priors(0, p)
        if settings.add_dirichlet_noise:
            legal = tree.legal[0]
            noise = np.zeros(num_actions)
            noise[legal] = rng.dirichlet(np.full(int(legal.sum()), settings.dirichlet_noise))
            eps = settings.dirichlet_epsilon
            tree.P[0] = (1.0 - eps) * tree.P[0] + eps * noise
    c_puct = float(settings.puct_coefficient)
    for _ in range(settings.num_simulations):
        paths, pending, pending_obs = [], [], []
        for i, (game, tree) in enumerate(zip(games, trees)):
            node, path = 0, []
            while True:
                action = tree.select(node, c_puct)
                path.append((node, action))
                child = tree.child[node, action]
                if child < 0 or tree.terminal[child]:
                    break
                node = child
            if child < 0:  # expand: try the move on the env
                step = game.step_from(tree.state[node], tree.mover[node], action)
                ret = tree.ret[node] + sum(step.rewards.values())
                child = tree.add(step.state, step.obs, step.mover, ret, step.done, num_actions)
                tree.child[node, action] = child
                tree.flip[node, action] = step.mover is not None and step.mover != tree.mover[node]
                if ranked_threshold is None:
                    tree.R[node, action] = step.gain
                else:
                    tree.R[node, action] = ranked(ret, ranked_threshold, rng) if step.done else 0.0
                if not step.done:
                    pending.append(i)
                    pending_obs.append(step.obs)
            paths.append((path, child))
        values = np.zeros(len(trees))  # a finished episode's value: nothing more to gain
        if pending:
            p, v = evaluate(pending_obs)
            v = np.clip(v, -1.0, 1.0) if bounded else v
            for j, i in enumerate(pending):
                trees[i].set_priors(paths[i][1], p[j])
                values[i] = v[j]
        for tree, (path, _), value in zip(trees, paths, values):
            tree.backup(path, float(value))
    return trees


def tree_policy(tree: Tree) -> np.ndarray:
    """The search's policy at the root: its visit counts, normalised (the training target)."""
    n = tree.N[0]
    return n / n.sum()


def choose_action(tree: Tree, settings: SearchSettings, rng: np.random.Generator) -> int:
    """The move to play: the most visited (`argmax_tree_policy`), else drawn from the visit
    counts raised to the power `temperature` (RLlib 1.x's exponent; the paper's 1/tau)."""
    n = tree.N[0]
    if settings.argmax_tree_policy:
        best = np.flatnonzero(n == n.max())
        return int(best[0] if best.size == 1 else rng.choice(best))
    weights = np.power(n / n.max(), settings.temperature)
    return int(rng.choice(n.size, p=weights / weights.sum()))


__all__ = ["SearchSettings", "Tree", "search", "tree_policy", "choose_action", "ranked", "Evaluate"]
