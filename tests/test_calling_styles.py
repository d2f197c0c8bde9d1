"""docs/calling_styles.md: each calling style's wrapper, run through prove's suite at small N.

Every ``## `` section of the page holds one Python block defining ``wrapped``. Each is run through
the suite (the reference and deterministic-drafter scenarios, N = 20,000, no controls) and the fault
probes, and the page's table is checked: every style passes the sampled law; the styles that can be
handed prove's uniforms get the probes that judge the output (not "skipped"), the others "skipped".
Negative control: the same wrappers around a mistake (``resample_from_p``, TV 0.21 in the reference
scenario) in place of the rule fail.
"""

from __future__ import annotations

import re
import types

import prose  # tests/ is on the path
import pytest

from specviz.proof.bugs import BUGS
from specviz.proof.probes import run_probes
from specviz.proof.prove import plan, run_suite

pytestmark = pytest.mark.heavy  # whole suite runs

PAGE = prose.ROOT / "docs" / "calling_styles.md"
SECTION = re.compile(r"^## (.+?)\n(.*?)(?=^## |\Z)", re.S | re.M)
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
STYLES = {title: BLOCK.findall(body) for title, body in SECTION.findall(PAGE.read_text())}
UNIFORMS = {"Explicit uniforms", "A NumPy generator", "Logits in", "One row at a time"}  # the page's table
OWN_RANDOMNESS = {"Torch's global generator", "A `torch.Generator`"}
OUTPUT_PROBES = ("zero_coin", "coin_at_ratio", "no_drafts", "last_token", "batch_invariance")
N = 20_000


def test_the_page_has_one_block_per_style_in_the_table():
    assert set(STYLES) == UNIFORMS | OWN_RANDOMNESS
    assert all(len(blocks) == 1 for blocks in STYLES.values())
    table = PAGE.read_text().lower()
    for title in UNIFORMS:
        assert re.search(rf"\| {re.escape(title.lower())} \| [^|]+ \| yes \| yes \| yes \|", table), title
    for title in OWN_RANDOMNESS:
        assert re.search(rf"\| {re.escape(title.lower())} \| [^|]+ \| yes \| skipped \| no \| yes \|", table), title


def wrapped(title: str, verify=None):
    """The block's ``wrapped``; ``verify`` replaces ``specviz.verify`` inside it (the negative control)."""
    ns: dict = {"__name__": "calling_style"}
    exec(compile(STYLES[title][0], f"calling_styles.md: {title}", "exec"), ns)
    if verify is not None:
        import specviz

        fake = types.SimpleNamespace(**{k: getattr(specviz, k) for k in specviz.__all__})
        fake.verify = verify
        ns["specviz"] = fake
    return ns["wrapped"]


def suite(fn):
    return run_suite(plan(["reference", "deterministic"], bugs=[]), fn, verifier_name="wrapped", n=N)


@pytest.mark.parametrize("title", sorted(STYLES))
def test_each_wrapper_passes_prove_and_gets_the_checks_the_table_says(title):
    fn = wrapped(title)
    res = suite(fn)
    assert [r.verdict for r in res.results] == ["pass", "pass"], [(r.scenario, r.verdict, r.error) for r in res.results]
    probes = {p.name: p for p in run_probes(fn)}
    if title in OWN_RANDOMNESS:
        assert [p.verdict for p in probes.values()] == ["skipped"]
    else:
        assert all(probes[name].verdict in ("ok", "info") for name in OUTPUT_PROBES), probes


@pytest.mark.parametrize("title", sorted(set(STYLES) - {"One row at a time"}))  # it does not call specviz.verify
def test_negative_control_the_same_wrapper_around_a_mistake_fails(title):
    res = suite(wrapped(title, verify=BUGS["resample_from_p"].verifier))
    assert res.results[0].scenario == "reference" and res.results[0].verdict == "FAIL"
