"""What the multi-agent sampler does when its worker removes a policy mid-run: the agents
mapped to it are re-mapped, and what they collected is dropped."""
from __future__ import annotations

from typing import Callable, List

from rlfleet.rollout.multi_agent_episode import MultiAgentEpisode
from rlfleet.rollout.policy_mapping import call_mapping_fn


def remap_removed_policy(policy_id: str, finished: List[MultiAgentEpisode], running: List[MultiAgentEpisode],
                         worker) -> None:
    """Called after `worker` removed `policy_id` (and set its new mapping function).

    Agents of `running` episodes mapped to it are re-mapped through the worker's current
    `policy_mapping_fn`; what they collected so far is dropped (there is no policy left to
    postprocess or train on it), and so are their rows in `finished` episodes not yet
    batched. Agents joining a running episode later are mapped as at its start, unless that
    mapping names a policy that no longer exists.

    Raises:
        ValueError: when the mapping sends an agent of a running episode to a policy the
            worker does not have.
    """
    for ep in finished:
        for aid in [a for a in ep.rows if ep.policy_for(a) == policy_id]:
            ep.num_rows -= len(ep.rows.pop(aid))
    for ep in running:
        ep._mapping_fn = _fallback_mapping(ep._mapping_fn, worker)
        for aid in [a for a, pid in ep._policy.items() if pid == policy_id]:
            new_pid = call_mapping_fn(worker.policy_mapping_fn, aid, ep, worker)
            if new_pid not in worker.policy_map:
                raise ValueError(
                    f"remove_policy({policy_id!r}): agent {aid!r} of a running episode used it, and the "
                    f"policy mapping now returns {new_pid!r}, which is not a policy of this worker either; "
                    f"pass policy_mapping_fn=... mapping agents to one of {sorted(worker.policy_map)}")
            ep._policy[aid] = new_pid
            if aid in ep.rows:
                ep.num_rows -= len(ep.rows.pop(aid))
            ep.open.pop(aid, None)
            ep.memory.pop(aid, None)  # a recurrent agent starts afresh with its new policy
            if aid in ep._last_raw_obs and aid not in ep.done_agents:
                pp, filt = worker.preprocessors[new_pid], worker.filters[new_pid]
                ep._last_obs[aid] = filt(pp.transform(ep._last_raw_obs[aid]), update=False)


def _fallback_mapping(mapping: Callable, worker) -> Callable:
    """`mapping`, or the worker's current mapping where it names a removed policy."""

    def mapped(aid, episode):
        pid = mapping(aid, episode)
        if pid in worker.policy_map:
            return pid
        return call_mapping_fn(worker.policy_mapping_fn, aid, episode, worker)

    return mapped


__all__ = ["remap_removed_policy"]
