"""The golden checkpoints (tests/data/golden_checkpoints/): which algorithm trains on which env
with which tiny config, the families the fast subset covers, and how observations and the
actions a restored policy takes on them are recorded beside each checkpoint.

`benchmarks/make_golden_checkpoints.py` writes them with these helpers and
tests/checkpoint/test_golden.py reads them back with the same ones, so what is recorded and
what is compared cannot drift apart. The checkpoints themselves are data: once written, a
format's folder (`format_<N>/`) is never regenerated, only added to (a new algorithm) — they
stand for the checkpoints users already hold.

    golden_checkpoints/format_<N>/<ALGO>/checkpoint_<iteration>/   the checkpoint
    golden_checkpoints/format_<N>/<ALGO>/golden.json               what it must do
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

from tests.algorithm_cases import TINY_CONFIGS
from tests.helpers import REPO_ROOT

GOLDEN_ROOT = REPO_ROOT / "tests" / "data" / "golden_checkpoints"
GOLDEN_FILE = "golden.json"
# Enough that a policy acting at random matches the recorded discrete actions by chance rarely (2^-8).
OBSERVATIONS_PER_POLICY = 8
DIST_INPUTS = "action_dist_inputs"  # the policy network's outputs, recorded beside the actions

_DISCRETE_ENV = "CartPole-v1"
_BOX_ENV = "Pendulum-v1"
# Env per algorithm: Gymnasium ids and rlfleet's example envs, never a test module's class (a
# golden checkpoint must keep loading when tests are reorganised).
GOLDEN_ENVS: Dict[str, str] = {
    **{algo: _DISCRETE_ENV for algo in ("PPO", "DDPPO", "PG", "DQN", "SimpleQ", "A2C", "A3C", "IMPALA", "APPO",
                                         "APEX", "BC", "MARWIL", "ES", "ARS", "R2D2", "APEX_R2D2",
                                         "DreamerV3", "Dreamer")},
    **{algo: _BOX_ENV for algo in ("SAC", "DDPG", "TD3", "APEX_DDPG", "CQL", "CRR", "IQL", "RNNSAC", "DT")},
    "BanditLinUCB": "rlfleet.env.examples.bandits:LinearContextualBandit",
    "BanditLinTS": "rlfleet.env.examples.bandits:LinearContextualBandit",
    "MADDPG": "rlfleet.env.examples.maddpg_envs:MatchTargetEnv",
    "QMIX": "rlfleet.env.examples.team_envs:two_step_team",
    "MAML": "rlfleet.env.examples.point_navigation:PointNavigationEnv",
    "MBMPO": "rlfleet.env.examples.pendulum_with_reward:PendulumWithReward",
    "AlphaZero": "rlfleet.env.examples.sparse_corridor:SparseCorridorEnv",  # its search needs get_state / set_state
    "SlateQ": "rlfleet.env.examples.interest_evolution:InterestEvolutionEnv",  # slates of candidate documents
}

# Beyond each algorithm's tiny config: the state a checkpoint can hold is all there (replay
# buffers, observation filters), small.
_EXTRA: Dict[str, Dict[str, Any]] = {
    "PPO": {"observation_filter": "MeanStdFilter"},
    "A2C": {"observation_filter": "MeanStdFilter"},
    "ES": {"observation_filter": "MeanStdFilter"},
    "QMIX": {"mixer": "qmix", "mixing_embed_dim": 4, "model": {"fcnet_hiddens": [16], "lstm_cell_size": 8}},
}
# (The APEX family keeps its replay in shards, which checkpoints do not hold yet.)
_REPLAY = {"DQN", "SimpleQ", "SAC", "DDPG", "TD3", "CQL", "CRR", "IQL", "R2D2", "RNNSAC", "MADDPG", "QMIX",
           "DreamerV3", "Dreamer", "SlateQ"}

# Each family has a case in the fast suite (tests/checkpoint/test_golden.py checks).
FAMILIES: Dict[str, Tuple[str, ...]] = {
    "on-policy": ("PPO", "PG", "A2C", "A3C", "DDPPO"),
    "asynchronous": ("APPO", "IMPALA"),
    "off-policy, discrete": ("DQN", "SimpleQ", "APEX"),
    "off-policy, continuous": ("SAC", "DDPG", "TD3", "APEX_DDPG"),
    "offline": ("MARWIL", "BC", "CQL", "CRR", "IQL", "DT"),
    "recurrent replay": ("R2D2", "APEX_R2D2", "RNNSAC"),
    "bandits": ("BanditLinTS", "BanditLinUCB"),
    "perturbation search": ("ARS", "ES"),
    "multi-agent": ("MADDPG", "QMIX"),
    "meta-learning": ("MAML", "MBMPO"),
    "tree search": ("AlphaZero",),
    "model-based": ("Dreamer", "DreamerV3"),
    "slate recommendation": ("SlateQ",),
}
# Learns on remote workers only: needs a (local, loopback) Ray session, ~15 s: marked slow.
NEEDS_RAY = {"DDPPO"}
SLOW = NEEDS_RAY


def golden_config(algo: str) -> Dict[str, Any]:
    """The config the golden checkpoint of `algo` is trained with (its env apart)."""
    config = {"seed": 0, "num_workers": 0, "log_sys_usage": False, **TINY_CONFIGS[algo], **_EXTRA.get(algo, {})}
    if algo in _REPLAY:
        config["store_buffer_in_checkpoints"] = True
    return config


def format_folders() -> List[Path]:
    """Every `format_<N>/` folder of golden checkpoints, oldest format first."""
    found = [p for p in GOLDEN_ROOT.glob("format_*") if p.is_dir() and p.name[len("format_"):].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len("format_"):]))


def golden_cases() -> List[Tuple[str, Path]]:
    """(algorithm, its folder) of every golden checkpoint, of every format."""
    return [(case.name, case) for folder in format_folders() for case in sorted(folder.iterdir()) if case.is_dir()]


def checkpoint_of(case: Path) -> Path:
    """The checkpoint folder of a golden case folder."""
    found = [p for p in case.iterdir() if p.is_dir() and p.name.startswith("checkpoint_")]
    assert len(found) == 1, f"{case} must hold exactly one checkpoint_<n>/ folder, holds {found}"
    return found[0]


def folder_bytes(path: Path) -> int:
    """The bytes of every file under `path`."""
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


# --- values <-> JSON: observations and actions of any Gymnasium space -------------------
def to_json(value: Any) -> Any:
    """A space's value (arrays, numbers, dicts, tuples) as JSON, dtypes kept."""
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return {"array": value.item(), "dtype": str(value.dtype)}
    if isinstance(value, dict):
        return {"dict": {str(k): to_json(v) for k, v in value.items()}}
    if isinstance(value, (tuple, list)):
        return {"tuple": [to_json(v) for v in value]}
    if isinstance(value, (bool, int, float)):
        return value
    raise TypeError(f"cannot record {value!r} ({type(value).__name__})")


