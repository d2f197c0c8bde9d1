"""docs/speed.md's generated sections: each benchmark run with ``--write-doc`` rewrites its own.

A section sits between two markers named after the benchmark and holds the command line as it
was run, the UTC date and time, the machine (CPU model, cores, load average at the start and at
the end, numpy/numba/torch versions) and Markdown tables of the figures the benchmark printed::

    <!-- bench_sim:begin -->
    - command: `python benchmarks/bench_sim.py --write-doc`
    - date: 2026-12-01 19:40 UTC (took 3.1 min)
    - machine: AMD EPYC 7B13, 2 cores, load average 5.2 at the start, 6.1 at the end; numpy 2.4.6, ...

    | ... table ... |
    <!-- bench_sim:end -->

Everything outside the markers is hand-written prose and is left as it is. :func:`sections`
and :func:`tables` read the file back (tests/test_speed_doc.py checks every section).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "speed.md"
FLAG = "--write-doc"
FLAG_HELP = "rewrite this benchmark's section of docs/speed.md with its tables, the command, date and machine"
MARKER = re.compile(r"^<!-- (\w+):begin -->\n(.*?)^<!-- \1:end -->$", re.S | re.M)
DATE_FORMAT = "%Y-%m-%d %H:%M UTC"


class Table(NamedTuple):
    caption: str  # one line of what the table measures, printed above it in bold
    header: list[str]
    rows: list[list[str]]


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's name where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def versions() -> str:
    """numpy, numba and torch as installed ("not installed" for an absent one)."""
    out = []
    for name in ("numpy", "numba", "torch"):
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} not installed")
    return ", ".join(out)


def command_line(argv: list[str] | None = None) -> str:
    """The command as run, with the script's path relative to the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    try:
        argv[0] = str(script.relative_to(ROOT))
    except ValueError:
        pass
    return shlex.join(["python", *argv])


class Section:
    """One benchmark's generated section: open it when the run starts, add tables, write it at the end."""

    def __init__(self, name: str, argv: list[str] | None = None) -> None:
        self.name = name
        self.command = command_line(argv)
        self.start = time.time()
        self.load_start = os.getloadavg()[0]
        self.tables: list[Table] = []
        self.notes: list[str] = []

    def table(self, caption: str, header: list[str], rows: list[list[str]]) -> None:
        if any(len(r) != len(header) for r in rows):
            got = [len(r) for r in rows]
            raise ValueError(f"table {caption!r}: every row must have {len(header)} cells, got {got}")
        self.tables.append(Table(caption, header, rows))

    def note(self, line: str) -> None:
        self.notes.append(line)

    def render(self) -> str:
        took = (time.time() - self.start) / 60
        lines = [
            f"- command: `{self.command}`",
            f"- date: {time.strftime(DATE_FORMAT, time.gmtime(self.start))} (took {took:.1f} min)",
            f"- machine: {cpu_model()}, {os.cpu_count()} cores, load average {self.load_start:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end; {versions()}",
            *(f"- {n}" for n in self.notes),
        ]
        for t in self.tables:
            lines += ["", f"**{t.caption}**", "", "| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
            lines += ["| " + " | ".join(r) + " |" for r in t.rows]
        return "\n".join(lines) + "\n"

    def write(self, path: Path = DOC) -> None:
        """Replace this section between its markers (appended at the end when the file has none yet)."""
        text = path.read_text()
        block = f"<!-- {self.name}:begin -->\n{self.render()}<!-- {self.name}:end -->"
        found = [m for m in MARKER.finditer(text) if m.group(1) == self.name]
        if len(found) > 1:
            raise ValueError(f"{path}: {len(found)} sections named {self.name}, expected one")
        if found:
            m = found[0]
            text = text[: m.start()] + block + text[m.end() :]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(text)
        print(f"wrote the {self.name} section of {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def sections(text: str) -> dict[str, str]:
    """Each generated section's body, by benchmark name."""
    return {m.group(1): m.group(2) for m in MARKER.finditer(text)}


def tables(body: str) -> list[Table]:
    """The tables of a section body, each under its bold caption."""
    out: list[Table] = []
    caption = ""
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("**") and line.endswith("**"):
            caption = line.strip("*")
        elif line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(---\|)+", lines[i + 1]):
            header = cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            out.append(Table(caption, header, rows))
            continue
        i += 1
    return out


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def x(ratio: float) -> str:
    """A ratio as the tables print it."""
    return f"{ratio:.2f}x"
