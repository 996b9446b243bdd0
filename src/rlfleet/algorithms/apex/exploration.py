"""The old home of Ape-X DDPG's exploration, kept so that configs and checkpoints naming
"rlfleet.algorithms.apex.exploration.PerWorkerOrnsteinUhlenbeckNoise" still load; the class
lives in rlfleet/exploration/per_worker.py (registered as "PerWorkerOrnsteinUhlenbeckNoise")."""
from rlfleet.exploration.per_worker import PerWorkerOrnsteinUhlenbeckNoise

__all__ = ["PerWorkerOrnsteinUhlenbeckNoise"]
