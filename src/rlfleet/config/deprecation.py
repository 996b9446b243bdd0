"""Keys RLlib 1.x deprecated (translated to their replacements with a warning, so configs written for it load) and
features this version does not have yet (a non-default value is an error)."""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from rlfleet.config.keys import KEY_INDEX
from rlfleet.utils.nested import MISSING, get_nested

logger = logging.getLogger(__name__)


class DeprecatedKey(NamedTuple):
    """A key RLlib 1.x deprecated: what replaces it, and how its value carries over."""

    replacement: Optional[str]
    translate: Callable[[dict, Any], None]


def _to_record_env(config: dict, value: Any) -> None:
    config["record_env"] = value


def _to_lstm_prev(config: dict, value: Any) -> None:
    config["model"]["lstm_use_prev_action"] = value
    config["model"]["lstm_use_prev_reward"] = value


DEPRECATED_KEYS: Dict[str, DeprecatedKey] = {
    # rlfleet picks the learning path itself, so the value has nothing to set.
    "simple_optimizer": DeprecatedKey(None, lambda config, value: None),
    "monitor": DeprecatedKey("record_env", _to_record_env),
    "model.lstm_use_prev_action_reward": DeprecatedKey(
        "model.lstm_use_prev_action and model.lstm_use_prev_reward", _to_lstm_prev),
}


# ---------------------------------------------------------------------------------------
# Features not in this version yet: a non-default value is an error. To enable a feature,
# delete its row.
# ---------------------------------------------------------------------------------------
NOT_YET_AVAILABLE: Dict[str, str] = {}

# Where "non-default" is not plain inequality with the declared default.
_IN_USE: Dict[str, Callable[[Any], bool]] = {}


def check_available(config: dict) -> None:
    """Raises if the config asks for a feature this version of rlfleet does not have yet.

    Args:
        config: a merged config.

    Raises:
        ValueError: naming each such key, its value, what it needs, and the default to use.
    """
    problems = []
    for path, needs in NOT_YET_AVAILABLE.items():
        value = get_nested(config, path)
        if value is MISSING:
            continue
        default = KEY_INDEX[path].default
        in_use = _IN_USE[path](value) if path in _IN_USE else value != default
        if in_use:
            problems.append(f"'{path}': {value!r} is not available yet in this version of rlfleet "
                            f"({needs}); use the default {default!r}")
    if problems:
        raise ValueError("\n".join(problems))


def split_deprecated(config: dict) -> Tuple[dict, Dict[str, Any]]:
    """Returns a copy of `config` without its deprecated keys, and those keys by dotted path."""
    # Take deprecated keys out of a (copied) config so the unknown-key check never sees
    # them; parents on their path are shallow-copied so the caller's dicts stay intact.
    rest = dict(config)
    found: Dict[str, Any] = {}
    for path in DEPRECATED_KEYS:
        *parents, leaf = path.split(".")
        node = rest
        for p in parents:
            if not isinstance(node.get(p), dict):
                break
            node[p] = dict(node[p])
            node = node[p]
        else:
            if leaf in node:
                found[path] = node.pop(leaf)
    return rest, found


def translate_deprecated(config: dict) -> None:
    """Replaces each deprecated key of a merged `config` by its replacement, with a warning."""
    for path, dep in DEPRECATED_KEYS.items():
        *parents, leaf = path.split(".")
        parent = get_nested(config, ".".join(parents)) if parents else config
        if not isinstance(parent, dict) or leaf not in parent:
            continue
        value = parent.pop(leaf)
        if dep.replacement is None:
            logger.warning("Config key '%s' is deprecated and ignored; remove it.", path)
        else:
            logger.warning("Config key '%s' is deprecated; use '%s' instead (its value %r was "
                           "carried over).", path, dep.replacement, value)
            dep.translate(config, value)
