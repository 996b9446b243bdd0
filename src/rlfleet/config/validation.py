"""Validating a merged config: deprecations translated, each value checked (and
normalized in place), RLlib 1.x's cross-key fixes, features not available yet."""
from __future__ import annotations

import logging
from typing import Any, Iterable, List, Sequence, Set

from rlfleet.config.checks import InvalidValue, is_int
from rlfleet.config.deprecation import check_available, translate_deprecated
from rlfleet.config.fragments import resolve_auto_fragment
from rlfleet.config.keys import IGNORED_KEYS, KEY_INDEX, ConfigKey
from rlfleet.utils.nested import get_nested

logger = logging.getLogger(__name__)


_NOTICES_GIVEN: Set[str] = set()  # keys already noticed, once per process


def _notice_once(key: str, message: str) -> None:
    if key not in _NOTICES_GIVEN:
        _NOTICES_GIVEN.add(key)
        logger.warning(message)


def check_keys(config: dict, keys: Iterable[ConfigKey], prefix: str = "") -> None:
    """Runs the checks of `keys` on `config`, normalizing values in place.

    Keys absent from `config` are skipped; a parent is checked before its children when
    declared first.

    Args:
        config: a merged config; mutated.
        keys: the keys whose checks to run, e.g. an algorithm's ``ALGO_KEYS``.
        prefix: put before each key's name in errors (``"evaluation_config."`` for an overlay).

    Raises:
        ValueError: naming the key, the value given and what is allowed.
    """
    for key in keys:
        if key.check is None:
            continue
        *parents, leaf = key.name.split(".")
        parent = get_nested(config, ".".join(parents)) if parents else config
        if not isinstance(parent, dict) or leaf not in parent:
            continue
        value = parent[leaf]
        try:
            parent[leaf] = key.check(value)
        except InvalidValue as e:
            raise ValueError(e.message(prefix + key.name, value)) from None
        except (TypeError, AttributeError, KeyError, IndexError) as e:
            # A check that could not even read the value: still the user's value at fault.
            raise ValueError(f"'{prefix}{key.name}': {value!r} is invalid ({type(e).__name__}: {e}); "
                             f"see describe_keys() for what it takes") from e


def _not_common_checks(algo_keys: Iterable[ConfigKey]) -> List[ConfigKey]:
    # An override keeps the common key's check, which validate_config runs already.
    return [k for k in algo_keys if k.name not in KEY_INDEX or k.check is not KEY_INDEX[k.name].check]


def validate_config(config: dict, algo_keys: Sequence[ConfigKey] = ()) -> None:
    """Checks a merged config and normalizes it in place.

    Translates deprecated keys (logging a warning), fills in defaults for None where the
    RLlib 1.x's ``Trainer._validate_config`` does (``model``, ``callbacks``, ``multiagent.policies``), converts policy
    tuples to ``PolicySpec``, checks each value (the common keys', then the algorithm's),
    then calls ``check_available``.

    Args:
        config: a merged config (the output of ``merge_configs``); mutated.
        algo_keys: the algorithm's keys (its ``ALGO_KEYS``), whose checks run too.

    Raises:
        ValueError: naming the key, the value given and what is allowed.
    """
    if config.get("model", {}) is None:  # before translating model.* deprecations
        config["model"] = {}
    translate_deprecated(config)

    for key in IGNORED_KEYS:
        if key in config and config[key] != KEY_INDEX[key].default:
            _notice_once(key, f"Config key '{key}' only applies to TensorFlow; rlfleet ignores it.")

    # RLlib 1.x's cross-key fixes (its `_validate_config`), done before the value checks so that e.g. an
    # evaluation_interval of 0 with evaluation workers becomes 1 rather than an error.
    n_eval = config.get("evaluation_num_workers", 0)
    if is_int(n_eval) and n_eval > 0 and not config.get("evaluation_interval"):
        logger.warning("%d evaluation workers but no evaluation_interval: evaluating after every "
                       "train() call (set evaluation_interval to evaluate less often).", n_eval)
        config["evaluation_interval"] = 1
    elif n_eval == 0 and config.get("evaluation_parallel_to_training"):
        logger.warning("evaluation_parallel_to_training needs evaluation_num_workers > 0; "
                       "setting it to False.")
        config["evaluation_parallel_to_training"] = False

    _framework_to_torch(config)
    check_keys(config, KEY_INDEX.values())  # parents come before their children
    resolve_auto_fragment(config)
    _evaluation_duration_to_episodes(config)
    check_keys(config, _not_common_checks(algo_keys))
    _check_evaluation_overlay(config, algo_keys)
    check_available(config)
    _check_gpus(config)


