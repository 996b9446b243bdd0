"""The test folder's own rules: test modules sit in package folders (each with an `__init__.py`,
so two folders may hold modules of one name), and no test module imports another: what tests
share lives in helper modules (tests/helpers.py, envs.py, ...), so running or moving one test
file never runs or breaks another's import."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Tuple

from tests.helpers import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def _test_modules() -> Iterator[Path]:
    return (p for p in sorted(TESTS.rglob("test_*.py")) if "__pycache__" not in p.parts)


def _imports(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, dotted name) of every module `path` imports, a `from X import Y` as X.Y too."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def test_no_test_module_imports_another():
    found = [f"{path.relative_to(REPO_ROOT)}:{line} imports {name}" for path in _test_modules()
             for line, name in _imports(path)
             if name.startswith("tests.") and name.rsplit(".", 1)[-1].startswith("test_")]
    assert not found, "move what they share into a helper module:\n" + "\n".join(found)


def test_every_test_folder_is_a_package():
    folders = {path.parent for path in _test_modules()}
    assert folders and TESTS not in folders, "test modules go into the folder of the package they test"
    missing = [str(folder.relative_to(REPO_ROOT)) for folder in sorted(folders)
               if not (folder / "__init__.py").exists()]
    assert not missing, f"add an empty __init__.py to {missing}"
