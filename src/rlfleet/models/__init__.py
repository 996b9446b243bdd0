# The first import of torch in a process goes through here: see rlfleet.utils.torch_import.
from rlfleet.utils.torch_import import import_torch

import_torch()
