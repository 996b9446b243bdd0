"""MultiAgentEpisode: one running episode of a MultiAgentEnv, as callbacks see it.

It also keeps, per agent, the transitions collected since the last batch was built
(the multi-agent sampler owns that part; callbacks use the accessors).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from rlfleet.rollout.episode import RolloutMetrics

AgentID = Any

# An agent's step in flight (`MultiAgentEpisode.open`): what it acted on, until its outcome
# closes it into a row. `STEP_ACTED` is its acting group's `(extra outputs {column: [B, ...]},
# actions [B, ...])`, `STEP_J` the agent's row there; `STEP_REWARD` collects the (clipped)
# rewards given to it meanwhile.
STEP_OBS, STEP_ACTION, STEP_ACTED, STEP_J, STEP_T, STEP_REWARD = range(6)


class MultiAgentEpisode:
    """Per-agent view of one episode.

    Attributes:
        episode_id: unique id (the `eps_id` column of its samples).
        env_index: which sub-env of the worker runs it (also `env_id`).
        length: env steps so far.
        total_reward: sum of all agents' (unclipped) rewards so far.
        agent_rewards: `{(agent_id, policy_id): summed reward}`.
        custom_metrics, user_data, hist_data, media: as for single-agent episodes.
    """

    def __init__(self, episode_id: int, env_index: int, policy_mapping_fn: Callable[[AgentID], str]):
        self.episode_id = episode_id
        self.env_index = env_index
        self.env_id = env_index
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards: Dict[Tuple[AgentID, str], float] = {}
        self.custom_metrics: Dict[str, float] = {}
        self.user_data: Dict[str, Any] = {}
        self.hist_data: Dict[str, List[float]] = {}
        self.media: Dict[str, Any] = {}
        # The mapping is fixed at the episode's start: a later `policy_mapping_fn` change
        # applies to new episodes only (agents joining later still use this one).
        self._mapping_fn = policy_mapping_fn
        self._policy: Dict[AgentID, str] = {}
        self._agent_index: Dict[AgentID, int] = {}
        self._last_obs: Dict[AgentID, Any] = {}
        self._last_raw_obs: Dict[AgentID, Any] = {}
        self._last_info: Dict[AgentID, Any] = {}
        self._last_action: Dict[AgentID, Any] = {}
        self._prev_action: Dict[AgentID, Any] = {}
        self._last_reward: Dict[AgentID, float] = {}
        self._prev_reward: Dict[AgentID, float] = {}
        # The acting group's `{column: [B, ...]}` and the agent's row there (read on demand).
        self._last_extra: Dict[AgentID, Tuple[Dict[str, Any], int]] = {}
        self._last_terminated: Dict[AgentID, bool] = {}
        self._last_truncated: Dict[AgentID, bool] = {}
        # Sampler bookkeeping.
        self.done_agents: set = set()
        self.open: Dict[AgentID, Any] = {}  # agent -> the step it acted on, awaiting its outcome
        # agent -> its closed transitions not yet batched: `(step, next_obs, terminated, done)`
        self.rows: Dict[AgentID, List[tuple]] = {}
        self.num_rows = 0
        # Recurrent policies (rollout/agent_memory.py): agent -> (its state going into its next
        # step, its last step); an agent without an entry starts from its policy's initial state.
        self.memory: Dict[AgentID, Tuple[List[Any], list]] = {}

    # --- mapping ---------------------------------------------------------------------------
    def policy_for(self, agent_id: AgentID = 0) -> str:
        """The policy id of `agent_id` in this episode (mapped on first use, then fixed)."""
        pid = self._policy.get(agent_id)
        if pid is None:
            pid = self._policy[agent_id] = self._mapping_fn(agent_id, self)
            self._agent_index[agent_id] = len(self._agent_index)
        return pid

    def agent_index(self, agent_id: AgentID) -> int:
        self.policy_for(agent_id)
        return self._agent_index[agent_id]

    def get_agents(self) -> List[AgentID]:
        """Agents seen in this episode so far, in order of appearance."""
        return list(self._agent_index)

    def policies_in_use(self) -> set:
        return set(self._policy.values())

    # --- RLlib 1.x's accessors (its callbacks use them) ---------------------------------------
    def last_observation_for(self, agent_id: AgentID = 0):
        """The agent's last observation, preprocessed and filtered (what its policy saw)."""
        return self._last_obs.get(agent_id)

    def last_raw_obs_for(self, agent_id: AgentID = 0):
        """The agent's last observation as the env (and `observation_fn`) gave it."""
        return self._last_raw_obs.get(agent_id)

    def last_info_for(self, agent_id: AgentID = 0):
        return self._last_info.get(agent_id)

    def last_action_for(self, agent_id: AgentID = 0):
        return self._last_action.get(agent_id)

    def prev_action_for(self, agent_id: AgentID = 0):
        return self._prev_action.get(agent_id)

    def last_reward_for(self, agent_id: AgentID = 0) -> float:
        return self._last_reward.get(agent_id, 0.0)

    def prev_reward_for(self, agent_id: AgentID = 0) -> float:
        return self._prev_reward.get(agent_id, 0.0)

    def last_extra_action_outs_for(self, agent_id: AgentID = 0) -> Dict[str, Any]:
        """The extra outputs of the agent's last `compute_actions` (its row of each column)."""
        ref = self._last_extra.get(agent_id)
        if ref is None:
            return {}
        extra, j = ref
        return {k: v[j] for k, v in extra.items()}

    last_pi_info_for = last_extra_action_outs_for

    def last_terminated_for(self, agent_id: AgentID = 0) -> bool:
        return self._last_terminated.get(agent_id, False)

    def last_truncated_for(self, agent_id: AgentID = 0) -> bool:
        return self._last_truncated.get(agent_id, False)

    def last_done_for(self, agent_id: AgentID = 0) -> bool:
        return self.last_terminated_for(agent_id) or self.last_truncated_for(agent_id)

    def to_metrics(self) -> RolloutMetrics:
        return RolloutMetrics(
            int(self.length), float(self.total_reward), dict(self.custom_metrics),
            {k: list(v) for k, v in self.hist_data.items()}, dict(self.media),
            agent_rewards=dict(self.agent_rewards),
        )
