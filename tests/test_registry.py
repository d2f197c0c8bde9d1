"""The verifier registry (issue 17, point 5): each entry's claims hold, and everyone reads it.

# B rows, K drafts, V vocabulary, N tree nodes

What an entry declares is checked, not trusted: "lossless" against the exact court on the
block-verification paper's toy problem (where each lossy rule of the package is lossy), the
reference against the function token for token on the same uniforms, the signature against
the way prove calls it. docs/design.md's worked example (a new verifier in one module and one
entry) is run as written.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from specviz.cli import main
from specviz.errors import InputError
from specviz.proof import controls, court, registry
from specviz.proof.markov import Drafter
from specviz.proof.scenarios import SCENARIOS, scenario_chains
from specviz.verifiers.verify import Uniforms

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = list(registry.VERIFIERS.values())
TOL = 1e-12


def test_court_rules_are_the_registry_in_its_order():
    before = ["chain", "block", "tree (chain-shaped)", "sample-and-match", "block, lossy last threshold",
              "typical acceptance (Medusa)", "lenient acceptance (theta = 3/4)",
              "ratio threshold (p/q >= 1/2)"]  # fmt: skip
    assert list(court.RULES) == before  # the court's table keeps its rows
    assert court.RULES is registry.court_rules()
    for e in ENTRIES:
        if e.signature == "verify":
            assert court.RULES[e.title] is e.function


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.signature == "verify"], ids=lambda e: e.name)
def test_declared_lossless_is_what_the_court_finds(entry):
    j = court.judge(entry.title, court.toy_problem())
    assert j.lossless is entry.lossless, (entry.name, j.tv_from_target)
    if not entry.lossless:
        assert j.tv_from_target > 1e-3


def test_the_tree_entry_is_lossless_on_a_real_tree():
    (e,) = [e for e in ENTRIES if e.signature == "tree"]
    target, draft = scenario_chains(SCENARIOS["reference"])
    j = court.judge_tree(target, Drafter(draft), (-1, 0, 0), L=2, verifier=e.function)
    assert j.lossless and e.lossless
    # The negative control: the tree kind's mistake, through the same door, is lossy.
    (bug,) = controls.kind_controls("tree").values()
    assert not court.judge_tree(target, Drafter(draft), (-1, 0, 0), L=2, verifier=bug.verifier).lossless


def _chain_inputs(rng: np.random.Generator, B: int = 9, K: int = 3, V: int = 5):
    def rows(*shape):
        w = rng.random(shape) * (rng.random(shape) < 0.7)  # zeros in the supports
        w[..., 0] += 1e-3
        return w / w.sum(-1, keepdims=True)

    T, D = rows(B, K + 1, V), rows(B, K, V)
    x = np.stack([[rng.choice(V, p=D[b, i]) for i in range(K)] for b in range(B)])
    j = rng.integers(0, K + 1, B)
    return T, D, x, j, Uniforms(rng.random((B, K)), rng.random(B))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.reference], ids=lambda e: e.name)
def test_each_reference_gives_the_functions_tokens_on_the_same_uniforms(entry):
    ref = registry.resolve(entry.reference)
    assert callable(ref), entry.reference
    rng = np.random.default_rng(17)
    if entry.signature == "tree":
        B, N, V = 6, 5, 4
        par = np.broadcast_to(np.array([-1, 0, 0, 1, 2]), (B, N))
        T = rng.dirichlet(np.ones(V), (B, N))
        D = rng.dirichlet(np.ones(V), (B, N))
        toks = rng.integers(0, V, (B, N))
        args = (T, D, toks, par, np.full(B, N))
        u = Uniforms(rng.random((B, N - 1)), rng.random(B))
    else:
        *args, u = _chain_inputs(rng)
    mine, theirs = entry.function(*args, uniforms=u), ref(*args, uniforms=u)
    assert np.array_equal(np.asarray(mine.tokens), np.asarray(theirs.tokens))
    assert np.array_equal(np.asarray(mine.num_tokens), np.asarray(theirs.num_tokens))


def test_a_wrong_reference_would_be_caught():
    """The negative control for the parity test: the chain's entry against a reference with one
    step swapped (resample_from_p) differs on these very inputs."""
    from specviz.proof.bugs import BUGS

    rng = np.random.default_rng(17)
    *args, u = _chain_inputs(rng, B=64)
    mine = registry.get("verify").function(*args, uniforms=u).tokens
    assert not np.array_equal(mine, BUGS["resample_from_p"].verifier(*args, uniforms=u).tokens)


def test_each_kind_has_one_own_verifier_whose_mistakes_are_its_controls():
    for kind in controls.KINDS:
        own = registry.own_verifier(kind)
        assert own.kind == kind and own.own and own.lossless
        assert own.mistakes == controls.kind_controls(kind) and own.mistakes
    assert all(not e.mistakes for e in ENTRIES if not e.own)
    with pytest.raises(InputError, match="kind"):
        registry.own_verifier("forest")


def test_signatures_are_declared_and_sniffed_only_for_strangers():
    assert registry.signature_of(registry.get("verify_tree").function) == "tree"
    assert registry.signature_of(registry.get("verify_tree_chain").function) == "verify"
    (tree_bug,) = controls.kind_controls("tree").values()
    assert registry.signature_of(tree_bug.verifier, "tree") == "tree"

    def stranger(target_probs, draft_probs, node_tokens, parents, num_nodes, *, uniforms=None):
        pass

    def declared(*args, **kwargs):
        pass

    declared.signature = "tree"  # type: ignore[attr-defined]
    assert registry.signature_of(stranger) == "tree"  # no declaration: its parameters are read
    assert registry.signature_of(declared) == "tree"  # no parameter names, but declared
    assert registry.signature_of(lambda *a, **k: None) == "verify"
    declared.signature = "forest"  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="signature"):
        registry.signature_of(declared)


def test_a_malformed_registry_is_refused():
    bad = registry.get("verify")._replace(name="other", title="other")  # a second own chain verifier
    with pytest.raises(InputError, match="exactly one own verifier"):
        registry.check({**registry.VERIFIERS, "other": bad})
    with pytest.raises(InputError, match="kind"):
        registry.check({"x": bad._replace(kind="forest")})
    with pytest.raises(InputError, match="already|not yet registered"):
        registry.register(registry.get("verify"))
    with pytest.raises(InputError, match="package's own"):
        registry.unregister("verify")


def test_specviz_list_shows_every_entry():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["list"]) == 0
    text = out.getvalue()
    for e in ENTRIES:
        line = next(line for line in text.splitlines() if line.startswith(f"verifier {e.name} "))
        assert f"kind={e.kind} signature={e.signature} {'lossless' if e.lossless else 'LOSSY'}" in line


def test_prove_kind_runs_the_registrys_own_verifier():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["prove", "--quiet", "--kind", "block", "--n", "2000", "--scenarios", "reference", "--bugs", "none"])
    assert " verify_block " in out.getvalue()


def test_the_worked_example_in_design_md_runs():
    text = (ROOT / "docs" / "design.md").read_text()
    section = text.split("A worked example (`tests/test_registry.py` runs this block)", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("**A new bug**", 1)[0], re.S)
    try:
        exec(compile(code, "design.md worked example", "exec"), {"__name__": "worked_example"})
        entry = registry.get("verify_mirrored")
        assert court.RULES["chain, mirrored coins"] is entry.function  # the court sees the new entry
    finally:
        registry.unregister("verify_mirrored")
    assert "chain, mirrored coins" not in court.RULES


def test_the_verifiers_page_shows_the_registry():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app_pages" / "verifiers.py"), default_timeout=180)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (shown,) = [t.value for t in at.table if "verifier" in t.value.columns]
    assert list(shown["verifier"]) == list(registry.VERIFIERS)
    assert list(shown["claims"]) == ["lossless" if e.lossless else "LOSSY" for e in ENTRIES]


def test_sample_match_line_says_what_it_draws_with():
    """Issue 29: the line said "with the drafter's coins"; the rule draws y ~ p with its own uniform, q unused."""
    entry = registry.VERIFIERS["verify_sample_match"]
    assert "drafter's coins" not in entry.summary and "uniform of its own" in entry.summary
    rng = np.random.default_rng(29)
    B, K, V = 7, 3, 5  # B rows, K drafts, V vocabulary
    p = rng.dirichlet(np.ones(V), size=(B, K + 1))
    drafts = rng.integers(0, V, size=(B, K))
    u = Uniforms(rng.random((B, K)), rng.random(B))
    num = np.full(B, K)
    outs = [entry.function(p, rng.dirichlet(np.ones(V), size=(B, K)), drafts, num, uniforms=u) for _ in range(2)]
    assert np.array_equal(outs[0].tokens, outs[1].tokens)  # two drafters' q, the same uniforms: the same tokens
    other = entry.function(p, None, drafts, num, uniforms=Uniforms(1 - u.accept, u.sample))
    assert not np.array_equal(other.tokens, outs[0].tokens)  # control: its own uniforms decide the draws
