"""Two (or `num_agents`) CartPoles as one MultiAgentEnv: agent i balances its own pole.

    from rlfleet.env.examples.multi_agent_cartpole import MultiAgentCartPole
    PPOTrainer(env=MultiAgentCartPole, config={"env_config": {"num_agents": 2}, "multiagent": {
        "policies": {"p0", "p1"}, "policy_mapping_fn": lambda aid, episode, worker, **kw: f"p{aid}"}})

Each agent leaves when its pole falls (or its copy hits the 500-step limit); the episode ends
when all have, and its reward is the sum over agents.
"""
from __future__ import annotations

from rlfleet.env.multi_agent_env import make_multi_agent

MultiAgentCartPole = make_multi_agent("CartPole-v1")
MultiAgentCartPole.__module__ = __name__
MultiAgentCartPole.__name__ = MultiAgentCartPole.__qualname__ = "MultiAgentCartPole"

__all__ = ["MultiAgentCartPole"]
