"""docs/config.md is generated from the declared keys and must not go stale."""
from __future__ import annotations

from pathlib import Path

from rlfleet.config import config_reference

DOC = Path(__file__).resolve().parents[1] / "docs" / "config.md"


def test_config_reference_is_current():
    assert DOC.read_text() == config_reference(), (
        "docs/config.md is stale: regenerate it with `rlfleet config --markdown > docs/config.md`")


def test_config_reference_documents_every_algorithm():
    from rlfleet.registry import list_algorithms

    text = config_reference()
    for name in list_algorithms():
        assert f"\n## {name}\n" in text, name
    assert "| `clip_param` |" in text and "| `num_replay_buffer_shards` |" in text
