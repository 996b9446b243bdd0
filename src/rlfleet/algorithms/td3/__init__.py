from rlfleet.algorithms.td3.td3 import DEFAULT_CONFIG, TD3Trainer

__all__ = ["DEFAULT_CONFIG", "TD3Trainer"]
