"""Finds the ```python blocks of the Markdown docs and runs them (tests/docs/test_docs.py).

The blocks of one file run in order in one namespace, as a reader would paste them into one
session, so a later block may use what an earlier one built. A block is skipped only when the
line above its fence (blank lines aside) is a marker stating why:

    <!-- docs-test: skip (needs a GPU) -->

Shell blocks (```bash, ```sh, ```shell; ```console runs its `$ ` lines) run too, each with
`bash -e -o pipefail` in one temporary folder per page, in order, where `tuned_examples/` and
`examples/` are links into the checkout (the docs say to run commands from its root). There
`rlfleet` is `tiny_rlfleet`: the real command line with tiny stop criteria, so a documented
training run ends after one small iteration (see its docstring). Every `rlfleet ...` line is
also checked without running it (`check_rlfleet_command`), the generated pages' included.

Training loops in the docs may run "until the reward reaches X"; the tests give every
trainer a budget instead (`budget_train`): from its `BUDGET_ITERATIONS`-th `train()` on, the
result reports `episode_reward_mean` as +inf, which ends such loops. Everything else a block
does runs for real.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*$")
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->\s*$")
ANY_MARKER = re.compile(r"<!--\s*docs-test")

BUDGET_ITERATIONS = 2


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its code, and why it is skipped."""

    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    skip_reason: Optional[str]

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def find_blocks(path: Path) -> List[Block]:
    """Every fenced block of a Markdown file, with its skip marker if it has one.

    Raises:
        ValueError: for a `docs-test` marker that is malformed or states no reason, and for
            a fence that is never closed.
    """
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            if ANY_MARKER.search(lines[i]) and not (SKIP.match(lines[i]) and SKIP.match(lines[i])["reason"].strip()):
                raise ValueError(f"{path.name}:{i + 1}: a docs-test marker must read "
                                 f"'<!-- docs-test: skip (the reason) -->', got {lines[i].strip()!r}")
            i += 1
            continue
        indent, start = opening["indent"], i
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if i == len(lines):
            raise ValueError(f"{path.name}:{start + 1}: a code fence that is never closed")
        body = textwrap.dedent("\n".join(line[len(indent):] if line.startswith(indent) else line
                                         for line in lines[start + 1:i]))
        blocks.append(Block(path, start + 1, opening["lang"], body, _skip_reason(lines, start)))
        i += 1
    return blocks


def _skip_reason(lines: List[str], fence: int) -> Optional[str]:
    above = fence - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    marker = SKIP.match(lines[above]) if above >= 0 else None
    return marker["reason"].strip() if marker else None


def python_blocks(path: Path) -> List[Block]:
    """The file's ```python blocks."""
    return [b for b in find_blocks(path) if b.lang == "python"]


def budget_train(real_train: Callable[[Any], Dict[str, Any]]) -> Callable[[Any], Dict[str, Any]]:
    """Wraps `Trainer.train` so that loops waiting for a reward end after a few iterations."""

    def train(self: Any) -> Dict[str, Any]:
        result = real_train(self)
        if result["training_iteration"] >= BUDGET_ITERATIONS:
            result = dict(result, episode_reward_mean=math.inf)
            if "env_runners" in result:  # RLlib 2.x's name of the same value (rlfleet/results/rllib2_keys.py)
                result["env_runners"] = dict(result["env_runners"], episode_return_mean=math.inf)
        return result

    return train


def run_blocks(blocks: List[Block]) -> int:
    """Runs the blocks that are not skipped, in order, in one namespace; returns how many ran.

    Raises:
        AssertionError: naming the block (file:line) whose code raised, with the error.
    """
    namespace: Dict[str, Any] = {"__name__": "__docs_example__"}
    ran = 0
    for block in blocks:
        if block.skip_reason:
            continue
        try:
            exec(compile(block.code, block.where, "exec"), namespace)
        except Exception as error:  # any failure of an example is the doc's failure
            raise AssertionError(f"the example at {block.where} failed: {type(error).__name__}: {error}") from error
        ran += 1
    for value in namespace.values():  # trainers release their workers and log files
        stop = getattr(value, "stop", None)
        if callable(stop) and type(value).__module__.startswith("rlfleet."):
            stop()
    return ran


SHELL_LANGS = ("bash", "sh", "shell", "console")

# What a documented `rlfleet train` may cost in the tests: one iteration of a small batch.
TINY_STOP = {"training_iteration": 1}
TINY_CONFIG = {"train_batch_size": 512}
TINY_SGD_MINIBATCH = 128  # for algorithms with minibatch SGD (PPO and its kin), <= the batch
TINY_EPISODES = 2  # `rlfleet evaluate --episodes N` plays at most this many


def shell_blocks(path: Path) -> List[Block]:
    """The file's shell blocks (```bash, ```sh, ```shell, ```console)."""
    return [b for b in find_blocks(path) if b.lang in SHELL_LANGS]


def shell_script(block: Block) -> str:
    """The commands of a shell block: all of it, or a ```console block's `$ ` lines."""
    if block.lang != "console":
        return block.code
    return "\n".join(line[2:] for line in block.code.splitlines() if line.startswith("$ "))


def _option(argv: List[str], name: str) -> Optional[int]:
    """The index of `name`'s value in `argv` (`--x v` or `--x=v` rewritten to the first)."""
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return i + 1
        if word.startswith(name + "="):
            argv[i:i + 1] = [name, word[len(name) + 1:]]
            return i + 1
    return None


