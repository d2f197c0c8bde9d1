"""docs/speed.md: every generated section is well formed, and its prose states no measured figure.

Each section is written by a benchmark run with ``--write-doc`` (benchmarks/speed_doc.py). A
section must name a command that exists and accepts the flags it names, a UTC date, the
machine, and tables whose rows parse; :func:`problems` lists what is wrong with one, and the
negative controls feed it broken sections that it must reject.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import speed_doc

ROOT = Path(__file__).resolve().parents[1]
TEXT = speed_doc.DOC.read_text()
SECTIONS = speed_doc.sections(TEXT)
WRITERS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if "speed_doc.FLAG" in p.read_text())
FIGURE = re.compile(r"-?\d[\d,]*(\.\d+)?(e-?\d+)?(x|%)?")  # a table cell that is a figure
MEASURED = re.compile(r"\b\d+(\.\d+)?x\b|\b\d+(\.\d+)? ?(s|ms|GB/s|MB)\b|\b\d+(\.\d+)?%")  # a measured figure in prose
MACHINE = re.compile(r"- machine: .+, (\d+) cores, load average [\d.]+ at the start, [\d.]+ at the end; "
                     r"numpy \S+, numba .+, torch \S+$", re.M)  # fmt: skip


@functools.cache
def help_text(script: Path) -> str:
    done = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, f"{script.name} --help exits {done.returncode}: {done.stderr[-500:]}"
    return done.stdout


def problems(name: str, body: str, now: dt.datetime | None = None) -> list[str]:
    """What is wrong with the generated section ``name`` (empty when it is well formed)."""
    out = []
    cmd = re.search(r"^- command: `(.+)`$", body, re.M)
    if not cmd:
        return ["no command line"]
    argv = shlex.split(cmd.group(1))
    script = ROOT / argv[1] if len(argv) > 1 else ROOT
    if argv[0] != "python" or not script.is_file() or script.parent != ROOT / "benchmarks":
        return [f"the command {cmd.group(1)!r} is not python benchmarks/<file>.py"]
    if script.stem != name:
        out.append(f"section {name} written by {script.name}")
    flags = [a.split("=")[0] for a in argv[2:] if a.startswith("--")]
    if speed_doc.FLAG not in flags:
        out.append(f"the command lacks {speed_doc.FLAG}")
    helped = help_text(script)
    out += [f"{script.name} --help does not name {f}" for f in flags if not re.search(rf"{f}\b", helped)]
    date = re.search(r"^- date: (\d{4}-\d\d-\d\d \d\d:\d\d) UTC", body, re.M)
    if not date:
        out.append("no UTC date")
    else:
        when = dt.datetime.strptime(date.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=dt.UTC)
        if not dt.datetime(2026, 1, 1, tzinfo=dt.UTC) <= when <= (now or dt.datetime.now(dt.UTC)):
            out.append(f"date {date.group(1)} is not a past date of this project")
    if not MACHINE.search(body):
        out.append("no machine line (CPU, cores, load average at start and end, versions)")
    tables = speed_doc.tables(body)
    if not tables:
        out.append("no table")
    for t in tables:
        if not t.caption or not t.rows or len(set(t.header)) != len(t.header) or not all(t.header):
            out.append(f"table {t.caption!r}: a caption, distinct column names and at least one row")
        for row in t.rows:
            if len(row) != len(t.header):
                out.append(f"table {t.caption!r}: row {row} has {len(row)} cells, the header {len(t.header)}")
            elif not row[0] or not any(FIGURE.fullmatch(c) for c in row[1:]):
                out.append(f"table {t.caption!r}: row {row} names nothing or holds no figure")
    return out


def prose(text: str) -> str:
    """The hand-written part: the text with every generated section cut out."""
    return speed_doc.MARKER.sub("", text)


def test_every_benchmark_that_writes_the_doc_has_its_section():
    assert {"bench_sim", "bench_verify", "peers"} <= set(WRITERS)
    assert set(SECTIONS) <= set(WRITERS), "a section no benchmark writes"
    assert {"bench_sim", "bench_verify", "peers"} <= set(SECTIONS)
    for name in WRITERS:  # a begin marker without its end (or the reverse) is not a section
        assert TEXT.count(f"<!-- {name}:begin -->") == TEXT.count(f"<!-- {name}:end -->") == (name in SECTIONS)


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_section_is_well_formed(name):
    assert problems(name, SECTIONS[name]) == []


def test_the_checker_rejects_broken_sections():
    good = SECTIONS["bench_sim"]
    assert problems("bench_sim", good) == []
    assert problems("peers", good) == ["section peers written by bench_sim.py"]
    bad_flag = good.replace("--write-doc", "--write-doc --no-such-flag", 1)
    assert problems("bench_sim", bad_flag) == ["bench_sim.py --help does not name --no-such-flag"]
    no_file = good.replace("benchmarks/bench_sim.py", "benchmarks/bench_gone.py", 1)
    assert "is not python benchmarks/<file>.py" in problems("bench_sim", no_file)[0]
    assert problems("bench_sim", re.sub(r"- date: .*\n", "", good)) == ["no UTC date"]
    past = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)  # before the section was written: its date is in the future
    assert problems("bench_sim", good, now=past)[0].endswith("is not a past date of this project")
    assert problems("bench_sim", re.sub(r"load average", "load", good)) == [
        "no machine line (CPU, cores, load average at start and end, versions)"
    ]
    short_row = re.sub(r"^(\| `python -m specviz prove`.*) \| [^|]+ \|$", r"\1 |", good, count=1, flags=re.M)
    assert short_row != good and "has 5 cells, the header 6" in " ".join(problems("bench_sim", short_row))
    words = re.sub(r"^(\| Bug lab[^|]*)\|.*$", r"\1| a | b | c | d | e |", good, count=1, flags=re.M)
    assert "holds no figure" in " ".join(problems("bench_sim", words))


def test_the_prose_states_no_measured_figure():
    hand = prose(TEXT)
    assert "<!--" not in hand.replace("`<!-- name:begin -->`", "").replace("`<!-- name:end -->`", "")
    assert MEASURED.findall(hand) == []
    # Negative control: the sentences the page used to hold are caught.
    old = "Without Numba the same tokens take about eight passes over each row (3.5-5.7x); 0.5 s; 8.7% of a call"
    assert len(MEASURED.findall(old)) == 3


def test_the_prose_names_constants_the_code_has():
    from specviz.proof import simulate
    from specviz.verifiers import _sample

    modules = {"_sample": _sample, "simulate": simulate}
    named = re.findall(r"`(_sample|simulate)\.([A-Z_]+)`", prose(TEXT))
    assert {"SUM_MARGIN", "BLOCK", "CHUNK"} <= {n for _, n in named}
    for mod, attr in named:
        assert hasattr(modules[mod], attr), f"{mod}.{attr}"
