"""Small example envs used by tests and tuned examples (memory, pixels, curriculum, the two-step game,
point navigation for meta-learning)."""
from rlfleet.env.examples.curriculum import CurriculumCorridorEnv, corridor_curriculum
from rlfleet.env.examples.memory import RepeatFirstObsEnv, StatelessCartPole, StatelessPendulum
from rlfleet.env.examples.pixels import BrightPixelEnv
from rlfleet.env.examples.point_navigation import PointNavigationEnv
from rlfleet.env.examples.two_step_game import TwoStepGame

__all__ = ["RepeatFirstObsEnv", "StatelessCartPole", "StatelessPendulum", "BrightPixelEnv", "CurriculumCorridorEnv",
           "corridor_curriculum", "TwoStepGame", "PointNavigationEnv"]
