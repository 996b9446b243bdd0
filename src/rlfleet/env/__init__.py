from rlfleet.env.env_context import EnvContext
from rlfleet.env.registry import register_env, resolve_env
from rlfleet.env.vector_env import VectorEnv

__all__ = ["EnvContext", "register_env", "resolve_env", "VectorEnv"]
