"""`PolicySpec`: how to build one policy of a (multi-agent) trainer."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional


class PolicySpec(NamedTuple):
    """One entry of ``config["multiagent"]["policies"]``; every field may be left None.

    Args:
        policy_class: the Policy class; None means the trainer's default policy class.
        observation_space: None means inferred from the env.
        action_space: None means inferred from the env.
        config: overrides merged into the trainer config for this policy only.
    """

    policy_class: Optional[type] = None
    observation_space: Any = None
    action_space: Any = None
    config: Optional[dict] = None
