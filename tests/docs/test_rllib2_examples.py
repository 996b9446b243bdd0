"""Every RLlib 2.x-style script in examples/rllib2/ runs as a user runs it (a fresh process,
`python examples/rllib2/<script>.py --stop-iters ...`) at a small budget, exits 0, and prints
its result on a 2.x result key. Whether they learn at their default budgets is measured by
hand (each script's docstring); here they run two iterations, so a broken import, builder
keyword or result key fails the test."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "examples" / "rllib2").glob("*.py"))
# RLlib's example-script flags (`add_rllib_example_script_args`), at a budget of seconds; a
# reward no run reaches, so the iteration and step limits end it.
SMALL_BUDGET = ["--stop-iters", "2", "--stop-timesteps", "2000", "--stop-reward", "100000"]
# Scripts that need more than rlfleet's own dependencies: the module each one imports.
NEEDS = {"ppo_tuner_grid_search.py": "ray.tune"}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a missing parent package
        return False


def test_the_examples_are_found():
    names = {path.name for path in SCRIPTS}
    assert {"dqn_with_evaluation.py", "sac_pendulum.py", "multi_agent_ppo.py", "offline_bc.py"} <= names


# Each runs in under ~5 s here; one that starts Ray (a Tuner) takes longer: slow.
CASES = [pytest.param(path, id=path.name, marks=[pytest.mark.slow] if path.name in NEEDS else [])
         for path in SCRIPTS]


@pytest.mark.parametrize("script", CASES)
def test_rllib2_example_runs(script: Path, tmp_path):
    needed = NEEDS.get(script.name)
    if needed is not None and not _importable(needed):
        pytest.skip(f"{script.name} needs {needed}")
    env = dict(os.environ, RLFLEET_RESULTS_DIR=str(tmp_path), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p))
    env.setdefault("OMP_NUM_THREADS", "1")  # tiny nets: one torch thread (tests/conftest.py says why)
    proc = subprocess.run([sys.executable, str(script), *SMALL_BUDGET], capture_output=True, text=True,
                          timeout=300, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    # Each script ends by printing the return it reached, under its 2.x result key.
    assert "episode_return_mean" in proc.stdout, proc.stdout[-2000:]
    # The scripts import rlfleet, never RLlib (left with `ray.rllib` imports, they would train RLlib).
    assert "ray.rllib" not in "".join(line for line in script.read_text().splitlines()
                                     if line.startswith(("import ", "from ")))
