"""What ES and ARS share: the noise table, fitness shaping, the flat policy, the perturbation
workers and the trainer loop around them."""
from rlfleet.algorithms.evolution.collection import Collection
from rlfleet.algorithms.evolution.flat_policy import FlatLayout, FlatMLPActor, flat_layout, get_flat, set_flat
from rlfleet.algorithms.evolution.noise_table import SharedNoiseTable, make_noise
from rlfleet.algorithms.evolution.policy import EvolutionPolicy
from rlfleet.algorithms.evolution.ranks import centered_ranks, weighted_noise_sum
from rlfleet.algorithms.evolution.rollouts import PerturbationWorker, RolloutResult, RolloutTask
from rlfleet.algorithms.evolution.trainer import EvolutionTrainer
from rlfleet.algorithms.evolution.worker_pool import PerturbationPool

__all__ = ["Collection", "EvolutionPolicy", "EvolutionTrainer", "FlatLayout", "FlatMLPActor", "PerturbationPool",
           "PerturbationWorker", "RolloutResult", "RolloutTask", "SharedNoiseTable", "centered_ranks", "flat_layout",
           "get_flat", "make_noise", "set_flat", "weighted_noise_sum"]
