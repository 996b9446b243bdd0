"""`rlfleet compare` on real runs: groups by setting, the mean and band over seeds (checked
against the runs' own result.json), one colour a group, a PNG and a self-contained page."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from rlfleet.cli import main
from rlfleet.results.compare import group_curve, group_runs
from rlfleet.results.plot import find_runs

pytest.importorskip("matplotlib")


def _last_returns(runs):
    out = []
    for run in runs:
        with open(f"{run}/result.json", encoding="utf-8") as f:
            out.append([json.loads(line) for line in f][-1]["episode_reward_mean"])
    return out


def test_groups_are_the_settings_and_the_band_spans_the_seeds(sweep):
    groups = group_runs(find_runs([str(sweep)]))
    assert sorted(groups) == ["lr=0.0003", "lr=3e-05"]  # seed and per-run paths are no setting
    assert all(len(runs) == 2 for runs in groups.values())
    for label, runs in groups.items():
        last = _last_returns(runs)
        sem = group_curve(label, runs, "episode_reward_mean", "timesteps_total", band="sem")
        assert sem.x[-1] == 2400 and sem.mean[-1] == pytest.approx(np.mean(last))
        assert sem.high[-1] - sem.mean[-1] == pytest.approx(np.std(last, ddof=1) / math.sqrt(2))
        minmax = group_curve(label, runs, "episode_reward_mean", "timesteps_total", band="minmax")
        assert (minmax.low[-1], minmax.high[-1]) == pytest.approx((min(last), max(last)))
    assert sorted(group_runs(find_runs([str(sweep)]), ["seed"])) == ["seed=1", "seed=2"]


def test_compare_writes_a_png_with_a_colour_per_group_and_a_self_contained_page(sweep, tmp_path, capsys):
    import matplotlib.image

    out = tmp_path / "out" / "cmp.png"
    assert main(["compare", str(sweep), "--group-by", "lr", "--x", "timesteps", "--out", str(out)]) == 0
    assert f"Wrote {out}" in capsys.readouterr().out
    pixels = (matplotlib.image.imread(str(out))[..., :3] * 255).round()
    # tab10's first two: one a group. On the timesteps axis every line spans the same steps (on the
    # time axis a line is as long as its runs took, which the machine's load squeezed to 24 pixels
    # in a full-suite run); a few dozen pixels of each colour show it was drawn.
    for colour in ((31, 119, 180), (255, 127, 14)):
        assert (np.abs(pixels - colour).max(axis=-1) < 3).sum() > 50, colour
    page = out.with_suffix(".html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in page and not re.search(r"(src|href)=\"(https?:|//)", page)
    assert "<td>lr=0.0003</td><td>2</td>" in page and "<td>lr=3e-05</td><td>2</td>" in page


def test_compare_names_what_is_wrong(sweep, tmp_path, capsys):
    assert main(["compare", str(sweep), "--group-by", "no_such_key", "--out", str(tmp_path / "c.png")]) == 2
    assert "--group-by 'no_such_key': no run's params.json has it; keys: " in capsys.readouterr().err
    assert main(["compare", str(sweep), "--metric", "nope", "--out", str(tmp_path / "c.png")]) == 2
    assert "no run has numbers for metric 'nope'" in capsys.readouterr().err
