"""One line, naming rlfleet's extra, for an optional package that is not installed.

Gymnasium says `pip install "gymnasium[box2d]"` for LunarLander without Box2D (after a long
traceback); rlfleet's extras pin the versions it is tested with, so the CLI says
`pip install "rlfleet[box2d]"` instead.
"""
from __future__ import annotations

import re
import sys
from typing import Optional

# Top-level module -> rlfleet's extra that installs it (pyproject.toml).
EXTRA_OF_MODULE = {
    "Box2D": "box2d", "pygame": "box2d", "ale_py": "atari", "mujoco": "mujoco", "minatar": "minatar",
    "moviepy": "video", "matplotlib": "plot", "minari": "minari", "envpool": "envpool",
    "pettingzoo": "pettingzoo", "ray": "ray", "onnx": "onnx", "onnxruntime": "onnx", "mlflow": "mlflow",
    "wandb": "wandb",
}
_GYMNASIUM_EXTRA = re.compile(r"gymnasium\[(\w+)\]")


def _extra_of(exc: BaseException) -> Optional[str]:
    gym_error = sys.modules.get("gymnasium.error")
    if gym_error is not None and isinstance(exc, gym_error.DependencyNotInstalled):
        match = _GYMNASIUM_EXTRA.search(str(exc))
        if match and match.group(1) in set(EXTRA_OF_MODULE.values()):
            return match.group(1)
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return EXTRA_OF_MODULE.get(exc.name.split(".")[0])
    return None


def missing_package_hint(exc: BaseException) -> Optional[str]:
    """The line to print for `exc` (or an exception it was raised from), when it is an
    optional package of an rlfleet extra that is not installed; None otherwise."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        extra = _extra_of(exc)
        if extra is not None:
            what = str(exc).split(",")[0].rstrip(".") if not isinstance(exc, ModuleNotFoundError) \
                else f"the optional package {exc.name!r} is not installed"
            return f"{what}; install it with: pip install \"rlfleet[{extra}]\" (run with -v for the traceback)"
        exc = exc.__cause__ or exc.__context__
    return None
