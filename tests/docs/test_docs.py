"""The documentation: docs/config.md is generated from the declared keys and must not go
stale; every public name has a docstring and an API entry; every ```python and shell block of
the docs and the README runs; the site builds with `mkdocs build --strict`."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlfleet.config import config_reference
from tests.docs_examples import (TINY_STOP, Block, budget_train, check_rlfleet_command, find_blocks, python_blocks,
                                 rlfleet_command_lines, run_blocks, run_shell_blocks, shell_blocks, shell_workdir,
                                 tiny_argv)
from tests.helpers import REPO_ROOT

DOC = REPO_ROOT / "docs" / "config.md"


def test_config_reference_is_current():
    assert DOC.read_text() == config_reference(), (
        "docs/config.md is stale: regenerate it with `rlfleet config --markdown > docs/config.md`")


def test_config_reference_documents_every_algorithm():
    from rlfleet.registry import list_algorithms

    text = config_reference()
    for name in list_algorithms():
        assert f"\n## {name}\n" in text, name
    assert "| `clip_param` |" in text and "| `num_replay_buffer_shards` |" in text


ROOT = DOC.parents[1]
PAGES = [p for p in sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
         if "generated" not in p.relative_to(ROOT).parts]
EXAMPLE_FILES = [p for p in PAGES if python_blocks(p)]
# The generated algorithm pages' commands (a tuned example each) are only parse-checked.
SHELL_FILES = [p for p in PAGES if shell_blocks(p)]


REGISTRIES = [("rlfleet.env.registry", "_ENV_REGISTRY"), ("rlfleet.models.catalog", "_CUSTOM_MODELS"),
              ("rlfleet.models.catalog", "_CUSTOM_ACTION_DISTS"), ("rlfleet.models.preprocessors", "_CUSTOM_PREPROCESSORS"),
              ("rlfleet.offline.readers", "_INPUT_REGISTRY")]


def _gen_pages():
    spec = importlib.util.spec_from_file_location("gen_pages", ROOT / "docs" / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_pages"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_every_public_name_has_a_docstring_and_an_api_entry():
    gen = _gen_pages()
    pages = gen.api_pages()
    text = pages["api/rlfleet.md"] + pages["api/algorithms.md"]
    modules = ["rlfleet"] + gen.algorithm_packages()
    checked = 0
    for module in modules:
        for name, obj in gen.public_names(module):
            if gen.is_code(obj):
                assert obj.__doc__ and obj.__doc__.strip(), f"{module}.{name} has no docstring"
                assert f"::: {obj.__module__}.{obj.__qualname__}\n" in text, f"{module}.{name} has no API entry"
            else:
                assert f"| `{module}.{name}` | {gen.DATA_DESCRIPTIONS[name]} |" in text, name
            checked += 1
    assert checked > 80  # rlfleet's ~27 names and every algorithm package's


def test_every_algorithm_has_a_catalogue_page_with_its_keys():
    from rlfleet.registry import list_algorithms

    pages = _gen_pages().algorithm_pages()
    for name in list_algorithms():
        page = pages[f"algorithms/{name}.md"]
        assert page.startswith(f"# {name}\n") and "| key | default | meaning |" in page, name
        assert f"[{name}]({name}.md)" in pages["algorithms/index.md"], name
    assert "| `clip_param` | `0.3` |" in pages["algorithms/PPO.md"]


def test_cli_page_lists_every_command():
    page = _gen_pages().cli_page()
    for command in ("train", "evaluate", "config", "list", "plot"):
        assert f"## `rlfleet {command}`" in page and f"usage: rlfleet {command}" in page, command
    assert "--checkpoint-freq" in page


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run(path, tmp_path, monkeypatch):
    """Every ```python block of the docs and the README runs (see tests/docs_examples.py)."""
    from rlfleet.trainer import Trainer

    blocks = python_blocks(path)
    monkeypatch.chdir(tmp_path)  # files the examples write land here
    monkeypatch.setenv("RLFLEET_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(Trainer, "train", budget_train(Trainer.train))
    # What the examples register (envs, models, ...) is forgotten after the file, so no later
    # test ships it to its Ray workers.
    for module, table in REGISTRIES:
        monkeypatch.setattr(importlib.import_module(module), table, dict(getattr(importlib.import_module(module), table)))
    ran = run_blocks(blocks)
    skipped = [f"{b.where} ({b.skip_reason})" for b in blocks if b.skip_reason]
    print(f"{path.name}: {ran} blocks ran, {len(skipped)} skipped: {skipped}")
    assert ran + len(skipped) == len(blocks)


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_examples_run(path, tmp_path):
    """Every shell block of the docs and the README runs, with tiny stop criteria (see
    tests/docs_examples.py), in a temporary folder."""
    blocks = shell_blocks(path)
    ran = run_shell_blocks(blocks, tmp_path, shell_workdir(ROOT, tmp_path))
    skipped = [f"{b.where} ({b.skip_reason})" for b in blocks if b.skip_reason]
    print(f"{path.name}: {ran} shell blocks ran, {len(skipped)} skipped: {skipped}")
    assert ran + len(skipped) == len(blocks)


def test_a_broken_shell_example_fails_and_names_its_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```bash\necho fine > fine.txt\n```\n\n"
                    "<!-- docs-test: skip (needs a cluster) -->\n```bash\nexit 3\n```\n\n"
                    "```console\n$ rlfleet evaluate checkpoint_1 --episodes ten\nwhat it prints\n```\n")
    blocks = shell_blocks(page)
    assert [b.skip_reason for b in blocks] == [None, "needs a cluster", None]
    with pytest.raises(AssertionError, match=r"(?s)page.md:12 failed with exit status 2:.*--episodes: invalid int value: 'ten'"):
        run_shell_blocks(blocks, tmp_path, shell_workdir(ROOT, tmp_path))
    assert (tmp_path / "fine.txt").exists()


def test_documented_training_commands_become_tiny():
    argv = tiny_argv(["train", "-f", str(ROOT / "tuned_examples/ppo/cartpole-ppo.yaml"),
                      "--stop", '{"episode_reward_mean": 450}'])
    stop, config = json.loads(argv[argv.index("--stop") + 1]), json.loads(argv[argv.index("--config") + 1])
    assert stop == {"episode_reward_mean": 450, **TINY_STOP}
    assert config["train_batch_size"] <= 512 and config["sgd_minibatch_size"] <= config["train_batch_size"]
    argv = tiny_argv(["train", "--run", "DQN", "--env", "CartPole-v1", "--config={\"lr\": 0.001}"])
    assert json.loads(argv[argv.index("--config") + 1]) == {"lr": 0.001, "train_batch_size": 512}
    assert tiny_argv(["evaluate", "ckpt", "--episodes", "10"]) == ["evaluate", "ckpt", "--episodes", "2"]
    assert tiny_argv(["list"]) == ["list"]


def test_a_broken_example_fails_and_names_its_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nx = 1\n```\n\n<!-- docs-test: skip (needs a GPU) -->\n"
                    "```python\nraise SystemExit('never runs')\n```\n\n```python\nassert x == 2, 'x is 1'\n```\n")
    blocks = python_blocks(page)
    assert [b.skip_reason for b in blocks] == [None, "needs a GPU", None]
    with pytest.raises(AssertionError, match=r"page.md:12 failed: AssertionError: x is 1"):
        run_blocks(blocks)


