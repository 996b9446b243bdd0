from rlfleet.algorithms.maml.adaptation import adapt, forward_with, inner_loss
from rlfleet.algorithms.maml.maml import ALGO_KEYS, DEFAULT_CONFIG, MAMLTrainer
from rlfleet.algorithms.maml.maml_policy import MAMLTorchPolicy
from rlfleet.algorithms.maml.meta_loss import maml_loss
from rlfleet.algorithms.maml.task_rollouts import TaskRollout, meta_env, rollout_task, rollout_tasks
from rlfleet.config.builder import config_class

__all__ = ["ALGO_KEYS", "DEFAULT_CONFIG", "MAMLTrainer", "MAMLTorchPolicy", "TaskRollout", "adapt", "forward_with",
           "inner_loss", "maml_loss", "meta_env", "rollout_task", "rollout_tasks"]

# RLlib 2.x's config builders (rlfleet/config/builder.py): XConfig().training(...).build().
MAMLConfig = config_class("MAML")
__all__ += ["MAMLConfig"]
