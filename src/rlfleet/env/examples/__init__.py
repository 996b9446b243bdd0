"""Small example envs used by tests and tuned examples (memory, pixels, curriculum)."""
from rlfleet.env.examples.curriculum import CurriculumCorridorEnv, corridor_curriculum
from rlfleet.env.examples.memory import RepeatFirstObsEnv, StatelessCartPole, StatelessPendulum
from rlfleet.env.examples.pixels import BrightPixelEnv

__all__ = ["RepeatFirstObsEnv", "StatelessCartPole", "StatelessPendulum", "BrightPixelEnv", "CurriculumCorridorEnv", "corridor_curriculum"]