def _evaluation_duration_to_episodes(config: dict) -> None:
    """`evaluation_duration` (the name later RLlib 1.x releases use, checked: a number of episodes)
    sets `evaluation_num_episodes`."""
    duration = config.get("evaluation_duration")
    if duration is None:
        return
    episodes = config.get("evaluation_num_episodes")
    if episodes not in (duration, KEY_INDEX["evaluation_num_episodes"].default):
        raise ValueError(f"'evaluation_duration': {duration!r} and 'evaluation_num_episodes': {episodes!r} disagree; "
                         "set only one of them")
    config["evaluation_num_episodes"] = duration


def _check_evaluation_overlay(config: dict, algo_keys: Sequence[ConfigKey]) -> None:
    # The overlay is merged and validated again when evaluation workers are built (maybe
    # hours later); its values are checked now, on a copy, with their full path in errors.
    overlay = config.get("evaluation_config")
    if not isinstance(overlay, dict) or not overlay:
        return
    overlay = _copy_dicts(overlay)
    _framework_to_torch(overlay)
    check_keys(overlay, KEY_INDEX.values(), prefix="evaluation_config.")
    check_keys(overlay, _not_common_checks(algo_keys), prefix="evaluation_config.")


def _copy_dicts(value: Any) -> Any:
    # Only the dicts: checks replace values in their parent dict, never mutate the values.
    return {k: _copy_dicts(v) for k, v in value.items()} if isinstance(value, dict) else value


# RLlib 1.x's TensorFlow settings: configs written for it name them; the same model runs in torch here (DESIGN.md).
TF_FRAMEWORKS = ("tf", "tf2", "tfe")


def _framework_to_torch(config: dict) -> None:
    """`framework: tf` (RLlib 1.x's default, so most of its tuned examples rely on it) runs in torch, with
    one warning; a custom TensorFlow model stays an error (it cannot run in torch)."""
    framework = config.get("framework")
    if framework not in TF_FRAMEWORKS:
        return
    custom_model = (config.get("model") or {}).get("custom_model")
    if isinstance(custom_model, type) and any(
            (base.__module__ or "").split(".")[0] in ("tensorflow", "keras", "tf_keras") for base in custom_model.__mro__):
        raise ValueError(f"'model.custom_model': {custom_model.__qualname__} is a TensorFlow/Keras model, which "
                         f"rlfleet cannot run ('framework': {framework!r}); port it to a torch.nn.Module (see "
                         "rlfleet.models) and set 'framework': 'torch'")
    _notice_once("framework", f"'framework': {framework!r}: rlfleet runs the same model in torch (set "
                              "'framework': 'torch' to silence this warning).")
    config["framework"] = "torch"


def _check_gpus(config: dict) -> None:
    """`num_gpus` (the trainer's own learner) needs CUDA here, unless `_fake_gpus`. (Remote
    workers' `num_gpus_per_worker` is checked where they run: Ray reserves the GPUs, and the
    worker's policy refuses to start without CUDA.)"""
    num_gpus = config.get("num_gpus") or 0
    if num_gpus > 0 and not config.get("_fake_gpus"):
        import torch  # only when GPUs are asked for: the config layer stays light

        if not torch.cuda.is_available():
            raise ValueError(f"'num_gpus': {num_gpus!r} asks for GPUs, but torch sees no CUDA device on this "
                             "machine; set '_fake_gpus': True to simulate them on the CPU (towers), or "
                             "'num_gpus': 0 to learn on the CPU")
