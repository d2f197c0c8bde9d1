"""Every chart the app sends, at fixed settings, against the one it sent before figures were rewritten.

The figure builders (specviz/app/figures.py, lesson_figures.py, tree_shapes.py) write plotly's
JSON and validate it once, instead of building it call by call (ten times cheaper; benchmarks/load.py
--cpu). That rewrite is a fast path, so it is held against what the call-by-call builders sent:
``tests/data/figure_snapshots.json.gz`` holds the spec of every chart on every page below, recorded
with them (``python tests/test_figure_snapshots.py --write`` records it again, after a deliberate
change of a figure). Charts whose numbers change from run to run (measured speeds) are recorded as
such and only counted. Numbers are compared to 1e-9 relative: NumPy's vector code may round the
last bit differently on another CPU.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # run as a script: the repository's specviz
from apptest import open_page, plotly_array  # noqa: E402

from specviz.app import interview  # noqa: E402

ANSWERED = ",".join(["0"] * len(interview.questions()))  # every question answered: their charts show
SNAPSHOTS = Path(__file__).resolve().parent / "data" / "figure_snapshots.json.gz"

# (name, page, link, button to click or None): every page at its defaults, presenter mode, the Bug lab
# with a mistake, and the pages' other charts where one click shows them.
CASES: list[tuple[str, str | None, dict[str, str], str | None]] = [
    ("home", None, {}, None),
    ("why-exact", "app_pages/exact.py", {}, None),
    ("why-exact-bug", "app_pages/exact.py", {"bug": "wrong_bonus_row"}, None),
    ("batch", "app_pages/batch.py", {}, None),
    ("bug-lab", "app_pages/bug_lab.py", {}, "Run the test"),
    ("bug-lab-mistake", "app_pages/bug_lab.py", {"bug": "resample_from_p", "n": "20000"}, "Run the test"),
    ("tokens", "app_pages/tokens.py", {}, None),
    ("verifiers", "app_pages/verifiers.py", {}, None),
    ("settings", "app_pages/settings.py", {}, None),
    ("batch-run", "app_pages/batch.py", {}, "Run batch"),
    *[(f"interview-{step}", "app_pages/interview.py", {"step": str(step), "ans": ANSWERED}, None)
      for step in (0, 3, 5, 10, 13, 14, 15, 16)],  # each question whose answer shows a chart, answered
    ("real-text", "app_pages/text.py", {}, "Run the check"),
    ("one-round", "app_pages/one_round.py", {}, None),
    ("find-the-bug", "app_pages/find_bug.py", {}, None),
    ("bug-lab-presenter", "app_pages/bug_lab.py", {"present": "1"}, "Run the test"),
    ("one-round-presenter", "app_pages/one_round.py", {"present": "1"}, None),
]


def charts(page: str | None, query: dict[str, str], button: str | None) -> list[dict]:
    at = open_page(page, query)
    if button is not None:
        [b] = [b for b in at.button if b.label == button]
        b.click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


MEASURED = ("Rows verified per second",)  # titles of charts of measured speeds: cached within a process


def measured(chart: dict) -> bool:
    return str(chart.get("layout", {}).get("title", {}).get("text", "")).startswith(MEASURED)


def record() -> dict[str, list]:
    """Each case's charts; a measured one, or one that differs between two runs, as None (counted, not compared)."""
    out: dict[str, list] = {}
    for name, page, query, button in CASES:
        first, second = charts(page, query, button), charts(page, query, button)
        assert len(first) == len(second), name
        out[name] = [a if same(a, b) == "" and not measured(a) else None for a, b in zip(first, second, strict=True)]
    return out


def _array(v: object) -> object:
    return plotly_array(v) if isinstance(v, dict) and set(v) >= {"bdata", "dtype"} else v


