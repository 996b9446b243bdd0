"""All agents' transitions of one env step as one row: what MADDPG's replay buffer stores.

Each policy controls one agent; its sampled rows become n-step transitions (per agent, so
each agent's return is its own reward's), then rows of the same `(eps_id, t)` of every
agent are joined into one row with columns `<name>_<i>` (agent i in the
`multiagent.policies` order). In MPE every agent acts at every step, so every row finds
its partners; rows that do not (an agent that skipped a step) are dropped and counted.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from rlfleet.algorithms.maddpg.maddpg_policy import column
from rlfleet.policy.sample_batch import MultiAgentBatch, SampleBatch
from rlfleet.replay import N_STEPS, n_step_transitions

SB = SampleBatch
# Per agent: the n-step transition's columns, named as in the joint batch.
JOINT_COLUMNS = {SB.OBS: "obs", SB.NEXT_OBS: "new_obs", SB.ACTIONS: "actions", SB.REWARDS: "rewards",
                 SB.TERMINATEDS: "terminateds", N_STEPS: "n_steps"}


def joint_transitions(batch: MultiAgentBatch, agents: List[str], n_step: int, gammas: Dict[str, float]
                      ) -> Tuple[SampleBatch, int]:
    """`(joint batch, agent steps dropped)` of a sampled batch.

    Args:
        batch: the sampled batch; each policy of `agents` holds one agent's rows.
        agents: the policy ids in joint order.
        n_step: steps of each transition's return.
        gammas: each policy's discount.

    Raises:
        ValueError: when a policy's rows hold several agents of one episode.
    """
    per_agent = []
    for pid in agents:
        rows = batch.policy_batches.get(pid)
        if rows is None or rows.count == 0:
            return SampleBatch({}), sum(b.count for b in batch.policy_batches.values())
        _check_one_agent(pid, rows)
        transitions = n_step_transitions(rows, n_step, gammas[pid], columns=(*JOINT_COLUMNS, SB.EPS_ID, SB.T))
        per_agent.append(transitions)
    keys = [list(zip(b[SB.EPS_ID].tolist(), b[SB.T].tolist())) for b in per_agent]
    common = set(keys[0]).intersection(*keys[1:])
    order = [k for k in keys[0] if k in common]  # the first agent's (sampled) order
    out = {}
    for i, (transitions, agent_keys) in enumerate(zip(per_agent, keys)):
        where = {k: r for r, k in enumerate(agent_keys)}
        take = np.fromiter((where[k] for k in order), np.int64, len(order))
        for col, name in JOINT_COLUMNS.items():
            out[column(name, i)] = transitions[col][take]
    dropped = sum(len(k) for k in keys) - len(order) * len(agents)
    return SampleBatch(out), dropped


def _check_one_agent(pid: str, rows: SampleBatch) -> None:
    if SB.AGENT_INDEX not in rows:  # a single-agent env's batch
        return
    eps, agent = rows[SB.EPS_ID], rows[SB.AGENT_INDEX]
    pairs = set(zip(eps.tolist(), agent.tolist()))
    if len(pairs) != len(set(eps.tolist())):
        raise ValueError(f"MADDPG policy {pid!r} controls several agents of one episode; MADDPG needs one policy "
                         "per agent (map each agent to its own policy with 'multiagent.policy_mapping_fn')")
