"""What every ``rlfleet`` command shares: exit codes, the usage error, the trainer lookup."""
from __future__ import annotations

from typing import List

from rlfleet.registry import get_trainer_class, list_algorithms

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # the shell's convention for "killed by SIGINT"


class UsageError(Exception):
    """A mistake in the command line or experiment file; reported without a traceback."""


# Called through the module (``common.lookup_trainer``) so that tests can inject a fake trainer.
def lookup_trainer(name: str) -> type:
    """The trainer class registered as `name` (ValueError when unknown)."""
    return get_trainer_class(name)


def available_algorithms() -> List[str]:
    """The registered algorithm names."""
    return list(list_algorithms())
