"""League self-play as callbacks: a main policy trains against itself and its frozen
snapshots, opponents matched by PFSP (league.py), one seat each per episode (mapping.py).

    class ConnectFourLeague(LeagueCallbacks):
        settings = LeagueSettings(main="main", seats=("player_0", "player_1"), snapshot_every=5)

    config = {"callbacks": ConnectFourLeague,
              "multiagent": {"policies": {"main"}, "policies_to_train": ["main"],
                             "policy_mapping_fn": lambda agent_id, *a, **kw: "main"}}

(A subclass defined at module level keeps checkpoints' configs rebuildable by name;
`functools.partial(LeagueCallbacks, LeagueSettings(...))` works too.)

Where each step runs:
- workers, `on_episode_end`: the episode's result from main's side (its agent's summed
  reward against the opponent's), counted per opponent until the driver takes them;
- driver, `on_train_result`: takes the workers' counts into the `League`, every
  `snapshot_every` iterations adds a snapshot (`trainer.add_policy`, main's weights, not
  trained), hands every worker the new PFSP mapping, and puts the league table in
  `result["league"]` (`{opponent: {"win_rate", "games", "prob"}}`; the loggers write it,
  TensorBoard as `league/<opponent>/win_rate` and so on);
- driver, `on_trainer_init`: with `random_prob > 0`, adds the uniformly random member
  `"random"` (main's policy class, every weight 0, never trained);
- `fixed_members`: policies the config already holds (e.g. the scripted connect four player,
  policy/examples/connect_four.py), each drawn for its fixed share of the episodes;
- driver, `on_train_result` with `keep_best`: the weights main played an iteration's games
  with become `<main>_best` when it won the most of them against the random member so far
  (`result["league_best"]`: `{"win_rate", "games", "iteration"}`);
- `get_state` / `set_state`: the league (snapshots, counts) in trainer checkpoints; a
  restore re-adds the snapshots before their weights are loaded.

Snapshots beyond `multiagent.policy_map_capacity` are spilled to disk by the policy map's
LRU and reloaded when an episode draws them.
"""
from __future__ import annotations

import secrets
from functools import partial
from typing import Any, Dict, Optional

import numpy as np

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.league.league import DRAW, LOSS, OUTCOMES, RANDOM_MEMBER, WIN, League, LeagueSettings
from rlfleet.league.mapping import USER_DATA_KEY, LeagueMapping
from rlfleet.utils.seeding import derive_seed


