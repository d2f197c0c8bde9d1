"""Every Python code block of README.md and docs/*.md runs as pasted, each in a fresh namespace."""

from __future__ import annotations

import contextlib
import io
import re

import prose  # tests/ is on the path
import pytest

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
BLOCKS = [(p, i, code) for p in prose.PAGES for i, code in enumerate(BLOCK.findall(p.read_text()))]


def test_the_docs_have_python_blocks_to_run():
    pages = {p.name for p, _, _ in BLOCKS}
    assert {"README.md", "models.md"} <= pages, pages


@pytest.mark.parametrize(("page", "index", "code"), BLOCKS, ids=[f"{p.name}#{i}" for p, i, _ in BLOCKS])
def test_block_runs(page, index, code, monkeypatch):
    from specviz.proof import registry

    monkeypatch.chdir(prose.ROOT)
    before = set(registry.VERIFIERS)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{page.name} block {index}", "exec"), {"__name__": f"docs_block_{index}"})
    finally:  # a block may register a verifier (design.md's worked example): leave the registry as it was
        for name in set(registry.VERIFIERS) - before:
            registry.unregister(name)


def test_the_readme_example_prints_padded_tokens():
    # The README's ten lines print tokens padded with -1 and a count per row that is accepted + 1.
    readme = next(code for p, _, code in BLOCKS if p.name == "README.md")
    env: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(readme, "README.md", "exec"), env)
    res = env["res"]
    assert (res.num_tokens == res.num_accepted + 1).all()
    for b, n in enumerate(res.num_tokens):
        assert (res.tokens[b, :n] >= 0).all() and (res.tokens[b, n:] == -1).all()


def test_the_tour_names_every_page_in_the_class_order():
    # docs/tour.md lists the app's pages in flow.LESSONS's order (the sidebar, Home and "Next" follow it).
    import re as _re

    from specviz.app import flow

    tour = (prose.ROOT / "docs" / "tour.md").read_text()
    listed = _re.findall(r"^- \*\*(.+?)\*\*:", tour, flags=_re.M)
    assert listed == [lesson.title for lesson in flow.LESSONS]
