"""``python -m rlfleet.cli``: the ``rlfleet`` command."""
import sys

from rlfleet.cli.main import main

sys.exit(main())
