"""Small example envs used by tests and tuned examples (memory, pixels)."""
from rlfleet.env.examples.memory import RepeatFirstObsEnv, StatelessCartPole
from rlfleet.env.examples.pixels import BrightPixelEnv

__all__ = ["RepeatFirstObsEnv", "StatelessCartPole", "BrightPixelEnv"]
