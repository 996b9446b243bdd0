"""The trainer layer: `Trainer` (trainer.py) and the jobs it hands out.

- trainer.py: `Trainer`, building the workers from one config and running train() iterations;
- trainer_policies.py, trainer_state.py: its policy-facing API, and its state and checkpoints;
- trainer_checks.py: checks of settings only the built policies can judge;
- evaluation.py, evaluate_checkpoint.py: evaluation during training and of a checkpoint;
- fault_tolerance.py: what a worker failure does; resources.py: what a trainer asks a cluster for;
- acting.py: actions for raw observations.

`from rlfleet.trainer import Trainer` loads the trainer on first use, so importing one of
these modules alone (e.g. `rlfleet.trainer.resources`) costs no more than that module.
"""
from rlfleet.module_aliases import lazy_exports

__all__ = ["Trainer", "WorkerFailureError", "ResourceRequest", "MAX_WORKER_FAILURE_RETRIES"]

__getattr__ = lazy_exports(__name__, {
    "Trainer": ("rlfleet.trainer.trainer", "Trainer"),
    "WorkerFailureError": ("rlfleet.trainer.fault_tolerance", "WorkerFailureError"),
    "ResourceRequest": ("rlfleet.trainer.resources", "ResourceRequest"),
    "MAX_WORKER_FAILURE_RETRIES": ("rlfleet.trainer.fault_tolerance", "MAX_WORKER_FAILURE_RETRIES"),
})
