from rlfleet.algorithms.slateq.exploration import SlateEpsilonGreedy
from rlfleet.algorithms.slateq.slateq import DEFAULT_CONFIG, SlateQTrainer
from rlfleet.algorithms.slateq.slateq_model import SlateQModel, best_slates, slate_values
from rlfleet.algorithms.slateq.slateq_policy import SlateQTorchPolicy, slateq_loss
from rlfleet.config.builder import config_class

__all__ = ["DEFAULT_CONFIG", "SlateEpsilonGreedy", "SlateQModel", "SlateQTorchPolicy",
           "SlateQTrainer", "best_slates", "slate_values", "slateq_loss"]

# RLlib 2.x's config builder (rlfleet/config/builder.py): SlateQConfig().training(...).build().
SlateQConfig = config_class("SlateQ")
__all__ += ["SlateQConfig"]
