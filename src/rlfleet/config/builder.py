"""RLlib 2.x's ``AlgorithmConfig`` builder, as a thin layer over rlfleet's dict config.

One class serves every algorithm (``PPOConfig`` is ``config_class("PPO")``): each method
(``environment``, ``env_runners``, ``training``, ...) sets dict keys through the one table in
``builder_keywords`` and returns the builder, so calls chain as in RLlib 2.x::

    config = (PPOConfig().environment("CartPole-v1")
              .env_runners(num_env_runners=0).training(lr=3e-4, num_epochs=2))
    trainer = config.build()   # the registered PPO trainer, built with config.to_dict()

The builder holds only what was set (rlfleet's key names); the declared keys stay the one
source of truth for defaults and checks, which run when the builder validates or builds.

It never imports or calls Ray: it only looks in ``sys.modules`` for an imported Ray Tune, to
hand itself to the Tune adapter (``_link_tune``), which is why tests/architecture lists it
among the modules that name Ray.
"""
from __future__ import annotations

import copy
import difflib
import importlib
import sys
from typing import Any, Callable, Dict, List, Optional, Union

from rlfleet.config.builder_keywords import (ACCEPTED_DEFAULTS, BUILDER_METHODS, CONVERTERS, POSITIONAL,
                                             TRAINING_SPELLINGS, training_keywords)
from rlfleet.config.keys import KEY_INDEX
from rlfleet.config.merge import merge_configs
from rlfleet.config.rllib2_names import RLLIB2_NAMES, rename_rllib2_keys
from rlfleet.config.validation import validate_config
from rlfleet.registry import config_class_name, config_classes, get_trainer_class
from rlfleet.utils.nested import MISSING, get_nested, set_nested

# Called with the builder and its caller's frame on every to_dict(); rlfleet.tune adds the one
# that registers rlfleet's trainable under the name a Tuner was given (`route_algorithm_name`).
TO_DICT_CHECKS: List[Callable[[Any, Any], None]] = []

# Keys whose dicts successive calls update rather than replace (RLlib 2.x's `training(model=)` does).
_UPDATED_DICTS = ("model", "env_config", "multiagent")
# RLlib 2.x's AlgorithmConfig attributes spelt apart from the keys they hold (Python keywords).
_ATTRIBUTE_KEYS = {"input_": "input", "lambda_": "lambda"}


