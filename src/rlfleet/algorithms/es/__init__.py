"""Evolution strategies (ES)."""
from rlfleet.algorithms.es.es import DEFAULT_CONFIG, ESTrainer

__all__ = ["DEFAULT_CONFIG", "ESTrainer"]
