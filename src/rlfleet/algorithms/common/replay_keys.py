"""The replay keys of the off-policy algorithms (DQN, SAC, DDPG, TD3), declared once.

Each key is a ``ConfigKey`` with DQN's default; an algorithm takes them with its own
defaults through ``replay_keys(buffer_size=..., ...)``. ``replay_buffer_config`` (later
RLlib 1.x releases' spelling) is checked with the checks of the keys it stands for, and
``normalize_replay_config`` folds it into those keys once the values are checked.
"""
from __future__ import annotations

import difflib

from typing import Any, Dict, List

from rlfleet.config import (
    ConfigKey,
    InvalidValue,
    boolean,
    int_at_least,
    not_available,
    number_above,
    number_in,
    optional,
    with_defaults,
)

K = ConfigKey

# Newer-style `replay_buffer_config` types, and whether each is prioritized.
_BUFFER_TYPES = {
    "ReplayBuffer": False, "MultiAgentReplayBuffer": False,
    "PrioritizedReplayBuffer": True, "MultiAgentPrioritizedReplayBuffer": True,
}
# `replay_buffer_config` sub-keys and the 1.x keys they stand for.
_BUFFER_ALIASES = {
    "capacity": "buffer_size",
    "prioritized_replay_alpha": "prioritized_replay_alpha",
    "prioritized_replay_beta": "prioritized_replay_beta",
    "prioritized_replay_eps": "prioritized_replay_eps",
    "learning_starts": "learning_starts",
}


def _replay_buffer_config(v: Any) -> Any:
    if v is None:
        return v
    known = sorted(set(_BUFFER_ALIASES) | {"type"})
    if not isinstance(v, dict):
        raise InvalidValue(f"None or a dict with sub-keys among {known}, "
                           "e.g. {'capacity': 50000, 'type': 'MultiAgentPrioritizedReplayBuffer'}")
    unknown = sorted(set(v) - set(known), key=str)
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), known, n=1)
        hint = f"; did you mean 'replay_buffer_config.{close[0]}' for {unknown[0]!r}?" if close else ""
        raise InvalidValue(f"a dict with sub-keys among {known}; unknown sub-key(s): {unknown}{hint}")
    if "type" in v and v["type"] not in _BUFFER_TYPES:
        raise InvalidValue(f"a 'type' among {sorted(_BUFFER_TYPES)}, not {v['type']!r}")
    out = dict(v)
    checks = {k.name: k.check for k in _REPLAY_KEYS}
    for sub, key in _BUFFER_ALIASES.items():
        if sub in out:
            try:
                out[sub] = checks[key](out[sub])
            except InvalidValue as e:
                raise InvalidValue(f"'{sub}' to be {e}") from None
    return out


_REPLAY_KEYS: List[ConfigKey] = [
    K("buffer_size", 50000, "Replay buffer capacity in transitions (`replay_buffer_config.capacity` "
      "is the newer spelling).", int_at_least(1)),
    K("replay_buffer_config", None, "Newer spelling of the replay keys: {type, capacity, learning_starts, "
      "prioritized_replay_alpha/beta/eps}; set, it overrides them.", _replay_buffer_config),
    K("store_buffer_in_checkpoints", False, "Checkpoints store the buffer's contents too (as arrays).", boolean),
    K("prioritized_replay", True, "Replay transitions in proportion to their TD error (Schaul et al. 2016).", boolean),
    K("prioritized_replay_alpha", 0.6, "How strongly priorities skew sampling (0: uniform).", number_in(0)),
    K("prioritized_replay_beta", 0.4, "Initial importance-sampling correction (1: full).", number_in(0)),
    K("final_prioritized_replay_beta", 0.4, "Importance-sampling correction at the end of annealing.",
      number_in(0)),
    K("prioritized_replay_beta_annealing_timesteps", 20000, "Steps over which beta anneals to its final value.",
      int_at_least(1)),
    K("prioritized_replay_eps", 1e-6, "Added to |TD error| for priorities; > 0, since a zero priority "
      "would never be replayed again.", number_above(0)),
    K("learning_starts", 1000, "Env steps sampled before learning starts.", int_at_least(0)),
    K("training_intensity", None, "Replayed steps per sampled step; None: one train batch per "
      "rollout_fragment_length * num_envs_per_worker * max(1, num_workers) sampled steps, i.e. one per "
      "truncated fragment, and with batch_mode 'complete_episodes' (fragments of whole episodes) counted in "
      "steps, so that a 200-step episode pays for 200 such fragments' updates (RNNSAC keeps SAC's one update "
      "per env step).", optional(number_above(0), "one update per nominal fragment of steps")),
    K("target_network_update_freq", 500, "Sampled env steps between target network updates (0: after "
      "every update).", int_at_least(0)),
    K("n_step", 1, "Steps of the n-step return each replayed transition carries.", int_at_least(1)),
    K("worker_side_prioritization", False, "Compute priorities on the workers before storing.",
      not_available("needs remote replay workers", False)),
]


def replay_keys(**defaults: Any) -> List[ConfigKey]:
    """The replay keys with DQN's defaults, except those given (e.g. ``buffer_size=10**6``)."""
    return with_defaults(_REPLAY_KEYS, defaults)


def replay_config(**defaults: Any) -> Dict[str, Any]:
    """The replay keys' defaults as a dict (DQN's values, except those given)."""
    return {k.name: k.default for k in replay_keys(**defaults)}


def normalize_replay_config(config: dict) -> None:
    """Folds a (checked) `replay_buffer_config` into the 1.x keys it stands for, in place.

    Its values win over those keys; a ``type`` sets ``prioritized_replay``.
    """
    rb = config.get("replay_buffer_config")
    if not rb:
        return
    if "type" in rb:
        config["prioritized_replay"] = _BUFFER_TYPES[rb["type"]]
    for sub, key in _BUFFER_ALIASES.items():
        if sub in rb:
            config[key] = rb[sub]
