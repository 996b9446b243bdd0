from rlfleet.algorithms.pg.pg import DEFAULT_CONFIG, PGTorchPolicy, PGTrainer, pg_loss

__all__ = ["DEFAULT_CONFIG", "PGTorchPolicy", "PGTrainer", "pg_loss"]
