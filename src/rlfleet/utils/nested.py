"""One lookup (and one assignment) of a nested key, for configs ("model.fcnet_hiddens") and
results ("evaluation/episode_reward_mean") alike."""
from __future__ import annotations

from typing import Any, Mapping

# Returned when the path is absent (None may be a real value).
MISSING: Any = object()


def get_nested(tree: Mapping[str, Any], path: str, sep: str = ".", default: Any = MISSING) -> Any:
    """Returns the value at `path` in nested mappings, or `default` when it is absent.

    A key that itself contains `sep` (a flattened result key such as "info/learner") is
    found as is before the path is followed.

    Args:
        tree: nested mappings (a config, a result dict).
        path: keys joined by `sep`, e.g. ``"model.fcnet_hiddens"``.
        sep: the separator of `path`: "." for configs, "/" for results.
        default: returned when a part of the path is missing or not a mapping.

    Returns:
        The value, or `default`.
    """
    if path in tree:
        return tree[path]
    node: Any = tree
    for part in path.split(sep):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def set_nested(tree: dict, path: str, value: Any, sep: str = ".") -> None:
    """Sets `value` at `path` in nested dicts, making (or replacing non-dict) parents as dicts."""
    *parents, leaf = path.split(sep)
    node = tree
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value
