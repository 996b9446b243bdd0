"""Writes the generated pages of the documentation site into docs/generated/ (run by `make docs`).

Generated, never edited by hand, so they cannot drift from the code:

- `algorithms/index.md` and one page per registered algorithm: what it is (its trainer's
  docstring), how to run it, its tuned examples (each file's own comment says what it
  measured), and its keys with their defaults (`rlfleet.config.describe_keys`).
- `cli.md`: the help of every `rlfleet` sub-command, from the argument parser.
- `api/rlfleet.md`, `api/env.md` and `api/algorithms.md`: mkdocstrings entries for every public
  name that `rlfleet`, `rlfleet.env` and `rlfleet.algorithms.*` export (`__all__`); data names (configs, key lists) get a
  description from `DATA_DESCRIPTIONS`.
- `figures/*.png`: the plots the pages show, each made by the ```python block under a
  `<!-- docs-figure: NAME.png -->` marker on its page, run here (in `figures/`, as a reader
  would run it) so a plot is always what the code next to it draws. A block runs again only
  when its code changed or its PNG is missing (`figures/NAME.png.code` keeps the code it drew).

The config reference stays at docs/config.md (checked against the declarations by
tests/docs/test_docs.py). Usage: `python docs/gen_pages.py [OUT_DIR]` (default: docs/generated).
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "generated"

# What each exported data name holds; a data name missing here fails the generation (and
# tests/docs/test_docs.py), so a new export gets a description before it gets a page.
DATA_DESCRIPTIONS: Dict[str, str] = {
    "__version__": "The installed rlfleet version.",
    "COMMON_CONFIG": "Every common config key with its default (see the config reference).",
    "MODEL_DEFAULTS": "The default `model` sub-config.",
    "DEFAULT_CONFIG": "The algorithm's whole default config: the common keys with its own "
                      "defaults, plus its own keys.",
    "ALGO_KEYS": "The algorithm's own config keys (`ConfigKey`: name, default, meaning, check).",
    "SIMPLE_Q_DEFAULT_CONFIG": "SimpleQ's default config (DQN without double Q, dueling, "
                               "noisy nets or distributional heads).",
    "APEX_DDPG_DEFAULT_CONFIG": "APEX_DDPG's default config (Ape-X's data flow on DDPG).",
    "APEX_R2D2_DEFAULT_CONFIG": "APEX_R2D2's default config (R2D2 over Ape-X's replay shards).",
    "ACTOR_CRITIC_KEYS": "The actor-critic keys A2C shares with A3C (`ConfigKey`s).",
    "OPTIMIZER_KEYS": "The learning-rate and gradient keys A2C shares with A3C (`ConfigKey`s).",
    "VTRACE_KEYS": "The V-trace keys IMPALA shares with APPO (`ConfigKey`s).",
    "ASYNC_KEYS": "The keys of the asynchronous data flow IMPALA and APPO share: learner queue, "
                  "replay mix-in, broadcast interval (`ConfigKey`s).",
    "TS_CONFIG": "BanditLinTS's default config (the common keys with the bandits' own).",
    "UCB_CONFIG": "BanditLinUCB's default config (the common keys with the bandits' own).",
}

# Parser help is wrapped to the terminal's width: fix it so the page does not depend on
# the machine that builds it.
HELP_WIDTH = "100"


def algorithm_packages() -> List[str]:
    """`rlfleet.algorithms.<name>` for every algorithm sub-package, sorted."""
    import rlfleet.algorithms as algorithms

    return sorted(f"rlfleet.algorithms.{m.name}" for m in pkgutil.iter_modules(algorithms.__path__)
                  if m.ispkg)


def public_names(module_name: str) -> List[Tuple[str, object]]:
    """The `(name, object)` pairs a module exports through `__all__`."""
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__]


def is_code(obj: object) -> bool:
    """Classes and functions get a mkdocstrings entry; anything else is data."""
    return inspect.isclass(obj) or inspect.isfunction(obj)


def api_section(module_name: str) -> str:
    """Markdown for one module's exports: a mkdocstrings entry per class or function (by
    the path that defines it: `rlfleet`'s exports load lazily, so the static reader cannot
    follow them), a table for data."""
    code, data = [], []
    for name, obj in public_names(module_name):
        if is_code(obj):
            code.append(f"### `{module_name}.{name}`\n\n::: {obj.__module__}.{obj.__qualname__}\n"
                        f"    options:\n      show_root_heading: false\n")
        elif name in DATA_DESCRIPTIONS:
            data.append(f"| `{module_name}.{name}` | {DATA_DESCRIPTIONS[name]} |")
        else:
            raise SystemExit(f"docs/gen_pages.py: {module_name}.{name} is exported but has no entry in "
                             f"DATA_DESCRIPTIONS; add one saying what it holds.")
    parts = []
    if data:
        parts += ["| data | what it holds |", "| --- | --- |", *data, ""]
    return "\n".join(parts + code)


def api_pages() -> Dict[str, str]:
    """The API reference pages, by path relative to the output folder."""
    top = ["# API reference: `rlfleet`", "",
           "Every name `rlfleet` exports (`rlfleet.__all__`); each loads on first use, so "
           "`import rlfleet` stays light.", "", api_section("rlfleet")]
    algos = ["# API reference: `rlfleet.algorithms`", "",
             "Every name each algorithm package exports (`__all__`): its trainer, its policy, "
             "its loss and its default config. The keys and their defaults are in the "
             "[algorithm catalogue](../algorithms/index.md).", ""]
    for package in algorithm_packages():
        algos += [f"## `{package}`", "", api_section(package)]
    env = ["# API reference: `rlfleet.env`", "",
           "Every name `rlfleet.env` exports (`__all__`): the env interfaces a custom env implements "
           "(`MultiAgentEnv`, `VectorEnv`, `ExternalEnv`, ...), the registry and the env checks' errors. "
           "[Custom envs and models](../../guides/custom-envs-and-models.md) shows them in use.", "",
           api_section("rlfleet.env")]
    return {"api/rlfleet.md": "\n".join(top), "api/algorithms.md": "\n".join(algos), "api/env.md": "\n".join(env)}


def summary(trainer_class: type) -> str:
    """The first paragraph of a trainer's docstring, on one line."""
    doc = inspect.getdoc(trainer_class) or ""
    return " ".join(doc.split("\n\n")[0].split())


