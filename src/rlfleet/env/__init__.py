from rlfleet.env.checks import EnvCheckError, EnvError
from rlfleet.env.env_context import EnvContext
from rlfleet.env.external_env import ExternalEnv
from rlfleet.env.external_multi_agent_env import ExternalMultiAgentEnv
from rlfleet.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from rlfleet.env.registry import register_env, resolve_env
from rlfleet.env.task_settable import TaskSettableEnv
from rlfleet.env.vector_env import VectorEnv

__all__ = ["EnvCheckError", "EnvError", "EnvContext", "ExternalEnv", "ExternalMultiAgentEnv", "MultiAgentEnv", "make_multi_agent", "register_env",
           "resolve_env", "TaskSettableEnv", "VectorEnv"]