class AlgorithmConfig:
    """A chainable config for one registered algorithm; ``to_dict()`` is the dict config.

    Args:
        algo_class: the algorithm: its registered name (``"PPO"``) or trainer class; a
            subclass made by ``config_class`` knows its own.
    """

    algo_name: Optional[str] = None

    def __init__(self, algo_class: Union[str, type, None] = None):
        if algo_class is not None:
            self.algo_name = algo_class if isinstance(algo_class, str) else algo_class._name
        if self.algo_name is None:
            raise TypeError("AlgorithmConfig needs the algorithm: AlgorithmConfig('PPO'), or use PPOConfig()")
        get_trainer_class(self.algo_name)  # an unknown name fails here, listing the known ones
        self._settings: Dict[str, Any] = {}
        _link_tune()

    @property
    def algo_class(self) -> type:
        """What ``tune.Tuner(config.algo_class, param_space=config)`` runs, as in RLlib 2.x: the
        algorithm's Ray Tune trainable (``rlfleet.tune.trainable``, named "rlfleet.<algo>").
        ``build()`` gives the trainer itself.

        Raises:
            ImportError: Ray Tune is not installed (names the extra to install).
        """
        # By name: the Tune adapter sits above the config layer and is imported only on use.
        return importlib.import_module("rlfleet.tune").trainable(self.algo_name)

    # --- the table's methods --------------------------------------------------------
    def keywords(self, method: str) -> Dict[str, str]:
        """`method`'s keywords, each with the dict key (or RLlib 2.x name of one) it sets."""
        if method == "training":
            trainer_class = get_trainer_class(self.algo_name)
            return training_keywords((k.name for k in trainer_class._algo_keys), KEY_INDEX)
        return BUILDER_METHODS[method]

    def _apply(self, method: str, args: tuple, kwargs: Dict[str, Any]) -> "AlgorithmConfig":
        _link_tune()
        if args:
            if method not in POSITIONAL or len(args) > 1:
                raise TypeError(f"{type(self).__name__}.{method}() takes keyword arguments only"
                                + (f" (besides {POSITIONAL[method]})" if method in POSITIONAL else ""))
            if POSITIONAL[method] in kwargs:
                raise TypeError(f"{type(self).__name__}.{method}() got {POSITIONAL[method]!r} twice")
            kwargs = {POSITIONAL[method]: args[0], **kwargs}
        table = self.keywords(method)
        for keyword, value in kwargs.items():
            if (method, keyword) in ACCEPTED_DEFAULTS:
                accepted = ACCEPTED_DEFAULTS[(method, keyword)]
                if not accepted.accepts(value):
                    raise ValueError(f"{type(self).__name__}.{method}({keyword}={value!r}): rlfleet has no such "
                                     f"setting; {accepted.fix}")
            elif keyword in table:
                if method == "framework" and keyword == "framework" and value != "torch":
                    raise ValueError(f"{type(self).__name__}.framework({value!r}): rlfleet runs on torch only; "
                                     "use framework('torch')")
                self._set(table[keyword], CONVERTERS.get(keyword, lambda v: v)(value))
            else:
                raise TypeError(self._unknown(method, keyword, list(table) + [
                    kw for m, kw in ACCEPTED_DEFAULTS if m == method]))
        return self

    def _unknown(self, method: str, keyword: str, known: list) -> str:
        close = difflib.get_close_matches(keyword, sorted(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; it takes {sorted(known)}"
        elsewhere = [m for m in BUILDER_METHODS if m != method and keyword in self.keywords(m)]
        if elsewhere:
            hint = f"; it is a keyword of {elsewhere[0]}()"
        elif method == "training" and keyword in TRAINING_SPELLINGS:
            hint = f"; it is RLlib 2.x's name of {TRAINING_SPELLINGS[keyword]!r}, which {self.algo_name} does not have"
        return f"{type(self).__name__}.{method}() got an unexpected keyword argument {keyword!r}{hint}"

    def _set(self, name: str, value: Any) -> None:
        if name in RLLIB2_NAMES:  # the dict config's own translation, refusals included
            renamed = rename_rllib2_keys({name: value})
            if not renamed:
                return
            (name, value), = renamed.items()
        if name in _UPDATED_DICTS and isinstance(value, dict) and isinstance(self._settings.get(name), dict):
            value = {**self._settings[name], **value}
        set_nested(self._settings, name, value)

    # --- attributes: RLlib 2.x scripts read settings as `config.lr` --------------------
    def attribute_names(self) -> Dict[str, Optional[str]]:
        """Every setting readable as an attribute, with the dotted key it reads: the
        algorithm's declared top-level keys, RLlib 2.x's names of keys (``num_env_runners``),
        and every builder keyword (``minibatch_size``, ``lambda_``, ``input_``, ``policies``,
        ``actor_lr``, ...), less the builder's own methods (``callbacks()``, ``framework()``).
        None: a 2.x name that sets no rlfleet key (``num_learners``)."""
        defaults = get_trainer_class(self.algo_name)._default_config
        out: Dict[str, Optional[str]] = {key: key for key in defaults}
        out.update({name: entry.key for name, entry in RLLIB2_NAMES.items()})
        for method in BUILDER_METHODS:
            for keyword, name in self.keywords(method).items():
                out.setdefault(keyword, RLLIB2_NAMES[name].key if name in RLLIB2_NAMES else name)
        out["framework_str"] = "framework"  # 2.x's attribute; framework() is the method
        # A key named like a method (callbacks, framework) reads through its keyword's name
        # (callbacks_class) or 2.x's attribute (framework_str).
        own = set(dir(type(self)))
        return {name: path for name, path in out.items() if name not in own}

    def __getattr__(self, name: str) -> Any:
        """``config.lr``, ``config.num_env_runners``, ``config.model``: the value the trainer will
        get (what was set, else the algorithm's default; a dict key's dict is the default
        updated with what was set), as a copy. Called only for names that are not the
        builder's own methods and attributes; the names are ``attribute_names()``.

        Raises:
            AttributeError: a name that is no setting (naming the closest one), or a 2.x name
                of a setting this algorithm does not have.
        """
        if name.startswith("__") or name == "_settings":  # Python's own protocols; a builder in construction
            raise AttributeError(name)
        names = self.attribute_names()
        if name not in names:
            close = difflib.get_close_matches(name, sorted(set(names) | set(BUILDER_METHODS)), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise AttributeError(f"{type(self).__name__!r} has no attribute or setting {name!r}{hint}")
        path = names[name]
        if path is None:
            raise AttributeError(f"{type(self).__name__}.{name}: RLlib 2.x's setting has no rlfleet key: "
                                 f"{RLLIB2_NAMES[name].note}")
        trainer_class = get_trainer_class(self.algo_name)
        default = get_nested(trainer_class._default_config, path)
        if default is MISSING:
            raise AttributeError(f"{type(self).__name__}.{name}: it is RLlib 2.x's name of {path!r}, which "
                                 f"{self.algo_name} does not have")
        top = path.split(".")[0]
        if top not in self._settings:
            return copy.deepcopy(default)
        # The trainer's own merge of that key (dicts deep-updated, as the trainer will see them).
        return get_nested(trainer_class.merge_trainer_configs(trainer_class._default_config,
                                                              {top: self._settings[top]}), path)

    # --- the dict ---------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """The settings given so far, as a (partial) dict config with rlfleet's key names."""
        for check in TO_DICT_CHECKS:
            check(self, sys._getframe(1))
        return copy.deepcopy(self._settings)

    @classmethod
    def from_dict(cls, config_dict: Dict[str, Any]) -> "AlgorithmConfig":
        """A builder holding `config_dict` (RLlib 2.x's names are translated)."""
        return cls().update_from_dict(config_dict)

    @classmethod
    def overrides(cls, **kwargs: Any) -> Dict[str, Any]:
        """A partial dict config (RLlib 2.x's names translated), for ``evaluation_config`` and
        the ``config`` of a ``PolicySpec``: ``evaluation(evaluation_config=PPOConfig.overrides(explore=False))``.
        Its keys are checked with the config it overlays. 2.x's keywords here are its config's
        attribute names, so `input_` and `lambda_` stand for `input` and `lambda`."""
        return rename_rllib2_keys({_ATTRIBUTE_KEYS.get(k, k): v for k, v in kwargs.items()})

    def update_from_dict(self, config_dict: Dict[str, Any]) -> "AlgorithmConfig":
        """Sets the keys of `config_dict` (a partial dict config); an unknown key is an error now.

        Raises:
            ValueError: naming an unknown key and the closest valid one.
        """
        defaults = get_trainer_class(self.algo_name)._default_config
        renamed = rename_rllib2_keys(config_dict, defaults)
        merge_configs(defaults, renamed)  # checks every key name
        for name, value in renamed.items():
            self._set(name, copy.deepcopy(value))
        return self

    def copy(self, copy_frozen: Optional[bool] = None) -> "AlgorithmConfig":
        """An independent copy (`copy_frozen` is RLlib 2.x's; rlfleet's builders never freeze)."""
        out = copy.copy(self)
        out._settings = copy.deepcopy(self._settings)
        return out

    def validate(self) -> None:
        """Runs every check the trainer will run on the merged config.

        Raises:
            ValueError: naming the key, its value and what it takes.
        """
        trainer_class = get_trainer_class(self.algo_name)
        config = trainer_class.merge_trainer_configs(trainer_class._default_config, self._settings)
        validate_config(config, trainer_class._algo_keys)

    def build(self, env: Any = None, logger_creator: Optional[Callable[[dict], Any]] = None, **kwargs: Any) -> Any:
        """The registered trainer, built with ``to_dict()`` (and `env`, which overrides the env set).

        Args:
            env: the env (name, class, ...), or None for the one given to ``environment()``.
            logger_creator: passed to the trainer (``Trainer``'s argument).
            kwargs: the trainer's other keyword arguments (``logdir``).
        """
        return get_trainer_class(self.algo_name)(config=self.to_dict(), env=env, logger_creator=logger_creator,
                                                 **kwargs)

    build_algo = build

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._settings!r})"


def _method(name: str) -> Callable[..., AlgorithmConfig]:
    def method(self: AlgorithmConfig, *args: Any, **kwargs: Any) -> AlgorithmConfig:
        return self._apply(name, args, kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"RLlib 2.x's ``{name}()``: sets the keys of ``builder_keywords.BUILDER_METHODS[{name!r}]``"
                      + (" and the algorithm's own keys" if name == "training" else "")
                      + "; an unknown keyword raises TypeError naming the closest one. Returns the builder.")
    return method


for _name in BUILDER_METHODS:
    setattr(AlgorithmConfig, _name, _method(_name))

_CLASSES: Dict[str, type] = {}
_TUNE_LINKED = False


def _link_tune() -> None:
    """Once `ray.tune` is imported, makes the builders Tune configs (`rlfleet.tune.accept_builders`),
    so that `tune.Tuner("PPO", param_space=config)` runs rlfleet's PPO with only a 2.x script's
    import lines changed. Called whenever a builder is made or changed: a 2.x script imports
    `ray.tune` before it builds its config. A process that never imports Ray pays one dict
    lookup per call, and `import rlfleet` nothing.
    """
    global _TUNE_LINKED
    if not _TUNE_LINKED and "ray.tune" in sys.modules:
        _TUNE_LINKED = True
        # By name: the Tune adapter sits above the config layer.
        importlib.import_module("rlfleet.tune").accept_builders()


def config_class(algo_name: str) -> type:
    """The builder class of a registered algorithm (``config_class("PPO")`` is ``PPOConfig``),
    made once per name."""
    if algo_name not in _CLASSES:
        name = config_class_name(algo_name)
        # Named after, and found in, the algorithm's package, so that pickle finds the class.
        _CLASSES[algo_name] = type(name, (AlgorithmConfig,), {
            "algo_name": algo_name, "__doc__": f"RLlib 2.x's builder of a {algo_name} config (see AlgorithmConfig).",
            "__module__": config_classes()[name][0], "__qualname__": name})
    return _CLASSES[algo_name]
