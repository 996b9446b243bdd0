from rlfleet.algorithms.pg.pg import DEFAULT_CONFIG, PGTorchPolicy, PGTrainer, pg_loss
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "PGTorchPolicy", "PGTrainer", "pg_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
PGConfig = config_class("PG")
__all__ += ["PGConfig"]
