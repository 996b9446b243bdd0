"""MkDocs hook (mkdocs.yml `hooks:`): puts every generated algorithm page in the navigation,
under the catalogue's index, so a new algorithm needs no edit of mkdocs.yml."""
from __future__ import annotations

from pathlib import Path
from typing import Any

CATALOGUE = "generated/algorithms/index.md"


def on_config(config: Any) -> Any:
    pages = sorted(p.name for p in (Path(config["docs_dir"]) / "generated" / "algorithms").glob("*.md"))
    algorithms = [{p[:-3]: f"generated/algorithms/{p}"} for p in pages if p != "index.md"]
    for i, item in enumerate(config["nav"]):
        if isinstance(item, dict) and item.get("Algorithm catalogue") == CATALOGUE:
            config["nav"][i] = {"Algorithm catalogue": [{"Overview": CATALOGUE}, *algorithms]}
    return config