def test_a_skip_marker_must_state_its_reason(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: skip -->\n```python\npass\n```\n")
    with pytest.raises(ValueError, match="page.md:1: a docs-test marker must read"):
        find_blocks(page)


def test_site_builds_strict(tmp_path):
    """`make docs` in short: the generated pages, then `mkdocs build --strict` (any warning
    fails it: a broken link, a missing page, a docstring reference that no longer resolves)."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed: pip install -e '.[docs]'")
    _gen_pages().write_pages(ROOT / "docs" / "generated")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT / "src"))
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert build.returncode == 0, build.stdout + build.stderr
    assert (tmp_path / "site" / "generated" / "algorithms" / "PPO" / "index.html").exists()
    # mkdocs does not check images: every figure a page shows must be one its code drew.
    drawn = _gen_pages().figure_blocks()
    assert "ppo-cartpole.png" in drawn
    for page in PAGES:
        for name in re.findall(r"(?<!`)!\[[^\]]*\]\((?:\.\./)*generated/figures/([^)]+)\)", page.read_text()):
            assert name in drawn, f"{page.name} shows {name}, which no docs-figure block draws"
            assert (tmp_path / "site" / "generated" / "figures" / name).is_file(), name


def test_documented_rlfleet_commands_parse():
    """Every `rlfleet ...` line of the docs' and README's shell blocks is a command the
    current CLI takes, with valid JSON and existing `-f` files (tests/docs_examples.py)."""
    from rlfleet.cli.main import build_parser

    parser = build_parser()
    checked = 0
    for path in sorted((ROOT / "docs").glob("**/*.md")) + [ROOT / "README.md"]:
        for block, argv in rlfleet_command_lines(find_blocks(path)):
            check_rlfleet_command(parser, ROOT, block, argv)
            checked += 1
    assert checked >= 10
    with pytest.raises(AssertionError, match=r"page.md:1: `rlfleet train --stpo 3` is not accepted"):
        check_rlfleet_command(parser, ROOT, Block(Path("page.md"), 1, "bash", "", None), ["train", "--stpo", "3"])