def _algorithms(argv: List[str]) -> List[str]:
    """The algorithms a `rlfleet train` command line runs (`--run`, or the `-f` file's)."""
    import yaml

    run = _option(argv, "--run")
    if run is not None:
        return [argv[run]]
    path = _option(argv, "-f")
    path = path if path is not None else _option(argv, "--config-file")
    if path is None:
        return []
    with open(argv[path]) as f:
        experiments = yaml.safe_load(f) or {}
    return [e["run"] for e in experiments.values() if isinstance(e, dict) and "run" in e]


def tiny_argv(argv: List[str]) -> List[str]:
    """A documented `rlfleet` command line made cheap, and otherwise as printed.

    `train`: `TINY_STOP` joins the stop criteria (`--stop`, which also updates a `-f` file's
    experiments), and `TINY_CONFIG` (plus a `sgd_minibatch_size` of `TINY_SGD_MINIBATCH` for
    algorithms that have one) is merged over `--config`. `evaluate`: at most `TINY_EPISODES`
    episodes. Other commands run unchanged.
    """
    from rlfleet.registry import get_trainer_class

    argv = list(argv)
    if argv[:1] == ["train"]:
        stop_at = _option(argv, "--stop")
        stop = dict(json.loads(argv[stop_at]) if stop_at is not None else {}, **TINY_STOP)
        config_at = _option(argv, "--config")
        config = dict(json.loads(argv[config_at]) if config_at is not None else {}, **TINY_CONFIG)
        if any("sgd_minibatch_size" in get_trainer_class(a)._default_config for a in _algorithms(argv)):
            config["sgd_minibatch_size"] = TINY_SGD_MINIBATCH
        resume_at = _option(argv, "--resume")
        resumes_a_folder = resume_at is not None and not argv[resume_at].startswith("-")
        for name, value, at in (("--stop", stop, stop_at), ("--config", config, config_at)):
            if name == "--config" and resumes_a_folder:
                continue  # a resumed run keeps the config its checkpoint records
            if at is None:
                argv += [name, json.dumps(value)]
            else:
                argv[at] = json.dumps(value)
    elif argv[:1] == ["evaluate"]:
        at = _option(argv, "--episodes")
        if at is None:
            argv += ["--episodes", str(TINY_EPISODES)]
        elif argv[at].isdigit():  # anything else is left for the parser to refuse
            argv[at] = str(min(int(argv[at]), TINY_EPISODES))
    return argv


def tiny_rlfleet(argv: List[str]) -> int:
    """`rlfleet`, as the shell blocks of the docs run it in the tests (`tiny_argv`)."""
    from rlfleet.cli.main import main

    return main(tiny_argv(argv))


def shell_workdir(root: Path, workdir: Path) -> Dict[str, str]:
    """Prepares `workdir` for a page's shell blocks; returns their environment.

    `tuned_examples/` and `examples/` link into the checkout; `bin/rlfleet` runs
    `tiny_rlfleet` with this interpreter and comes first on PATH; results go to `results/`.
    """
    for name in ("tuned_examples", "examples"):
        if not (workdir / name).exists():
            (workdir / name).symlink_to(root / name, target_is_directory=True)
    bin_dir = workdir / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "rlfleet"
    shim.write_text(f"#!{sys.executable}\nimport sys\n"
                    f"from tests.docs_examples import tiny_rlfleet\nsys.exit(tiny_rlfleet(sys.argv[1:]))\n")
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(root), str(root / "src"), os.environ.get("PYTHONPATH", "")]),
               RLFLEET_RESULTS_DIR=str(workdir / "results"), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    return env


def run_shell_blocks(blocks: List[Block], workdir: Path, env: Dict[str, str], timeout_s: float = 120.0) -> int:
    """Runs the shell blocks that are not skipped, in order, in `workdir`; returns how many ran.

    Raises:
        AssertionError: naming the block (file:line) that failed, with its exit status and
            the end of its output.
    """
    ran = 0
    for block in blocks:
        if block.skip_reason:
            continue
        try:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", shell_script(block)], cwd=workdir,
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the example at {block.where} ran past {timeout_s:.0f} s") from None
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-2000:]
            raise AssertionError(f"the example at {block.where} failed with exit status {done.returncode}:\n{output}")
        ran += 1
    return ran


def rlfleet_command_lines(blocks: List[Block]) -> List[Tuple[Block, List[str]]]:
    """The `rlfleet ...` command lines of the shell blocks that are not skipped, split as a
    shell would (comments and leading `VAR=value` assignments dropped)."""
    found = []
    for block in blocks:
        if block.lang not in SHELL_LANGS or block.skip_reason:
            continue
        for line in shell_script(block).replace("\\\n", " ").splitlines():  # continued lines joined
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
                words = words[1:]
            if words and words[0] == "rlfleet":
                found.append((block, words[1:]))
    return found


def check_rlfleet_command(parser: Any, root: Path, block: Block, argv: List[str]) -> None:
    """Checks one documented `rlfleet` command without running it: the current parser takes
    it, its JSON options parse, and the files it reads (`-f`) exist relative to the
    checkout's root, where the docs say to run them.

    Raises:
        AssertionError: naming the block (file:line) and the command.
    """
    where = f"{block.where}: `rlfleet {' '.join(argv)}`"
    try:
        args = parser.parse_args(argv)
    except SystemExit:  # argparse printed why
        raise AssertionError(f"{where} is not accepted by rlfleet's argument parser") from None
    for option in ("stop", "config"):
        value = getattr(args, option, None)
        if value is not None:
            try:
                json.loads(value)
            except ValueError as error:
                raise AssertionError(f"{where}: --{option} is not valid JSON ({error})") from None
    config_file = getattr(args, "config_file", None)
    assert config_file is None or (root / config_file).is_file(), f"{where}: {config_file} does not exist"
