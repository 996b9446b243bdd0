"""The software a checkpoint or an exported policy was written with, recorded in its
metadata (`rlfleet.checkpoint`, `rlfleet.policy.export`) so that a reader can tell why a
file does not load."""
from __future__ import annotations

import platform
from typing import Dict


def software_versions() -> Dict[str, str]:
    """rlfleet, Python, torch, NumPy, Gymnasium and safetensors versions."""
    import gymnasium
    import numpy as np
    import safetensors
    import torch

    from rlfleet import __version__

    return {"rlfleet": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__, "gymnasium": gymnasium.__version__, "safetensors": safetensors.__version__}
