"""Recursive dict merging with the config rules of RLlib 1.x's `deep_update` (configs rely on them).

Rules, applied key by key from `new` into `original`:

- A key unknown to `original` is an error, unless new keys are allowed. The error names the
  key (as a dotted path when nested) and suggests the closest known key.
- When both values are dicts, they are merged recursively. For a top-level key listed in
  `allow_new_subkey_list`, new keys are allowed anywhere below it.
- For a top-level key listed in `override_all_if_type_changes`, a new dict whose `"type"`
  differs from the old dict's `"type"` replaces the old dict whole: the old type's
  constructor arguments would be meaningless for the new type.
- Any other value replaces the old one.
"""
from __future__ import annotations

import copy
import difflib
from typing import Any, Dict, Iterable, List, Optional

# Beyond this many candidates, listing all valid keys in an error drowns the message.
_MAX_KEYS_LISTED = 20


def deep_update(
    original: dict,
    new: dict,
    new_keys_allowed: bool = False,
    allow_new_subkey_list: Optional[List[str]] = None,
    override_all_if_type_changes: Optional[List[str]] = None,
) -> dict:
    """Updates `original` in place with the values of `new`, recursively.

    `new` is never mutated, and no dict or list of `new` ends up shared with `original`
    (they are copied), so later edits of the result cannot leak back into `new`.

    Args:
        original: the dict to update (mutated).
        new: the values to merge in.
        new_keys_allowed: whether keys absent from `original` may be added (at any depth).
        allow_new_subkey_list: top-level keys whose dict values accept new sub-keys.
        override_all_if_type_changes: top-level keys whose dict value is replaced whole
            when the new dict's `"type"` differs from the old one's.

    Returns:
        `original`, updated.

    Raises:
        ValueError: for a key not in `original` when new keys are not allowed.
    """
    return _update(
        original,
        new,
        new_keys_allowed,
        allow_new_subkey_list or [],
        override_all_if_type_changes or [],
        prefix="",
    )


def merge_dicts(a: dict, b: dict) -> dict:
    """Returns a deep copy of `a` updated with `b`; new keys are allowed everywhere.

    Args:
        a: the base dict (not mutated).
        b: the dict whose values win (not mutated).

    Returns:
        A new merged dict.
    """
    merged = copy.deepcopy(a)
    deep_update(merged, b, new_keys_allowed=True)
    return merged


def unknown_key_message(key: Any, path: str, known: Iterable[Any]) -> str:
    """Builds the "unknown key" message: names `path` and suggests the closest known key.

    Args:
        key: the unknown key itself.
        path: its dotted path from the top of the config (e.g. ``model.fcnet_hidden``).
        known: the keys valid at that level.

    Returns:
        The message text.
    """
    names = sorted(str(k) for k in known)
    close = difflib.get_close_matches(str(key), names, n=1)
    if close:
        parent = path[: -len(str(key))]
        return f"Unknown config key '{path}'; did you mean '{parent}{close[0]}'?"
    if len(names) <= _MAX_KEYS_LISTED:
        return f"Unknown config key '{path}'; valid keys here are {names}"
    return f"Unknown config key '{path}'; none of the {len(names)} known keys at this level is similar"


def _copy_containers(value: Any) -> Any:
    # Copy dicts/lists/tuples structurally but keep leaves (classes, functions, spaces,
    # user objects) as they are: a full deepcopy could fail on uncopyable user objects
    # and would break identity for things like env classes.
    if isinstance(value, dict):
        return {k: _copy_containers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_containers(v) for v in value]
    return value


def _update(
    original: Dict[Any, Any],
    new: Dict[Any, Any],
    new_keys_allowed: bool,
    allow_new_subkey_list: List[str],
    override_all_if_type_changes: List[str],
    prefix: str,
) -> dict:
    for key, value in new.items():
        path = f"{prefix}{key}"
        if key not in original and not new_keys_allowed:
            raise ValueError(unknown_key_message(key, path, original.keys()))
        old = original.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            if (
                key in override_all_if_type_changes
                and "type" in value
                and "type" in old
                and value["type"] != old["type"]
            ):
                original[key] = _copy_containers(value)
            else:
                # As in RLlib 1.x's `deep_update`, the allow/override lists apply at the top level
                # only; below, only "new keys allowed or not" is passed down.
                _update(
                    old,
                    value,
                    new_keys_allowed or key in allow_new_subkey_list,
                    [],
                    [],
                    prefix=f"{path}.",
                )
        else:
            original[key] = _copy_containers(value)
    return original
