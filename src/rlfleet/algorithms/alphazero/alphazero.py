"""AlphaZero's trainer: self-play rounds on the workers, ranked rewards, SGD on a replay window
(the algorithm and its departures from RLlib 1.x are in `AlphaZeroTrainer`'s docstring,
which its docs page shows).
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any, Dict, List, Optional

import numpy as np

from rlfleet.algorithms.alphazero.alphazero_policy import AlphaZeroPolicy, VALUE_LABEL
from rlfleet.algorithms.alphazero.game import SearchGame
from rlfleet.algorithms.alphazero.mcts import SearchSettings, ranked
from rlfleet.algorithms.alphazero.players import GamePlayer, search_player
from rlfleet.algorithms.alphazero.ranked_rewards import RankedRewardBuffer, random_returns
from rlfleet.algorithms.alphazero.replay_window import ReplayWindow
from rlfleet.algorithms.alphazero.self_play import SelfPlayAnswer, SelfPlayRequest, self_play_on_worker
from rlfleet.config import (ConfigKey, algorithm_config, boolean, dict_value, int_at_least, number_above, number_in,
                            override)
from rlfleet.env.env_context import EnvContext
from rlfleet.policy.sample_batch import SampleBatch
from rlfleet.rollout.metrics import EpisodeWindow
from rlfleet.trainer import Trainer
from rlfleet.utils.seeding import derive_seed

logger = logging.getLogger(__name__)
K = ConfigKey

ALGO_KEYS: List[ConfigKey] = [
    # The search (RLlib 1.x's mcts_config defaults).
    K("mcts_config", {}, "The tree search's settings; see mcts_config.*.", dict_value()),
    K("mcts_config.num_simulations", 30, "Simulations of tree search per move.", int_at_least(1)),
    K("mcts_config.puct_coefficient", 1.0, "PUCT's exploration weight c_puct on prior / (1 + visits).",
      number_in(0)),
    K("mcts_config.dirichlet_epsilon", 0.25, "Share of Dirichlet noise mixed into the root's priors.",
      number_in(0, 1)),
    K("mcts_config.dirichlet_noise", 0.03, "Concentration alpha of the root's Dirichlet noise.", number_above(0)),
    K("mcts_config.add_dirichlet_noise", True, "Mix Dirichlet noise into the root's priors (exploration).", boolean),
    K("mcts_config.argmax_tree_policy", False, "Play the most visited move (else draw by visits ** temperature).",
      boolean),
    K("mcts_config.temperature", 1.5, "Exponent on the visit counts when a move is drawn (higher: greedier).",
      number_in(0)),
    # Ranked rewards for single-player tasks.
    K("ranked_rewards", {}, "Ranked rewards (single-player tasks); see ranked_rewards.*.", dict_value()),
    K("ranked_rewards.enable", True, "Rank each single-player episode against recent ones (+1 / -1).", boolean),
    K("ranked_rewards.percentile", 75, "Percentile of the recent returns an episode must beat.", number_in(0, 100)),
    K("ranked_rewards.buffer_max_length", 1000, "Recent episode returns the ranking keeps.", int_at_least(1)),
    K("ranked_rewards.initialize_buffer", True, "Fill the buffer first with returns of a random legal-move player.",
      boolean),
    K("ranked_rewards.num_init_rewards", 100, "Random episodes that fill the buffer first.", int_at_least(1)),
    # Learning.
    override("lr", 5e-5),
    override("train_batch_size", 4000),
    override("rollout_fragment_length", 200),
    override("batch_mode", "complete_episodes"),
    K("sgd_minibatch_size", 128, "Rows per SGD minibatch (<= train_batch_size).", int_at_least(1)),
    K("num_sgd_iter", 30, "Passes of SGD over each train batch.", int_at_least(1)),
    K("shuffle_sequences", True, "Shuffle the train batch before each pass.", boolean),
    K("replay_buffer_size", 10000, "Newest self-play moves (rows) the train batches are drawn from.",
      int_at_least(1)),
    K("vf_loss_coeff", 1.0, "Weight of the value loss beside the policy's cross-entropy.", number_in(0)),
]

DEFAULT_CONFIG = algorithm_config(ALGO_KEYS)


class AlphaZeroTrainer(Trainer):
    """AlphaZero: self-play with a tree search guided by a policy-value network, which learns the
    search's move choices and the games' outcomes (Silver et al. 2018, Science 362:1140), with
    ranked rewards for single-player tasks (Laterre et al. 2018, arXiv:1807.01672).

    Each training step the workers play whole episodes, every move chosen by `mcts_config.
    num_simulations` simulations of PUCT search from the current position (the env is saved and
    restored with its `get_state()` / `set_state(state)`); the moves join a replay window of the
    last `replay_buffer_size` rows, and the network takes `num_sgd_iter` passes of minibatch SGD
    over `train_batch_size` rows drawn from it. Two-player games are turn-based rlfleet
    `MultiAgentEnv`s (connect four: `rlfleet.env.examples.connect_four`): one network plays both
    seats, each position valued for the player to move. Action masks (an `"action_mask"` in a Dict
    observation) bound both the search and the network. With `num_workers: 0` the trainer's own
    worker plays; with N remote workers (Ray) each plays rounds of `rollout_fragment_length`
    moves on its `num_envs_per_worker` envs, in lockstep (one network call per simulation for
    all of them), until `train_batch_size` moves are in; the new weights go to every worker after
    each update.

    Departures from RLlib 1.x's AlphaZero (and the papers):

    - Two-player games are supported (RLlib 1.x searched single-player envs only); a move's gain
      is half the mover's reward less half the opponent's, and values flip sign between seats.
    - The policy target is the search's normalised visit counts (the paper's pi); RLlib 1.x trained
      on the counts raised to `temperature`. `temperature` keeps RLlib 1.x's meaning when drawing
      the move (an exponent on the counts: the paper's 1/tau).
    - The search starts a fresh tree at every move (RLlib 1.x kept the chosen subtree); PUCT's
      exploration term uses sqrt(max(1, parent visits)), so the priors order the first visit.
    - Value labels: single-player without ranked rewards, the return still to come (RLlib 1.x gave
      every step the whole episode's return); with ranked rewards, the episode's rank, the
      ranking coin-flipped on a tie with the threshold (the paper's rule; RLlib 1.x ranked a tie as
      a win).
    - `replay_buffer_size` counts rows (moves), and every training step adds `train_batch_size`
      new self-play moves before learning (RLlib 1.x kept sample batches and replayed them after
      `learning_starts`).
    - `gamma` is not used: returns and values are undiscounted, as in the paper and RLlib 1.x.
    - Ranked rewards apply to single-player tasks; with a two-player env, `ranked_rewards.enable`
      is not used (a warning says so): the game's outcome is already a win or a loss.
    - The trainer's evaluation workers, `compute_single_action` and export act with the network
      alone (masked priors, argmax when `explore` is False); the search as a player is
      `rlfleet.algorithms.alphazero.players.search_player`.
    """

    _name = "AlphaZero"
    _default_config = DEFAULT_CONFIG
    _algo_keys = ALGO_KEYS
    _policy_class = AlphaZeroPolicy

    def validate_algorithm_config(self, config: dict) -> None:
        if config["sgd_minibatch_size"] > config["train_batch_size"]:
            raise ValueError(f"'sgd_minibatch_size': {config['sgd_minibatch_size']} must be <= 'train_batch_size' "
                             f"({config['train_batch_size']})")
        if config["batch_mode"] != "complete_episodes":
            raise ValueError(f"'batch_mode': {config['batch_mode']!r} is not supported by AlphaZero: its value labels "
                             "are the outcomes of whole episodes; use 'complete_episodes'")
        if config["observation_filter"] != "NoFilter":
            raise ValueError(f"'observation_filter': {config['observation_filter']!r} is not supported by AlphaZero "
                             "(the search evaluates positions it restores, outside any filter's history); use "
                             "'NoFilter'")
        policies = config["multiagent"].get("policies") or {}
        if len(policies) > 1:
            raise ValueError(f"AlphaZero plays every seat with one network, but 'multiagent.policies' has "
                             f"{sorted(policies)}: give one policy (or none, for the default one)")

    def setup(self, config: dict) -> None:
        local = self.workers.local_worker()
        self._policy_id = next(iter(local.policy_map))
        probe = self.env_creator(EnvContext(config["env_config"], worker_index=0))
        game = SearchGame(probe)  # raises here, naming the hooks, when the env cannot be restored
        self._two_player = game.two_player
        r2 = config["ranked_rewards"]
        self._ranked = RankedRewardBuffer(r2["percentile"], r2["buffer_max_length"]) if r2["enable"] else None
        if self._ranked is not None and self._two_player:
            logger.warning("AlphaZero: 'ranked_rewards.enable' is True, but %s is a two-player game, whose outcome "
                           "is a win or a loss already: ranked rewards are not used", type(probe).__name__)
            self._ranked = None
        seed = config.get("seed")
        self._rng = np.random.default_rng(None if seed is None else derive_seed(seed, "alphazero_driver"))
        if self._ranked is not None and r2["initialize_buffer"]:
            self._ranked.add(random_returns(game, r2["num_init_rewards"], self._rng))
        if hasattr(probe, "close"):
            probe.close()
        self._settings = SearchSettings.from_config(config["mcts_config"])
        self._replay = ReplayWindow(int(config["replay_buffer_size"]))
        self._self_play_episodes = EpisodeWindow(config["metrics_smoothing_episodes"])
        self._new_episodes: List[Any] = []
        self._round = 0

    # --- the loop ------------------------------------------------------------------------
    def training_step(self) -> Dict[str, Any]:
        # === sample: whole self-play episodes, every move searched ===
        threshold = self._ranked.threshold() if self._ranked is not None else None
        answers: List[SelfPlayAnswer] = []
        steps, want = 0, int(self.config["train_batch_size"])
        while steps < want:
            request = SelfPlayRequest(self._policy_id, self._settings, int(self.config["rollout_fragment_length"]),
                                      threshold, self.config.get("seed"), self._round,
                                      local_plays=self.workers.num_remote_workers() == 0)
            self._round += 1
            played = [a for a in self.workers.foreach_worker(partial(self_play_on_worker, request=request)) if a]
            if not played:
                raise RuntimeError("AlphaZero: no worker played (no remote worker is left, and the trainer's own "
                                   "worker plays only with num_workers: 0)")
            answers += played
            steps += sum(answer.batch.count for answer in played)
        batch = SampleBatch.concat_samples([a.batch for a in answers])
        self.count_sampled(batch.count, batch.count)
        for answer in answers:
            self._new_episodes.extend(answer.episodes)
        # === ranked rewards: each episode's rank is its rows' label; then the bar moves ===
        if self._ranked is not None:
            batch[VALUE_LABEL] = self._rank_labels(answers, threshold)
            for answer in answers:
                self._ranked.add(answer.returns)
        # === learn: SGD passes over rows drawn from the replay window ===
        self._replay.add(batch)
        train_batch = self._replay.sample(want, self._rng)
        policy = self.get_policy(self._policy_id)
        info = policy.multi_epoch_sgd(train_batch, self.config["num_sgd_iter"], self.config["sgd_minibatch_size"],
                                      shuffle=self.config["shuffle_sequences"])
        self.counters["num_env_steps_trained"] += train_batch.count
        self.counters["num_agent_steps_trained"] += train_batch.count
        if self._ranked is not None:
            info["learner_stats"]["ranked_rewards_threshold"] = float(self._ranked.threshold())
        info["learner_stats"]["replay_rows"] = len(self._replay)
        # === sync ===
        self.workers.sync_weights(global_vars=self._global_vars())
        return {self._policy_id: info}

    def _rank_labels(self, answers: List[SelfPlayAnswer], threshold) -> np.ndarray:
        # No bar yet (no warm start): the batch's own returns set it.
        if threshold is None:
            threshold = float(np.percentile([r for a in answers for r in a.returns], self._ranked.percentile))
        labels = []
        for answer in answers:
            for episode, ret in zip(answer.episodes, answer.returns):
                labels.append(np.full(episode.episode_length, ranked(ret, threshold, self._rng), np.float32))
        return np.concatenate(labels)

    def _compile_result(self, learner_info: Dict[str, Any], steps_this_iter: int) -> Dict[str, Any]:
        result = super()._compile_result(learner_info, steps_this_iter)
        result.update(self._self_play_episodes.add(self._new_episodes), episodes_total=self._self_play_episodes.total)
        self._new_episodes = []
        return result

    # --- the search as a player ----------------------------------------------------------
    def search_player(self, num_simulations: Optional[int] = None, seed: Optional[int] = 0) -> GamePlayer:
        """The search with the current network, playing its most visited move without root
        noise, for `players.play_match` / `players.play_episode` (a single-player task's
        search ranks by the current ranked-rewards threshold).

        Args:
            num_simulations: per move (None: `mcts_config.num_simulations`).
            seed: its random draws (ties between equally visited moves).
        """
        sims = {} if num_simulations is None else {"num_simulations": num_simulations}
        settings = SearchSettings.from_config(self.config["mcts_config"], argmax_tree_policy=True,
                                              add_dirichlet_noise=False, **sims)
        transform = self.workers.local_worker().preprocessors[self._policy_id].transform
        threshold = self._ranked.threshold() if self._ranked is not None else None
        return search_player(self.get_policy(self._policy_id), transform, settings, seed,
                             bounded=self._two_player or threshold is not None, ranked_threshold=threshold)

    # --- state ---------------------------------------------------------------------------
    def get_state(self) -> Dict[str, Any]:
        state = dict(super().get_state())
        state["alphazero"] = {
            "rng": self._rng.bit_generator.state, "round": int(self._round),
            "replay": self._replay.get_state(), "episodes_total": int(self._self_play_episodes.total),
            "episode_window": self._self_play_episodes.get_state(),
            **({"ranked_rewards": self._ranked.get_state()} if self._ranked is not None else {}),
        }
        return state

    def set_state(self, state: Dict[str, Any]) -> None:
        super().set_state(state)
        saved = state.get("alphazero")
        if not saved:
            return
        self._rng.bit_generator.state = saved["rng"]
        self._round = int(saved["round"])
        self._replay.set_state(saved["replay"])
        self._self_play_episodes.set_state(saved.get("episode_window") or [], int(saved["episodes_total"]))
        if self._ranked is not None and "ranked_rewards" in saved:
            self._ranked.set_state(saved["ranked_rewards"])


__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "AlphaZeroTrainer"]
