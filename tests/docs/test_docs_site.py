"""The docs site as a reader meets it: each algorithm page opens with its recommended first
example, the pages speak to users (no project-internal wording), code blocks wrap at any window
width, and the API reference covers `rlfleet.env` (VectorEnv included) and every public class
of `rlfleet`."""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from typing import List

import pytest
import yaml

from tests.helpers import REPO_ROOT

DOCS = REPO_ROOT / "docs"

# Wording that only means something inside the project, with what a reader should get instead.
INTERNAL_WORDING = [
    (re.compile(r"\bmust[- ]show\b", re.I), "a project requirement: say what was measured and what it shows"),
    (re.compile(r"\b[Tt]he\s+reference\b(?!_)"), "name it: RLlib 1.x"),
    (re.compile(r"\b(?:issue|PR)\s*#?\d+\b", re.I), "an internal issue number: cite a public URL or say it"),
    (re.compile(r"(?<![\w/&`#])#\d+\b"), "an internal issue number: cite a public URL or say it"),
    (re.compile(r"\b(?:closing note|the brief)\b", re.I), "project-internal"),
]


def _gen_pages():
    spec = importlib.util.spec_from_file_location("gen_pages", DOCS / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_pages"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def internal_wording(text: str, where: str) -> List[str]:
    """`where:line: "match" (why)` for each internal phrase in `text`."""
    found = []
    for pattern, why in INTERNAL_WORDING:
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{where}:{line}: {match.group(0)!r} ({why})")
    return found


def _reader_texts():
    """The hand-written pages and README, and the tuned examples' comments (shown on the
    algorithm pages)."""
    for path in sorted(DOCS.rglob("*.md")) + [REPO_ROOT / "README.md"]:
        if "generated" not in path.relative_to(REPO_ROOT).parts and path.name != "config.md":
            yield str(path.relative_to(REPO_ROOT)), path.read_text()
    for path in sorted((REPO_ROOT / "tuned_examples").rglob("*.yaml")):
        comments = "\n".join(line if line.lstrip().startswith("#") else "" for line in path.read_text().splitlines())
        yield str(path.relative_to(REPO_ROOT)), comments


def test_pages_speak_to_users():
    found = [hit for where, text in _reader_texts() for hit in internal_wording(text, where)]
    assert not found, "project-internal wording in the docs:\n" + "\n".join(found)


def test_the_wording_check_catches_internal_phrases():
    text = ("QMIX settles.\nThe must-show \"above independent learners\" is not met (see #50);\n"
            "as the reference does, issue 12. Colour `#333` and a heading\n# Title\n")
    hits = internal_wording(text, "page.md")
    assert len(hits) == 4 and hits[0].startswith("page.md:2: 'must-show'"), hits
    assert any("'#50'" in h for h in hits) and any("'the reference'" in h for h in hits)


def _headline(page: str) -> str:
    return page.split("```bash\n", 1)[1].split("\n", 1)[0]


def test_each_algorithm_page_opens_with_its_recommended_first_example():
    gen = _gen_pages()
    pages = gen.algorithm_pages()
    assert _headline(pages["algorithms/PPO.md"]) == "rlfleet train -f tuned_examples/ppo/cartpole-ppo.yaml"
    assert _headline(pages["algorithms/SAC.md"]) == "rlfleet train -f tuned_examples/sac/pendulum-sac.yaml"
    for name, page in pages.items():
        if name == "algorithms/index.md":
            continue
        command = _headline(page)
        assert "reference_1x" not in command, f"{name} opens with RLlib 1.x's file: {command}"
        if command.startswith("rlfleet train -f "):
            path = REPO_ROOT / command.split()[-1]
            # The first example is also the first one listed.
            assert page.index(f"### `{path.relative_to(REPO_ROOT)}`") < page.index("## Keys"), name
            assert yaml.safe_load(path.read_text()), path


def test_several_examples_need_one_marked_first():
    gen = _gen_pages()
    a = gen.TunedExample("tuned_examples/x/a.yaml", "E", {}, "")
    b = gen.TunedExample("tuned_examples/x/b.yaml", "E", {}, "")
    ref = gen.TunedExample("tuned_examples/reference_1x/a.yaml", "E", {}, "")
    assert gen.first_example("X", [ref, a]) is a  # RLlib 1.x's files never headline
    marked = gen.TunedExample("tuned_examples/x/b.yaml", "E", {}, "", first=True)
    assert gen.first_example("X", [a, marked]) is marked
    with pytest.raises(SystemExit, match="X has 2 tuned examples and 0 marked '# docs: first'"):
        gen.first_example("X", [a, b])


def test_code_blocks_wrap_instead_of_scrolling():
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    (sheet,) = config["extra_css"]
    css = (DOCS / sheet).read_text()
    rule = re.search(r"\.md-typeset pre > code\s*\{([^}]*)\}", css)
    assert rule and "white-space: pre-wrap" in rule.group(1), css


def test_api_reference_documents_rlfleet_env_and_every_public_class():
    gen = _gen_pages()
    pages = gen.api_pages()
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    assert "generated/api/env.md" in nav
    from rlfleet.env import VectorEnv

    assert f"::: {VectorEnv.__module__}.VectorEnv\n" in pages["api/env.md"]
    text = "\n".join(pages.values())
    checked = 0
    for module_name in ("rlfleet", "rlfleet.env"):
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                assert f"::: {obj.__module__}.{obj.__qualname__}\n" in text, f"{module_name}.{name} is not documented"
                checked += 1
    assert checked >= 25
