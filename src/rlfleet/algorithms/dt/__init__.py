from rlfleet.algorithms.dt.dt import ALGO_KEYS, DEFAULT_CONFIG, DTTrainer
from rlfleet.algorithms.dt.dt_model import DTModel
from rlfleet.algorithms.dt.dt_policy import DTTorchPolicy, dt_loss
from rlfleet.algorithms.dt.segments import EpisodeAssembler, SegmentBuffer, returns_to_go
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "DTModel", "DTTorchPolicy", "DTTrainer", "EpisodeAssembler",
           "SegmentBuffer", "dt_loss", "returns_to_go"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): DTConfig().training(...).build().
DTConfig = config_class("DT")
__all__ += ["DTConfig"]
