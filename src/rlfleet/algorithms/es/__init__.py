"""Evolution strategies (ES)."""
from rlfleet.algorithms.es.es import DEFAULT_CONFIG, ESTrainer
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "ESTrainer"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
ESConfig = config_class("ES")
__all__ += ["ESConfig"]
