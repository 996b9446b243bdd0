from rlfleet.algorithms.qmix.qmix import DEFAULT_CONFIG, QMIXTrainer
from rlfleet.algorithms.qmix.qmix_model import QMIXModel, QMixer, VDNMixer
from rlfleet.algorithms.qmix.qmix_policy import QMIXTorchPolicy, qmix_loss
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "QMIXModel", "QMIXTrainer", "QMIXTorchPolicy", "QMixer", "VDNMixer", "qmix_loss"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
QMIXConfig = config_class("QMIX")
__all__ += ["QMIXConfig"]
