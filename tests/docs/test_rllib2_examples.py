"""Every RLlib 2.x-style script in examples/rllib2/ runs as a user runs it (a fresh process,
`python examples/rllib2/<script>.py --stop-iters ...`) at a small budget, exits 0, and prints
its result on a 2.x result key. Whether they learn at their default budgets is measured by
hand (each script's docstring); here they run two iterations, so a broken import, builder
keyword or result key fails the test."""
from __future__ import annotations

import ast
import importlib.util
import io
import os
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from rlfleet.config.builder_keywords import TRAINING_SPELLINGS
from rlfleet.config.rllib2_names import RLLIB2_NAMES
from rlfleet.results.rllib2_keys import EPISODE_KEYS

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


# rlfleet's (RLlib 1.x's) spellings where RLlib 2.x has its own: a setting's key
# (num_workers, sgd_minibatch_size, ...) or a result's name (episode_reward_mean). 2.x keeps
# `train_batch_size` and `num_gpus` as names of its own, and `lambda` is Python's keyword.
SPELT_1X = ({entry.key for entry in RLLIB2_NAMES.values() if entry.key} - {"train_batch_size", "num_gpus"}
            | {key.split(".")[0] for key in TRAINING_SPELLINGS.values()} - {"lambda"}
            | {old for new, old in EPISODE_KEYS if new != old})


def _code_tokens(source: str) -> list:
    """The names and strings of the script's code: its docstring, comments and import
    statements left out."""
    tree = ast.parse(source)
    skipped = set()
    for node in tree.body:
        is_docstring = node is tree.body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if is_docstring or isinstance(node, (ast.Import, ast.ImportFrom)):
            skipped.update(range(node.lineno, node.end_lineno + 1))
    return [tok for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type in (tokenize.NAME, tokenize.STRING) and tok.start[0] not in skipped]


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_rllib2_example_differs_from_its_2x_script_in_import_lines_only(script: Path):
    """Below its imports a script is RLlib 2.x code: no rlfleet name, no 1.x spelling of a
    setting or result; each rlfleet import is listed, with the 2.x line it replaces, in the
    docstring; and no import is RLlib's (left with `ray.rllib` imports, it would train RLlib)."""
    source = script.read_text()
    tokens = _code_tokens(source)
    assert tokens  # the script has code
    rlfleet_names = [tok.string for tok in tokens if "rlfleet" in tok.string.lower()]
    assert not rlfleet_names, f"{script.name}: rlfleet-specific names below the imports: {rlfleet_names}"
    spelt_1x = sorted({f"{tok.string} (line {tok.start[0]})" for tok in tokens
                       if tok.string.strip("\"'") in SPELT_1X})
    assert not spelt_1x, f"{script.name}: rlfleet's 1.x spellings where RLlib 2.x has its own: {spelt_1x}"
    tree = ast.parse(source)
    docstring = ast.get_docstring(tree)
    imports = [ast.get_source_segment(source, node) for node in tree.body
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not [line for line in imports if "ray.rllib" in line], script.name
    for line in imports:
        if "rlfleet" in line:
            assert f"-> `{line}`" in " ".join(docstring.split()), (
                f"{script.name}: the docstring does not list `{line}` with the 2.x import it replaces")
