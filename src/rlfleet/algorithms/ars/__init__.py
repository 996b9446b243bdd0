"""Augmented random search (ARS)."""
from rlfleet.algorithms.ars.ars import DEFAULT_CONFIG, ARSTrainer
from rlfleet.config.builder import config_class

__all__ = ["ARSTrainer", "DEFAULT_CONFIG"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
ARSConfig = config_class("ARS")
__all__ += ["ARSConfig"]
