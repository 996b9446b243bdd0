"""DreamerV3: world model (world_model.py), actor-critic in imagination (actor_critic.py),
losses (losses.py), policy (dreamerv3_policy.py), trainer (dreamerv3.py), export (export.py)."""
from rlfleet.algorithms.dreamerv3.dreamerv3 import DEFAULT_CONFIG, DreamerTrainer, DreamerV3Trainer
from rlfleet.algorithms.dreamerv3.dreamerv3_policy import DreamerV3TorchPolicy, dreamerv3_loss
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "DreamerTrainer", "DreamerV3Trainer", "DreamerV3TorchPolicy", "dreamerv3_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
DreamerV3Config = config_class("DreamerV3")
DreamerConfig = config_class("Dreamer")
__all__ += ["DreamerV3Config", "DreamerConfig"]