# A tuned-example file whose comment holds this line is its algorithm's recommended first
# example: the command its page opens with. An algorithm with one example of its own (files of
# tuned_examples/reference_1x/, RLlib 1.x's files run unchanged, never count) needs none; one
# with several must mark exactly one, or the generation fails.
FIRST_MARKER = "# docs: first"


@dataclass(frozen=True)
class TunedExample:
    """One experiment of a tuned example file, with the file's leading comment (what it
    shows and what it measured) and whether the file is marked `# docs: first`."""

    path: str  # relative to the repository root
    env: str
    stop: dict
    comment: str
    first: bool = False


def tuned_examples(algorithm: str) -> List[TunedExample]:
    """The experiments of tuned_examples/**/*.yaml that run `algorithm`."""
    found = []
    for path in sorted((ROOT / "tuned_examples").rglob("*.yaml")):
        text = path.read_text()
        comment = " ".join(line.lstrip("#").strip() for line in text.splitlines()
                           if line.startswith("#") and line.strip() != FIRST_MARKER)
        first = any(line.strip() == FIRST_MARKER for line in text.splitlines())
        for experiment in (yaml.safe_load(text) or {}).values():
            if isinstance(experiment, dict) and experiment.get("run") == algorithm:
                found.append(TunedExample(str(path.relative_to(ROOT)), str(experiment.get("env")),
                                          experiment.get("stop") or {}, comment, first))
    return found


def first_example(algorithm: str, examples: List[TunedExample]) -> Optional[TunedExample]:
    """The example an algorithm's page opens with: the one marked `# docs: first`, else its
    only example outside tuned_examples/reference_1x/; None when it has no example."""
    marked = [e for e in examples if e.first]
    own = [e for e in examples if not e.path.startswith("tuned_examples/reference_1x/")]
    if len(marked) == 1:
        return marked[0]
    if not marked and len(own) <= 1:
        return own[0] if own else (examples[0] if examples else None)
    raise SystemExit(f"docs/gen_pages.py: {algorithm} has {len(own)} tuned examples and {len(marked)} marked "
                     f"{FIRST_MARKER!r}: put that line at the top of the one a newcomer should run first "
                     f"(one of {[e.path for e in marked or own]})")


def algorithm_page(algorithm: str) -> str:
    """One algorithm's catalogue page."""
    from rlfleet.config import describe_keys
    from rlfleet.registry import get_trainer_class

    trainer_class = get_trainer_class(algorithm)
    own_section = describe_keys(algorithm).split("\n### ", 1)[0]  # its keys come first
    examples = tuned_examples(algorithm)
    first = first_example(algorithm, examples)
    if first is not None:  # listed first too
        examples = [first] + [e for e in examples if e is not first]
    command = (f"rlfleet train -f {first.path}" if first is not None
               else f"rlfleet train --run {algorithm} --env CartPole-v1")
    lines = [f"# {algorithm}", "", summary(trainer_class), "",
             f"Trainer class: `{trainer_class.__module__.rsplit('.', 1)[0]}.{trainer_class.__name__}` "
             f"([API](../api/algorithms.md)). "
             f"{'Its recommended first example' if first is not None else 'A first run'}, from the checkout's root:", "",
             "```bash", command, "```", ""]
    if examples:
        lines += ["## Tuned examples", "",
                  "Each runs with `rlfleet train -f FILE`; the notes are the file's own comment "
                  "(what it shows and what it measured on this project's machine).", ""]
        for example in examples:
            stop = ", ".join(f"`{k}` {v}" for k, v in example.stop.items()) or "none"
            lines += [f"### `{example.path}`", "", f"Env `{example.env}`; stops at {stop}.", ""]
            if example.comment:
                lines += [example.comment, ""]
    lines += ["## Keys", "",
              f"Its own keys and the common keys it sets differently, with {algorithm}'s defaults "
              f"(`rlfleet config {algorithm}` prints the same; every other key is in the "
              "[config reference](../../config.md)).", "", own_section.replace("### ", "", 1).split("\n", 1)[1].strip()]
    return "\n".join(lines).rstrip("\n") + "\n"