def from_json(value: Any) -> Any:
    """Inverse of `to_json`."""
    if isinstance(value, dict) and "array" in value:
        array = np.asarray(value["array"], dtype=value["dtype"])
        return array if array.ndim else array[()]
    if isinstance(value, dict) and "dict" in value:
        return {k: from_json(v) for k, v in value["dict"].items()}
    if isinstance(value, dict) and "tuple" in value:
        return tuple(from_json(v) for v in value["tuple"])
    return value


def leaves(value: Any) -> List[np.ndarray]:
    """The arrays of a (nested) value, in order."""
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in leaves(value[k])]
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [np.asarray(value)]


# --- acting ------------------------------------------------------------------------------
def policy_ids(trainer: Any) -> List[str]:
    """The trainer's policies, sorted."""
    return sorted(trainer.workers.local_worker().policy_map.keys())


def sample_observations(trainer: Any, policy_id: str, n: int = OBSERVATIONS_PER_POLICY) -> List[Any]:
    """`n` observations from the raw space of the env the policy acts in, seeded."""
    space = trainer.workers.local_worker().preprocessors[policy_id].original_space
    space.seed(0)
    return [space.sample() for _ in range(n)]


def act(trainer: Any, policy_id: str, observations: List[Any]) -> Tuple[List[Any], List[np.ndarray]]:
    """The actions `policy_id` takes on `observations` without exploration, one after another
    (a recurrent policy carries its state from one to the next), and the network outputs they
    come from (`action_dist_inputs`; none for the bandits, which have no network)."""
    policy = trainer.get_policy(policy_id)
    state = policy.get_initial_state() or None
    actions, outputs = [], []
    for obs in observations:
        action, state_out, extra = trainer.compute_single_action(obs, state=state, policy_id=policy_id,
                                                                 explore=False, full_fetch=True)
        state = state_out if state is not None else None
        actions.append(action)
        if DIST_INPUTS in extra:
            outputs.append(np.asarray(extra[DIST_INPUTS]))
    return actions, outputs


def record(trainer: Any) -> Dict[str, Any]:
    """{policy id: {observations, actions, action_dist_inputs}} as JSON, for golden.json."""
    out = {}
    for pid in policy_ids(trainer):
        observations = sample_observations(trainer, pid)
        actions, outputs = act(trainer, pid, observations)
        out[pid] = {"observations": [to_json(o) for o in observations], "actions": [to_json(a) for a in actions],
                    DIST_INPUTS: [to_json(x) for x in outputs]}
    return out


def read_golden(case: Path) -> Dict[str, Any]:
    with open(case / GOLDEN_FILE, encoding="utf-8") as f:
        return json.load(f)


# --- a synthetic older format (version 0), to exercise migrations on a real checkpoint --------
VERSION_0_CHANGE = "policy weights move from 'model' to 'weights', the manifest's 'timesteps' to 'counters'"


def migrate_version_0(manifest: Dict[str, Any], state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The migration 0 -> 1 of the synthetic format `write_version_0` writes."""
    manifest["counters"] = manifest.pop("timesteps")
    for policy in state["worker"]["policies"].values():
        policy["weights"] = policy.pop("model")
    return manifest, state


def write_version_0(source: Path, target: Path) -> None:
    """Writes the checkpoint `source` at `target` as the synthetic format 0 holds it: each
    policy's weights under "model" (so in its state file, not weights.safetensors) and the
    manifest's counters under "timesteps"; checksummed and verified like any checkpoint."""
    from rlfleet.checkpoint import read_checkpoint, write_checkpoint

    ck = read_checkpoint(str(source))
    state = ck.state
    for policy in state["worker"]["policies"].values():
        policy["model"] = policy.pop("weights")
    manifest = {k: v for k, v in ck.manifest.items()
                if k not in ("format", "format_version", "files", "state_index", "policy_folders")}
    manifest["timesteps"] = manifest.pop("counters")
    write_checkpoint(str(target), manifest, state)
    # write_checkpoint stamps today's version; the manifest is not among the files it checksums.
    path = target / "manifest.json"
    written = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(dict(written, format_version=0)), encoding="utf-8")
