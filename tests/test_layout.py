"""The package's layering is what docs/design.md draws (issue 17, points 4 and 7).

Every import counts, function-level ones included (read with ``ast``, as
``../shared/tools/layering.py`` reads them). The picture in design.md section 2 is parsed and
each import of ``specviz.proof`` and ``specviz.verifiers`` is checked against it; a planted
upward import is the negative control.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "specviz"
MAX_LINES = 600
CATALOGUE = {"bugs", "engine_bugs", "controls", "registry", "scenarios", "report", "prove", "court"}


def modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports, anywhere in its body."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports_of(m, p, set(mods)) for m, p in mods.items()}


def drawn_ranks(group: str) -> dict[str, tuple[int, int]]:
    """(line, segment) of each module of ``group`` in design.md's picture: lower lines and later
    segments (past a ``>``) are further down."""
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("## 2. Architecture", 1)[1].split("```", 2)[1]
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"specviz.{group} "))
    ranks: dict[str, tuple[int, int]] = {}
    for i in range(start, len(lines)):
        line = lines[i]
        if i > start and (not line.startswith(" ") or line.strip() in ("|", "v")):
            break
        if len(line) <= 19 or line[19] == " ":
            continue  # a description carried over from the line above
        field = re.split(r"\s{2,}", line[19:].strip())[0]
        for s, segment in enumerate(field.split(">")):
            for mod in segment.split(","):
                if mod.strip():
                    ranks[f"specviz.{group}.{mod.strip()}"] = (i, s)
    return ranks


def violations(g: dict[str, set[str]], ranks: dict[str, tuple[int, int]], group: str) -> list[str]:
    out = []
    for a, targets in g.items():
        if not a.startswith(f"specviz.{group}."):
            continue
        for b in targets:
            if b.startswith(f"specviz.{group}.") and not ranks[b] > ranks[a]:
                out.append(f"{a} imports {b}, drawn at or above it")
    return out


@pytest.mark.parametrize("group", ["proof", "verifiers"])
def test_the_picture_names_every_module_and_every_import_points_down(group):
    g, ranks = graph(), drawn_ranks(group)
    mine = {m for m in g if m.startswith(f"specviz.{group}.")}
    assert mine == set(ranks), f"drawn but missing: {set(ranks) - mine}; missing from the picture: {mine - set(ranks)}"
    assert violations(g, ranks, group) == []


def test_a_planted_upward_import_is_found():
    """The negative control: theory importing bugs (as it once did, in a function) breaks the picture."""
    g, ranks = graph(), drawn_ranks("proof")
    g["specviz.proof.theory"] = g["specviz.proof.theory"] | {"specviz.proof.bugs"}
    assert violations(g, ranks, "proof") == ["specviz.proof.theory imports specviz.proof.bugs, drawn at or above it"]


def test_no_import_cycle_and_no_long_module():
    g = graph()
    state: dict[str, int] = {}

    def visit(m: str, path: tuple[str, ...]) -> None:
        state[m] = 1
        for t in sorted(g[m]):
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " -> ".join((*path[path.index(t) :], t)))
            if t not in state:
                visit(t, (*path, t))
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, (m,))
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    long.pop("specviz.verifiers.verify", None)  # H1's: shrinks as Rule leaves the engine
    assert long == {}


def test_theory_imports_nothing_from_the_catalogue():
    g = graph()
    theory = {m.rpartition(".")[2] for m in g["specviz.proof.theory"] if m.startswith("specviz.proof.")}
    assert theory <= {"markov", "pipeline"}
    assert not theory & CATALOGUE


def test_theory_knows_every_mistake_of_the_catalogue_by_name():
    from specviz.proof import theory
    from specviz.proof.bugs import BUGS

    assert set(theory.POSITION_LAWS) == set(BUGS)