def algorithm_pages() -> Dict[str, str]:
    """The catalogue's index and one page per registered algorithm."""
    from rlfleet.registry import get_trainer_class, list_algorithms

    index = ["# Algorithm catalogue", "",
             "One page per registered algorithm (`rlfleet list`), generated from its trainer and "
             "its declared keys.", "", "| algorithm | what it is |", "| --- | --- |"]
    pages = {}
    for name in list_algorithms():
        index.append(f"| [{name}]({name}.md) | {summary(get_trainer_class(name))} |")
        pages[f"algorithms/{name}.md"] = algorithm_page(name)
    pages["algorithms/index.md"] = "\n".join(index) + "\n"
    return pages


def cli_page() -> str:
    """The CLI reference: `rlfleet --help` and each sub-command's help."""
    from rlfleet.cli.main import build_parser

    os.environ["COLUMNS"] = HELP_WIDTH
    parser = build_parser()
    lines = ["# Command line reference", "",
             "Generated from `rlfleet`'s argument parser; `rlfleet COMMAND --help` prints the same.", "",
             "```text", parser.format_help().rstrip(), "```", ""]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        lines += [f"## `rlfleet {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
        # A command with actions of its own (`rlfleet checkpoint inspect`): each action's help too.
        actions = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
        for action, action_parser in (actions[0].choices.items() if actions else ()):
            lines += [f"### `rlfleet {name} {action}`", "", "```text", action_parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


FIGURE = re.compile(r"^<!-- docs-figure: (?P<name>[\w.-]+\.png) -->\n```python\n(?P<code>.*?)\n```$",
                    re.MULTILINE | re.DOTALL)


def figure_blocks() -> Dict[str, Tuple[str, str]]:
    """`{png name: (page, code)}` for every block under a docs-figure marker of docs/*.md."""
    found: Dict[str, Tuple[str, str]] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if "generated" in page.relative_to(ROOT / "docs").parts:
            continue
        for match in FIGURE.finditer(page.read_text()):
            if match["name"] in found:
                raise SystemExit(f"docs/gen_pages.py: figure {match['name']} is drawn by two pages: "
                                 f"{found[match['name']][0]} and {page.name}")
            found[match["name"]] = (page.name, match["code"] + "\n")
    return found


def write_figures(out: Path) -> List[Path]:
    """Runs each figure block whose PNG is missing or whose code changed, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (page, code) in figure_blocks().items():
        png, drawn_by = out / name, out / f"{name}.code"
        written.append(png)
        if png.exists() and drawn_by.exists() and drawn_by.read_text() == code:
            continue
        here, results = os.getcwd(), os.environ.get("RLFLEET_RESULTS_DIR")
        with tempfile.TemporaryDirectory() as runs:
            os.environ["RLFLEET_RESULTS_DIR"] = runs  # the example's run folders are not kept
            os.chdir(out)
            try:
                exec(compile(code, f"{page} (figure {name})", "exec"), {"__name__": "__docs_figure__"})
            finally:
                os.chdir(here)
                if results is None:
                    os.environ.pop("RLFLEET_RESULTS_DIR")
                else:
                    os.environ["RLFLEET_RESULTS_DIR"] = results
        if not png.exists():
            raise SystemExit(f"docs/gen_pages.py: the figure block of {page} did not write {name}")
        drawn_by.write_text(code)
    return written


def all_pages() -> Dict[str, str]:
    """Every generated page, by path relative to the output folder."""
    return {**algorithm_pages(), **api_pages(), "cli.md": cli_page()}


def write_pages(out: Path) -> List[Path]:
    """Writes every generated page and figure under `out`, removing pages it no longer generates."""
    pages = all_pages()
    written = []
    for rel, text in pages.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:  # unchanged files keep their time
            path.write_text(text)
        written.append(path)
    for stale in out.rglob("*.md"):
        if stale not in written:
            stale.unlink()
    return written + write_figures(out / "figures")


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    print(f"docs/gen_pages.py: {len(write_pages(target))} pages and figures in {target}")
