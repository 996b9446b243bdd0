from rlfleet.algorithms.qmix.qmix import DEFAULT_CONFIG, QMIXTrainer
from rlfleet.algorithms.qmix.qmix_model import QMIXModel, QMixer, VDNMixer
from rlfleet.algorithms.qmix.qmix_policy import QMIXTorchPolicy, qmix_loss

__all__ = ["DEFAULT_CONFIG", "QMIXModel", "QMIXTrainer", "QMIXTorchPolicy", "QMixer", "VDNMixer", "qmix_loss"]
