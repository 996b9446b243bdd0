"""Merging configs (the user's over the defaults) and building an algorithm's defaults.

Each algorithm declares the keys it adds, and the common keys whose default it changes
(``override``), as one list of ``ConfigKey``; its ``DEFAULT_CONFIG`` (``algorithm_config``),
the checks of its values (``validate_config(config, keys)``) and its docs page
(``describe_keys("PPO")``) all come from that list.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

from rlfleet.config.deprecation import split_deprecated
from rlfleet.config.key_checks import legacy_callbacks_factory
from rlfleet.config.nested_keys import check_nested_keys
from rlfleet.config.rllib2_names import rename_rllib2_keys
from rlfleet.config.keys import (ALLOW_UNKNOWN_SUBKEYS, COMMON_CONFIG, KEY_INDEX,
                                 OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES, ConfigKey)
from rlfleet.utils.deep_update import deep_update
from rlfleet.utils.nested import set_nested


def merge_configs(
    config1: dict,
    config2: Optional[dict],
    allow_unknown_configs: bool = False,
    allow_unknown_subkeys: List[str] = ALLOW_UNKNOWN_SUBKEYS,
    override_all_subkeys_if_type_changes: List[str] = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
) -> dict:
    """Returns a deep copy of `config1` updated with `config2` (neither is mutated).

    A dict given as ``callbacks`` becomes a factory of ``DefaultCallbacks`` running those
    legacy functions. RLlib 2.x's names of keys (``num_env_runners``: see ``rllib2_names``)
    become rlfleet's. Deprecated keys pass through untouched (``validate_config``
    translates them).

    Args:
        config1: the defaults, e.g. an algorithm's ``DEFAULT_CONFIG``.
        config2: the overrides, e.g. the user's partial config (None means none).
        allow_unknown_configs: whether top-level keys unknown to `config1` may be added.
        allow_unknown_subkeys: top-level keys whose dicts accept unknown sub-keys.
        override_all_subkeys_if_type_changes: top-level keys whose dict is replaced whole
            when its ``"type"`` changes.

    Returns:
        The merged config.

    Raises:
        ValueError: for an unknown key (at any depth: see ``nested_keys``), naming its
            dotted path and the closest valid one; for both spellings of a key with
            different values.
    """
    merged = copy.deepcopy(config1)
    rest, deprecated = split_deprecated(rename_rllib2_keys(config2 or {}, None if allow_unknown_configs else config1))
    if isinstance(rest.get("callbacks"), dict):
        rest["callbacks"] = legacy_callbacks_factory(rest["callbacks"])
    if not allow_unknown_configs:
        check_nested_keys(rest, config1)
    deep_update(merged, rest, allow_unknown_configs, allow_unknown_subkeys,
                override_all_subkeys_if_type_changes)
    for path, value in deprecated.items():
        set_nested(merged, path, value)
    return merged


def with_common_config(extra_config: dict) -> dict:
    """Returns ``COMMON_CONFIG`` updated with an algorithm's own keys (new keys allowed).

    Args:
        extra_config: the algorithm's keys and overridden defaults.

    Returns:
        The algorithm's full default config.
    """
    return merge_configs(COMMON_CONFIG, extra_config, allow_unknown_configs=True)



def override(name: str, default: Any, doc: Optional[str] = None) -> ConfigKey:
    """A common key with an algorithm's own default; its check (and meaning) stay.

    Args:
        name: the common key's dotted path, e.g. ``"lr"`` or ``"model.vf_share_layers"``.
        default: the algorithm's default.
        doc: the meaning, where the algorithm gives the key a narrower one.

    Raises:
        ValueError: if `name` is not a common key.
    """
    if name not in KEY_INDEX:
        raise ValueError(f"override({name!r}): not a common key; declare an algorithm's own key "
                         "with ConfigKey(name, default, doc, check)")
    key = KEY_INDEX[name]
    return key._replace(default=default, doc=doc or key.doc)


def with_defaults(keys: List[ConfigKey], defaults: Dict[str, Any]) -> List[ConfigKey]:
    """`keys` with other defaults: a variant of an algorithm (TD3 of DDPG, SimpleQ of DQN).

    Args:
        keys: the base algorithm's keys.
        defaults: ``{dotted name: new default}``; a common key not in `keys` is added as an
            ``override``.

    Returns:
        A new list; `keys` is not changed.
    """
    out = list(keys)
    index = {k.name: i for i, k in enumerate(out)}
    for name, default in defaults.items():
        if name in index:
            out[index[name]] = out[index[name]]._replace(default=default)
        else:
            out.append(override(name, default))
    return out


def algorithm_config(keys: List[ConfigKey]) -> Dict[str, Any]:
    """An algorithm's ``DEFAULT_CONFIG``: ``COMMON_CONFIG`` updated with `keys`' defaults.

    Merged as ``with_common_config`` merges: a dict default of a common key updates the
    common dict (``model``), except an ``exploration_config`` of another ``type``, which
    replaces it whole. A parent key (``Q_model``) must come before its children
    (``Q_model.fcnet_hiddens``).

    Args:
        keys: the algorithm's keys (its own ones and its overrides of common keys).
    """
    defaults: Dict[str, Any] = {}
    for key in keys:
        *parents, leaf = key.name.split(".")
        node = defaults
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = copy.deepcopy(key.default)
    return with_common_config(defaults)
