"""A TorchPolicy's state as NumPy arrays and JSON-able values (what checkpoints hold): its
optimizers' states by name, and its random streams, re-derived when the state came from
another worker."""
from __future__ import annotations

import hashlib
import secrets
from typing import Any, Dict, Tuple

import numpy as np
import torch

from rlfleet.utils.optimizer_state import load_optimizer_state, optimizer_state
from rlfleet.utils.seeding import derive_seed


def policy_rngs(config: Dict[str, Any], policy_id: str) -> Tuple[torch.Generator, np.random.Generator]:
    """The policy's torch and NumPy random streams, seeded from `seed` (derived per worker
    and policy id, so that no two draw the same numbers) or, without one, from fresh entropy
    (without touching, or reseeding as torch.seed() does, the global RNG)."""
    seed = config.get("seed")
    base = derive_seed(seed, config.get("worker_index", 0), policy_id) if seed is not None else None
    if base is None:
        base = secrets.randbits(63)
    generator = torch.Generator()
    generator.manual_seed(base)
    return generator, np.random.default_rng(base)


def rng_state(policy) -> Dict[str, Any]:
    """The policy's torch and NumPy random streams, with the worker they belong to."""
    return {
        "worker_index": int(policy.config.get("worker_index", 0)),
        "torch": policy.generator.get_state().numpy().copy(),
        "numpy": policy.np_random.bit_generator.state,
    }


def saved_optimizer_states(policy, state: Dict[str, Any]) -> Dict[str, Any]:
    """`{name: saved optimizer state}` from `state`; states saved before policies had
    several optimizers (checkpoints of format 1 written then) kept the first one under
    `"optimizer"` and the others under `"<name>_optimizer"`."""
    if "optimizers" in state:
        saved = dict(state["optimizers"])
    else:
        saved = {name: state[f"{name}_optimizer"] for name in policy.optimizers if f"{name}_optimizer" in state}
        if "optimizer" in state:
            saved[next(iter(policy.optimizers))] = state["optimizer"]
    unknown = sorted(set(saved) - set(policy.optimizers))
    if unknown:
        raise ValueError(f"the saved policy state has optimizers {unknown} that {type(policy).__name__} does not "
                         f"have (its optimizers: {sorted(policy.optimizers)}); restore it into the policy class "
                         "that saved it")
    return saved


def set_rng_state(policy, rng: Dict[str, Any]) -> None:
    """Restores the streams `rng_state` saved; those of another worker seed this worker's own."""
    torch_state = torch.as_tensor(np.asarray(rng["torch"], dtype=np.uint8))
    if int(rng.get("worker_index", 0)) == int(policy.config.get("worker_index", 0)):
        policy.generator.set_state(torch_state)
        policy.np_random.bit_generator.state = rng["numpy"]
        return
    # The state of another worker (a checkpoint holds the local worker's): derive this
    # worker's own streams from it, so that workers never draw the same numbers.
    digest = hashlib.sha256(torch_state.numpy().tobytes()).hexdigest()
    seed = derive_seed(digest, policy.config.get("worker_index", 0), policy.policy_id)
    policy.generator.manual_seed(seed)
    # Set the state in place: exploration holds the same Generator object.
    policy.np_random.bit_generator.state = np.random.default_rng(seed).bit_generator.state


__all__ = ["load_optimizer_state", "optimizer_state", "policy_rngs", "rng_state", "saved_optimizer_states", "set_rng_state"]
