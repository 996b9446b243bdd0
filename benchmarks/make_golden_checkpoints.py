"""Writes the golden checkpoints of today's checkpoint format: one per registered algorithm,
tiny nets trained for an iteration or two, with replay buffers and observation filters where
the algorithm has them, into tests/data/golden_checkpoints/format_<N>/<ALGO>/.

Beside each checkpoint, golden.json records a few observations per policy and the actions the
*restored* policy takes on them without exploration; tests/checkpoint/test_golden.py loads
every golden checkpoint with the code of the day and checks it acts the same and trains on.
A format's folder stands for checkpoints users already hold: existing cases are never
rewritten (add a new algorithm's case; a new format version gets a new folder).

    .venv/bin/python benchmarks/make_golden_checkpoints.py              # the missing cases
    .venv/bin/python benchmarks/make_golden_checkpoints.py --algo PPO --out /tmp/golden
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlfleet import __version__  # noqa: E402
from rlfleet.checkpoint import FORMAT_VERSION  # noqa: E402
from rlfleet.registry import get_trainer_class, list_algorithms  # noqa: E402
from rlfleet.trainer import Trainer  # noqa: E402
from tests.golden_cases import (  # noqa: E402
    DIST_INPUTS, GOLDEN_ENVS, GOLDEN_FILE, GOLDEN_ROOT, NEEDS_RAY, act, folder_bytes, from_json, golden_config, leaves, record,
)

# An asynchronous learner (IMPALA, APPO) learns in a thread: a few more iterations until it has.
MAX_ITERATIONS = 20


def _train(trainer) -> dict:
    result = trainer.train()
    while (result["training_iteration"] < 2 or result["num_env_steps_trained"] == 0) \
            and result["training_iteration"] < MAX_ITERATIONS:
        result = trainer.train()
    if result["num_env_steps_trained"] == 0:
        raise RuntimeError(f"{trainer} trained on nothing in {MAX_ITERATIONS} iterations")
    return result


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(leaves(a), leaves(b)))


def make_case(algo: str, out: Path, workdir: str) -> Path:
    """Trains `algo`, saves its checkpoint into `out/<algo>/` and records golden.json."""
    case = out / algo
    config = golden_config(algo)
    trainer = get_trainer_class(algo)(env=GOLDEN_ENVS[algo], config=config, logdir=os.path.join(workdir, algo))
    try:
        result = _train(trainer)
        staging = Path(workdir) / f"{algo}_case"
        path = Path(trainer.save(str(staging)))
        golden = record(trainer)
    finally:
        trainer.stop()
    # Recorded from the restored trainer, as the test will see it; it must act as the saved one did.
    restored = Trainer.from_checkpoint(str(path), logdir=os.path.join(workdir, algo + "_restored"))
    try:
        for pid, rec in golden.items():
            actions, outputs = act(restored, pid, [from_json(o) for o in rec["observations"]])
            recorded = [from_json(x) for x in rec["actions"] + rec[DIST_INPUTS]]
            if not all(_same(a, b) for a, b in zip(recorded, actions + outputs)):
                raise RuntimeError(f"{algo}: the restored policy {pid!r} acts differently from the saved one")
    finally:
        restored.stop()
    with open(staging / GOLDEN_FILE, "w", encoding="utf-8") as f:
        json.dump({"algorithm": algo, "env": GOLDEN_ENVS[algo], "format_version": FORMAT_VERSION,
                   "rlfleet_version": __version__, "iteration": result["training_iteration"],
                   "made_by": "benchmarks/make_golden_checkpoints.py", "explore": False, "policies": golden},
                  f, indent=1, sort_keys=True)
        f.write("\n")
    out.mkdir(parents=True, exist_ok=True)
    shutil.move(str(staging), str(case))
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", action="append", default=None, help="only this algorithm (repeatable)")
    parser.add_argument("--out", default=str(GOLDEN_ROOT / f"format_{FORMAT_VERSION}"),
                        help="the folder of this format's cases (default: the committed one)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the tests run (tests/conftest.py): one summation order
    out = Path(args.out)
    algos = args.algo or list_algorithms()
    unknown = sorted(set(algos) - set(list_algorithms()))
    if unknown:
        parser.error(f"unknown algorithms {unknown}; registered: {list_algorithms()}")
    todo = [a for a in algos if not (out / a).exists()]
    for algo in sorted(set(algos) - set(todo)):
        print(f"{algo}: kept (already in {out})")
    if any(a in NEEDS_RAY for a in todo):
        import ray

        ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False)
    with tempfile.TemporaryDirectory(prefix="rlfleet_golden_") as workdir:
        for algo in todo:
            case = make_case(algo, out, workdir)
            print(f"{algo}: {case} ({folder_bytes(case) / 1024:.1f} KiB)", flush=True)
    print(f"{out}: {folder_bytes(out) / 1024:.1f} KiB in all")


if __name__ == "__main__":
    main()