def same(a: object, b: object, path: str = "") -> str:
    """'' when ``a`` and ``b`` are the same chart JSON (numbers to 1e-9 relative), else where they differ."""
    a, b = _array(a), _array(b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return f"{path}: shape {x.shape} != {y.shape}"
        if x.dtype.kind in "fiub" and y.dtype.kind in "fiub":
            ok = np.allclose(x.astype(float), y.astype(float), rtol=1e-9, atol=0, equal_nan=True)
        else:
            ok = bool(np.array_equal(x, y))
        return "" if ok else f"{path}: arrays differ"
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(set(a) ^ set(b))} in one only"
        return next((d for k in a if (d := same(a[k], b[k], f"{path}.{k}"))), "")
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} != {len(b)} items"
        return next((d for i, (x, y) in enumerate(zip(a, b, strict=True)) if (d := same(x, y, f"{path}[{i}]"))), "")
    if isinstance(a, float) and isinstance(b, (int, float)) or isinstance(b, float) and isinstance(a, int):
        fa, fb = float(a), float(b)
        ok = (math.isnan(fa) and math.isnan(fb)) or math.isclose(fa, fb, rel_tol=1e-9, abs_tol=0)
        return "" if ok else f"{path}: {a!r} != {b!r}"
    return "" if a == b and type(a) is type(b) else f"{path}: {a!r} != {b!r}"


@pytest.fixture(scope="module")
def recorded() -> dict[str, list]:
    return json.loads(gzip.decompress(SNAPSHOTS.read_bytes()))


def test_the_snapshots_cover_every_page(recorded: dict[str, list]) -> None:
    assert set(recorded) == {c[0] for c in CASES}
    pages = {c[1] or "app_pages/home.py" for c in CASES}
    from specviz.app import flow

    listed = {lesson.file for lesson in flow.LESSONS}
    assert len(listed) >= 11 and listed <= pages, listed
    assert sum(c is not None for v in recorded.values() for c in v) >= 30  # compared, not just counted


@pytest.mark.parametrize("name,page,query,button", CASES, ids=[c[0] for c in CASES])
def test_every_chart_is_what_it_was(recorded: dict[str, list], name: str, page, query, button) -> None:
    now = charts(page, query, button)
    before = recorded[name]
    assert len(now) == len(before), f"{name}: {len(now)} charts, {len(before)} recorded"
    for i, (a, b) in enumerate(zip(now, before, strict=True)):
        if b is not None:
            assert same(a, b) == "", f"{name}, chart {i}: {same(a, b)}"


def test_the_comparison_sees_a_changed_number_a_changed_title_and_a_missing_key() -> None:
    """Negative controls: the comparison is not blind to the differences a rewrite could make."""
    spec = {"data": [{"type": "bar", "y": [0.25, 0.5], "name": "p"}], "layout": {"title": {"text": "T"}}}
    assert same(spec, json.loads(json.dumps(spec))) == ""
    changed = json.loads(json.dumps(spec))
    changed["data"][0]["y"][1] = 0.5 * (1 + 1e-6)
    assert "y" in same(spec, changed)
    retitled = json.loads(json.dumps(spec))
    retitled["layout"]["title"]["text"] = "U"
    assert "title" in same(spec, retitled)
    missing = json.loads(json.dumps(spec))
    del missing["data"][0]["name"]
    assert "name" in same(spec, missing)
    packed = {"y": {"dtype": "f8", "bdata": base64.b64encode(np.array([0.25, 0.5]).tobytes()).decode()}}
    assert same({"y": [0.25, 0.5]}, packed) == ""  # a list and plotly's packed array of the same numbers
    assert same({"y": [0.25, 0.75]}, packed) != ""


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_figure_snapshots.py --write   (records the charts the app sends now)")
    snaps = record()
    SNAPSHOTS.parent.mkdir(exist_ok=True)
    SNAPSHOTS.write_bytes(gzip.compress(json.dumps(snaps, sort_keys=True).encode(), mtime=0))
    counted = sum(c is None for v in snaps.values() for c in v)
    print(f"{SNAPSHOTS}: {sum(len(v) for v in snaps.values())} charts ({counted} vary between runs, counted only)")
