"""Finds the ```python blocks of the Markdown docs and runs them (tests/test_docs.py).

The blocks of one file run in order in one namespace, as a reader would paste them into one
session, so a later block may use what an earlier one built. A block is skipped only when the
line above its fence (blank lines aside) is a marker stating why:

    <!-- docs-test: skip (needs a GPU) -->

Shell blocks are not run (each command would be a fresh process, seconds each); their
`rlfleet ...` lines are checked instead (`check_rlfleet_command`): the parser takes them, their
JSON parses, and the files they read exist.

Training loops in the docs may run "until the reward reaches X"; the tests give every
trainer a budget instead (`budget_train`): from its `BUDGET_ITERATIONS`-th `train()` on, the
result reports `episode_reward_mean` as +inf, which ends such loops. Everything else a block
does runs for real.
"""
from __future__ import annotations

import json
import math
import re
import shlex
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


SHELL_LANGS = ("bash", "sh", "shell")


def rlfleet_command_lines(blocks: List[Block]) -> List[Tuple[Block, List[str]]]:
    """The `rlfleet ...` command lines of the shell blocks that are not skipped, split as a
    shell would (comments and leading `VAR=value` assignments dropped)."""
    found = []
    for block in blocks:
        if block.lang not in SHELL_LANGS or block.skip_reason:
            continue
        for line in block.code.splitlines():
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
