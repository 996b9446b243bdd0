"""Checks of particular common keys (the generic ones are in ``checks``)."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict

from rlfleet.callbacks import DefaultCallbacks
from rlfleet.config.checks import Check, InvalidValue, is_int, is_num
from rlfleet.policy.policy_spec import PolicySpec
from rlfleet.policy.sample_batch import DEFAULT_POLICY_ID


def conv_filters(v: Any) -> Any:
    if v is None:
        return v

    def size(x: Any) -> bool:
        if isinstance(x, (list, tuple)):
            return len(x) == 2 and all(is_int(i) and i > 0 for i in x)
        return is_int(x) and x > 0

    if (isinstance(v, (list, tuple)) and v and all(
            isinstance(f, (list, tuple)) and len(f) in (3, 4) and is_int(f[0]) and f[0] > 0 and size(f[1])
            and size(f[2]) and (len(f) == 3 or f[3] in ("same", "valid"))
            for f in v)):
        return [list(f) for f in v]
    raise InvalidValue("None (picked by image size) or a non-empty list of [out_channels, kernel, stride] "
                       "(kernel and stride an int > 0 or a pair [h, w]), optionally with a padding \"same\" or "
                       "\"valid\" as a 4th entry, e.g. [[16, 8, 4], [32, 4, 2]] or [[32, 8, 4, \"valid\"]]")


def name_or_class(what: str) -> Check:
    def check(v: Any) -> Any:
        if v is None or isinstance(v, (str, type)):
            return v
        raise InvalidValue(f"None, the registered name (a str) or the class of a {what}")

    return check


def space_or_none(v: Any) -> Any:
    import gymnasium as gym

    if v is None or isinstance(v, gym.spaces.Space):
        return v
    raise InvalidValue("None (inferred from the env) or a gymnasium.spaces.Space")


def path_or_none(v: Any) -> Any:
    if v is None or isinstance(v, (str, os.PathLike)):
        return v
    raise InvalidValue("None or a folder path (a str)")


def dict_obs_key(v: Any) -> Any:
    if isinstance(v, str) and v:
        return v
    raise InvalidValue("a non-empty str (a key of the Dict observation)")


def str_list(v: Any) -> Any:
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return list(v)
    raise InvalidValue("a list of column names (str)")


def environ(v: Any) -> Any:
    if not isinstance(v, dict):
        raise InvalidValue("a dict {VARIABLE_NAME: value}")
    for name, value in v.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise InvalidValue(f"a dict {{VARIABLE_NAME: value}}; {name!r} is not an environment variable name")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or "\0" in str(value):
            raise InvalidValue(f"a dict {{VARIABLE_NAME: str or number}}; the value of {name!r} is {value!r}")
        if name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") and not (str(value).strip().isdigit() and int(value) >= 1):
            raise InvalidValue(f"a dict {{VARIABLE_NAME: value}} with {name} an int >= 1, not {value!r}")
    return v


# `betas` is checked here (torch would index a short list: IndexError); the other entries
# are checked by torch.optim.Adam when the policy builds it (`build_adam`, naming the key).
def optimizer_options(v: Any) -> Any:
    if not isinstance(v, dict):
        raise InvalidValue("a dict of torch.optim.Adam arguments, e.g. {'eps': 1e-5, 'betas': [0.9, 0.99]}")
    if "betas" in v:
        betas = v["betas"]
        if not (isinstance(betas, (list, tuple)) and len(betas) == 2 and all(is_num(b) and 0 <= b < 1 for b in betas)):
            raise InvalidValue(f"'betas' to be a pair of numbers in [0, 1), e.g. [0.9, 0.999], not {betas!r}")
    if "amsgrad" in v and not isinstance(v["amsgrad"], bool):
        raise InvalidValue(f"'amsgrad' to be True or False, not {v['amsgrad']!r}")
    return v


def framework(v: Any) -> Any:
    if v != "torch":  # "tf", "tf2" and "tfe" became "torch" before the checks (validation.py)
        raise InvalidValue("'torch' (or RLlib 1.x's 'tf', 'tf2', 'tfe', which run the same model in torch)")
    return v


def clip_rewards(v: Any) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if is_num(v) and v > 0:
        return v
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(is_num(x) for x in v) and v[0] < v[1]:
        return v
    raise InvalidValue("None (clip for Atari only), True (sign), False (never), a number > 0, "
                       "or a (low, high) pair with low < high")


def batch_wait_ms(v: Any) -> Any:
    # The sampler steps its sub-envs in lockstep (see rollout/remote_vector_env.py), so a wait
    # that lets a step go on with only the sub-envs that answered cannot be honoured.
    if not is_num(v) or v != 0:
        raise InvalidValue("0: remote sub-envs step in lockstep (every step waits for all of them, which "
                           "run in parallel), so a partial wait cannot be honoured; remove the key")
    return v


VECTORIZE_MODES = ("vector_entry_point", "sync", "async")


def vectorize_mode(v: Any) -> Any:
    """None, or one of Gymnasium's vectorization modes (a name in any case, or a
    `gymnasium.VectorizeMode`), stored as its lower-case name."""
    if v is None:
        return v
    name = str(v.value if type(v).__name__ == "VectorizeMode" else v).lower()
    if name not in VECTORIZE_MODES:
        raise InvalidValue(f"None (rlfleet steps its sub-envs one by one) or one of {list(VECTORIZE_MODES)} "
                           "(a Gymnasium vector env: gymnasium.make_vec's vectorization_mode)")
    return name


def record_env(v: Any) -> Any:
    if v == "":  # an empty folder name means "the default folder"
        return True
    if not isinstance(v, (bool, str)):
        raise InvalidValue("False, True (default video folder) or a folder path")
    return v


def logger_config(v: Any) -> Any:
    if v is None:
        return v
    if not isinstance(v, dict):
        raise InvalidValue("None or a dict {'type': a logger class, its 'package.module.Class' path or a list of "
                           "them, **options}")
    kind = v.get("type")
    kinds = kind if isinstance(kind, (list, tuple)) else [kind]
    if "type" in v and (not kinds or not all(isinstance(k, (type, str)) for k in kinds)):
        raise InvalidValue("a dict whose 'type' is a logger class (with on_result(result) and close()), its "
                           "'package.module.Class' path, or a non-empty list of them")
    return v


def exploration_type(v: Any) -> Any:
    # Imported here: the exploration package sits above config in the layers.
    from rlfleet.exploration.stochastic_sampling import resolve_exploration_class

    try:
        resolve_exploration_class(v)
    except ValueError as e:
        raise InvalidValue(str(e).split("; ", 1)[-1].replace("use ", "", 1)) from None
    return v


def legacy_callbacks_factory(legacy: Dict[str, Callable]) -> Callable[[], DefaultCallbacks]:
    """Wraps RLlib 1.x's older ``{hook_name: fn(info)}`` callbacks dict into a factory.

    Args:
        legacy: the dict given as ``callbacks``.

    Returns:
        A zero-argument callable returning ``DefaultCallbacks(legacy_callbacks_dict=legacy)``.
    """
    legacy = dict(legacy)  # later edits of the user's dict must not change the trainer
    return lambda: DefaultCallbacks(legacy_callbacks_dict=legacy)


def callbacks_class(v: Any) -> Any:
    if v is None:
        return DefaultCallbacks
    if isinstance(v, dict):
        return legacy_callbacks_factory(v)
    if not callable(v):
        raise InvalidValue("a DefaultCallbacks subclass (or any callable returning an instance), "
                           "a dict of legacy callback functions, or None")
    return v


def input_evaluation(v: Any) -> Any:
    if isinstance(v, tuple):
        v = list(v)
    if not isinstance(v, list) or not all(x in ("is", "wis", "simulation") for x in v):
        raise InvalidValue("a list of estimator names ('is', 'wis', 'simulation'), e.g. ['is', 'wis'], or []")
    return v


def input_spec(v: Any) -> Any:
    # Imported here: the offline package's readers say what an input may be.
    from rlfleet.offline.readers import check_input_spec

    return check_input_spec(v)


def output_spec(v: Any) -> Any:
    if v is None or callable(v) or (isinstance(v, str) and v):
        return v
    raise InvalidValue("None (no output), 'logdir' (the results folder), a folder path, or a callable "
                       "IOContext -> writer")


def policies(v: Any) -> Dict[str, Any]:
    if not v:
        v = {DEFAULT_POLICY_ID}
    if isinstance(v, (set, frozenset, list, tuple)):
        v = {pid: PolicySpec() for pid in v}
    if not isinstance(v, dict):
        raise InvalidValue("a dict {policy_id: PolicySpec or (cls, obs_space, act_space, config)} "
                           "or a set of policy ids")
    out: Dict[str, Any] = {}
    for pid, spec in v.items():
        if not isinstance(pid, str):
            raise ValueError(f"'multiagent.policies': policy id {pid!r} is a {type(pid).__name__}; "
                             "policy ids must be str")
        if not isinstance(spec, PolicySpec):
            if not isinstance(spec, (list, tuple)) or len(spec) != 4:
                raise ValueError(f"'multiagent.policies': the spec of policy {pid!r} is {spec!r}; "
                                 "expected a PolicySpec or a 4-tuple/list (policy_class or None, "
                                 "observation_space, action_space, config)")
            spec = PolicySpec(*spec)
        if spec.config is None:
            spec = spec._replace(config={})
        elif not isinstance(spec.config, dict):
            raise ValueError(f"'multiagent.policies': the config of policy {pid!r} is "
                             f"{spec.config!r}; expected a dict or None")
        out[pid] = spec
    return out


def sampler_class_or_none(v: Any) -> Any:
    if v is None or isinstance(v, type) or (isinstance(v, str) and ":" in v):
        return v
    raise InvalidValue("None (the built-in samplers), a class implementing rlfleet.rollout.sampler_api.Sampler, "
                       "or its 'module:Class' path")


def callable_or_none(signature: str) -> Check:
    def check(v: Any) -> Any:
        if v is None or callable(v):
            return v
        raise InvalidValue(f"None or a function {signature}")

    return check


def policy_ids(v: Any) -> Any:
    if v is None:
        return v
    if isinstance(v, (list, tuple, set, frozenset)) and all(isinstance(p, str) for p in v):
        return list(v)
    raise InvalidValue("None (train all policies) or a list of policy ids (str)")


def evaluation_duration(v: Any) -> Any:
    if v == "auto":
        raise InvalidValue("None or an episode count (an int >= 1): 'auto' (evaluate for as long as training "
                           "takes) is not available; with evaluation_parallel_to_training, give the episodes to run")
    if v is None:
        return v
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not is_int(v) or v < 1:
        raise InvalidValue("None or an episode count (an int >= 1)")
    return v


def evaluation_duration_unit(v: Any) -> Any:
    if v != "episodes":
        raise InvalidValue("'episodes': evaluation runs whole episodes; give evaluation_duration as a number of "
                           "episodes")
    return v
