"""`call_mapping_fn` calls a policy mapping function in whichever signature it was written:
RLlib 1.x's `(agent_id, episode, worker, **kwargs)`, RLlib 2.x's `(agent_id, episode,
**kwargs)`, `(agent_id, episode)` and the old one-argument `(agent_id)`."""
from __future__ import annotations

import pytest

from rlfleet.rollout.policy_mapping import call_mapping_fn

EPISODE, WORKER = object(), object()


def _pid(agent_id, episode=None, worker=None) -> str:
    """A policy id that says what the mapping function was given."""
    return f"a{agent_id}-episode:{episode is EPISODE}-worker:{worker is WORKER}"


@pytest.mark.parametrize("fn, expected", [
    # RLlib 1.x's signature: the worker arrives.
    (lambda agent_id, episode, worker, **kwargs: _pid(agent_id, episode, worker), _pid(3, EPISODE, WORKER)),
    # RLlib 2.x's: no `worker` parameter; it lands in **kwargs, where 2.x scripts ignore it.
    (lambda agent_id, episode, **kwargs: _pid(agent_id, episode, kwargs.get("worker")), _pid(3, EPISODE, WORKER)),
    (lambda agent_id, episode: _pid(agent_id, episode), _pid(3, EPISODE)),
    (lambda agent_id: _pid(agent_id), _pid(3)),
], ids=["rllib1", "rllib2", "agent-episode", "agent"])
def test_each_signature_is_called_with_what_it_takes(fn, expected):
    assert call_mapping_fn(fn, 3, EPISODE, WORKER) == expected


def test_a_non_string_policy_id_is_an_error():
    with pytest.raises(ValueError, match="must return a policy id"):
        call_mapping_fn(lambda agent_id, episode, **kwargs: 0, 0, EPISODE, WORKER)