class LeagueCallbacks(DefaultCallbacks):
    """Runs a self-play league (see the module docstring).

    Args:
        settings: the league's `LeagueSettings` (None: the class attribute `settings`).
        legacy_callbacks_dict: as for `DefaultCallbacks`.
    """

    settings: LeagueSettings = LeagueSettings()

    def __init__(self, settings: Optional[LeagueSettings] = None, legacy_callbacks_dict: Optional[dict] = None):
        super().__init__(legacy_callbacks_dict)
        self.settings = settings if settings is not None else type(self).settings
        if not isinstance(self.settings, LeagueSettings):
            raise ValueError(f"LeagueCallbacks: settings must be a LeagueSettings, got {self.settings!r}")
        self.league = League(self.settings)
        # Worker side: games finished since the driver last took them.
        self._pending: Dict[str, Dict[str, int]] = {}
        self._seed = 0
        # Driver side (keep_best): main's weights as they play the coming iteration's games;
        # None until an iteration has ended (in this process: not carried by checkpoints).
        self._candidate: Optional[Dict[str, Any]] = None

    # --- driver: setup -------------------------------------------------------------------
    def on_trainer_init(self, *, trainer, **kwargs) -> None:
        super().on_trainer_init(trainer=trainer, **kwargs)
        main = self.settings.main
        local = trainer.workers.local_worker()
        if main not in local.policy_map:
            raise ValueError(f"LeagueCallbacks: the main policy {main!r} is not in 'multiagent.policies' "
                             f"({sorted(local.policy_map)}); add it, or set LeagueSettings(main=...)")
        if list(local.policies_to_train) != [main]:
            raise ValueError(f"LeagueCallbacks: 'multiagent.policies_to_train' is {list(local.policies_to_train)}; "
                             f"set it to [{main!r}]: only main trains, snapshots stay frozen")
        missing = [pid for pid in self.settings.fixed_shares if pid not in local.policy_map]
        if missing:
            raise ValueError(f"LeagueCallbacks: fixed_members {missing} are not in 'multiagent.policies' "
                             f"({sorted(local.policy_map)}); add them (e.g. a PolicySpec of a scripted policy)")
        seed = self.settings.seed if self.settings.seed is not None else trainer.config.get("seed")
        self._seed = derive_seed(seed, "league") if seed is not None else secrets.randbits(63)
        if self.settings.random_prob > 0 and RANDOM_MEMBER not in local.policy_map:
            self._add_random_member(trainer)
        self._push_mapping(trainer)

    # --- workers: results -----------------------------------------------------------------
    def on_episode_end(self, *, worker, base_env, policies, episode, env_index=None, **kwargs) -> None:
        super().on_episode_end(worker=worker, base_env=base_env, policies=policies, episode=episode,
                               env_index=env_index, **kwargs)
        match = episode.user_data.get(USER_DATA_KEY)
        if match is None or worker.config.get("in_evaluation"):
            return  # not a league episode (another mapping), or an evaluation one
        main_agent = match["main_agent"]
        mine = sum(r for (aid, _), r in episode.agent_rewards.items() if aid == main_agent)
        theirs = sum(r for (aid, _), r in episode.agent_rewards.items() if aid != main_agent)
        outcome = WIN if mine > theirs else LOSS if mine < theirs else DRAW
        row = self._pending.setdefault(match["opponent"], {k: 0 for k in OUTCOMES})
        row[outcome] += 1

    def take_games(self) -> Dict[str, Dict[str, int]]:
        """The games counted on this worker since the last call (then forgotten here)."""
        games, self._pending = self._pending, {}
        return games

    # --- driver: each iteration ---------------------------------------------------------------
    def on_train_result(self, *, trainer, result: dict, **kwargs) -> None:
        taken = trainer.workers.foreach_worker(_take_league_games)
        for games in taken:
            self.league.merge(games)
        if self.settings.keep_best:
            self._keep_best(trainer, taken)
        if trainer.iteration % self.settings.snapshot_every == 0:
            self._add_snapshot(trainer)
        self._push_mapping(trainer)
        probs = self.league.probabilities()
        table = self.league.table()
        result["league"] = {opp: dict(table.get(opp, {"win_rate": float("nan"), "games": 0}), prob=p)
                            for opp, p in probs.items()}
        if self.league.best is not None:
            result["league_best"] = dict(self.league.best)
        super().on_train_result(trainer=trainer, result=result, **kwargs)

    def _add_snapshot(self, trainer) -> None:
        main = trainer.get_policy(self.settings.main)
        policy_id = self.league.next_snapshot_id()
        self.league.add_snapshot(policy_id)
        self._add_frozen_policy(trainer, policy_id, main.get_weights())

    def _keep_best(self, trainer, taken) -> None:
        row = {k: sum(games.get(RANDOM_MEMBER, {}).get(k, 0) for games in taken) for k in OUTCOMES}
        # This iteration's games were played with the weights main had when the last one ended.
        if self._candidate is not None and self.league.offer_best(row, trainer.iteration):
            best_id = self.settings.best_id
            if best_id in trainer.workers.local_worker().policy_map:
                trainer.get_policy(best_id).set_weights(self._candidate)
                trainer.workers.sync_weights(policies=[best_id])
            else:
                self._add_frozen_policy(trainer, best_id, self._candidate)
        weights = trainer.get_policy(self.settings.main).get_weights()
        self._candidate = {name: np.array(w, copy=True) for name, w in weights.items()}

    def _add_random_member(self, trainer) -> None:
        # Every weight 0: every logit is 0, so the masked distribution is uniform over the
        # legal moves (the value branch is never used: the member does not train).
        main = trainer.get_policy(self.settings.main)
        zeros = {name: np.zeros_like(w) for name, w in main.get_weights().items()}
        self._add_frozen_policy(trainer, RANDOM_MEMBER, zeros)

    def _add_frozen_policy(self, trainer, policy_id: str, weights: Dict[str, Any]) -> None:
        main = trainer.get_policy(self.settings.main)
        self._add_snapshot_policy(trainer, policy_id, main)
        trainer.get_policy(policy_id).set_weights(weights)
        trainer.workers.sync_weights(policies=[policy_id])

    def _add_snapshot_policy(self, trainer, policy_id: str, main) -> None:
        # The env's space as main got it (its policy sees the preprocessed one; built-in
        # action masking needs the original Dict to find the mask).
        raw_space = trainer.workers.local_worker().preprocessors[self.settings.main].original_space
        trainer.add_policy(policy_id, type(main), observation_space=raw_space,
                           action_space=main.action_space, config=dict(main.config),
                           policy_mapping_fn=self.mapping(), policies_to_train=[self.settings.main])

    def mapping(self) -> LeagueMapping:
        """The policy mapping for the league's current PFSP probabilities."""
        return LeagueMapping(main=self.settings.main, seats=self.settings.seats,
                             probabilities=self.league.probabilities(), seed=self._seed)

    def _push_mapping(self, trainer) -> None:
        set_mapping = partial(_set_mapping, self.mapping())
        trainer.workers.foreach_worker(set_mapping)
        if trainer.evaluation_workers is not None:
            trainer.evaluation_workers.foreach_worker(set_mapping)

    # --- checkpoints ---------------------------------------------------------------------------
    def get_state(self) -> Dict[str, Any]:
        return {"league": self.league.to_state(), "seed": int(self._seed)}

    def set_state(self, *, trainer, state: Dict[str, Any]) -> None:
        if "league" not in state:
            raise ValueError("LeagueCallbacks: the checkpoint holds no league state (it was written without "
                             "LeagueCallbacks); restore it into a trainer without them")
        before = list(self.league.snapshots)
        if self.league.best is not None:
            before.append(self.settings.best_id)
        self.league.load_state(state["league"])
        self._seed = int(state["seed"])
        self._candidate = None
        frozen = list(self.league.snapshots)
        if self.league.best is not None:
            frozen.append(self.settings.best_id)
        for policy_id in before:  # snapshots (or a best main) made after that checkpoint
            if policy_id not in frozen:
                trainer.remove_policy(policy_id, policy_mapping_fn=self.mapping(),
                                      policies_to_train=[self.settings.main])
        have = trainer.workers.local_worker().policy_map
        main = trainer.get_policy(self.settings.main)
        for policy_id in frozen:  # weights follow with the worker state
            if policy_id not in have:
                self._add_snapshot_policy(trainer, policy_id, main)
        self._push_mapping(trainer)


def _take_league_games(worker) -> Dict[str, Dict[str, int]]:
    if not isinstance(worker.callbacks, LeagueCallbacks):
        raise TypeError(f"a worker's callbacks are {type(worker.callbacks).__name__}, not LeagueCallbacks; "
                        "set 'callbacks' in the trainer config so that every worker builds them")
    return worker.callbacks.take_games()


def _set_mapping(mapping: LeagueMapping, worker) -> None:
    worker.set_policy_mapping_fn(mapping)
