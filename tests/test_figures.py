"""Figure builders: the traces hold the exact numbers, not just the right shapes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from specviz import verify
from specviz.app import figures
from specviz.proof import stats, theory
from specviz.verifiers.verify import Uniforms

REF_P = np.array([0.5, 0.3, 0.15, 0.05])
PAIRS = [
    (REF_P, np.full(4, 0.25)),  # the reference example
    (REF_P, REF_P),  # a = 1
    (np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.5, 0.5])),  # a = 0
    (np.array([0.1, 0.6, 0.1, 0.2]), np.array([0.4, 0.1, 0.4, 0.1])),
    (np.array([0.0, 0.2, 0.0, 0.3, 0.5, 0.0, 0.0]), np.array([0.25, 0.0, 0.25, 0.0, 0.0, 0.25, 0.25])),
]


def trace(fig, name: str):
    matches = [t for t in fig.data if t.name == name]
    assert len(matches) == 1, [t.name for t in fig.data]
    return matches[0]


@pytest.mark.parametrize("p, q", PAIRS)
def test_decomposition_bar_traces_sum_to_p(p, q):
    fig = figures.decomposition_bar(p, q)
    accepted = np.asarray(trace(fig, "accepted: min(p, q)").y)
    replaced = np.asarray(trace(fig, "replaced: (1 − a)·residual").y)
    np.testing.assert_allclose(accepted + replaced, p, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(accepted, np.minimum(p, q))
    np.testing.assert_array_equal(np.asarray(trace(fig, "target p").y), p)
    assert fig.layout.barmode == "stack"
    assert f"a = {theory.acceptance_rate(p, q):.4f}" in fig.layout.title.text


def test_law_comparison_shows_the_law_the_samples_and_their_error_bars():
    p, q = PAIRS[0]
    law = theory.position_law(p, q, "resample_from_p")
    freq = np.array([0.4, 0.35, 0.2, 0.05])
    fig = figures.law_comparison(p, law, freq, n=1000, law_name="exact law")
    np.testing.assert_array_equal(trace(fig, "target p").y, p)
    np.testing.assert_allclose(trace(fig, "exact law").y, [0.4, 0.34, 0.195, 0.065], atol=1e-12)  # min(p, q) + 0.3 p
    sampled = trace(fig, "sampled (1,000 rows)")
    np.testing.assert_array_equal(sampled.y, freq)
    np.testing.assert_allclose(sampled.error_y.array, 2 * np.sqrt(law * (1 - law) / 1000), rtol=1e-12)


def test_law_comparison_without_a_law_compares_samples_with_p():
    fig = figures.law_comparison(REF_P, None, REF_P, n=10)
    assert [t.name for t in fig.data] == ["target p", "sampled (10 rows)"]
    np.testing.assert_allclose(fig.data[1].error_y.array, 2 * np.sqrt(REF_P * (1 - REF_P) / 10))


@pytest.fixture
def crafted():
    """Four rows whose fate is certain: p = [1, 0] everywhere and q = [0.5, 0.5].

    Token 0 has p/q = 2 (always accepted), token 1 has p = 0 (always rejected).
    """
    B, K, V = 4, 3, 2
    target = np.tile([1.0, 0.0], (B, K + 1, 1))  # (B, K+1, V)
    draft = np.full((B, K, V), 0.5)  # (B, K, V)
    tokens = np.array([[0, 0, -1], [0, 1, 0], [-1, -1, -1], [1, 0, 0]])
    num_draft = np.array([2, 3, 0, 3])
    u = Uniforms(np.full((B, K), 0.5), np.full(B, 0.5))
    return verify(target, draft, tokens, num_draft, uniforms=u), num_draft, tokens


def test_strip_states_name_every_slot(crafted):
    res, num_draft, _ = crafted
    A, R, BON, NR, ND = range(5)
    assert figures.STATES == ("accepted", "replaced", "bonus", "not reached", "no draft")
    np.testing.assert_array_equal(
        figures.strip_states(res, num_draft),
        [
            [A, A, BON, ND],  # both drafts accepted, bonus at slot num_draft = 2
            [A, R, NR, ND],  # rejected at 1: replaced there, slot 2's draft never counts
            [BON, ND, ND, ND],  # no drafts: the bonus is the only token
            [R, NR, NR, ND],
        ],
    )


def test_token_strips_cells_hold_codes_tokens_and_the_coins(crafted):
    res, num_draft, tokens = crafted
    fig = figures.token_strips(res, num_draft, tokens, max_rows=32)
    heat = fig.data[0]
    np.testing.assert_array_equal(np.asarray(heat.z), figures.strip_states(res, num_draft))
    assert [list(r) for r in heat.text] == [
        ["0", "0", "0", ""],
        ["0", "0", "(0)", ""],
        ["0", "", "", ""],
        ["0", "(0)", "(0)", ""],
    ]
    assert "u = 0.5000, p/q = 2.0000 → accept" in heat.customdata[0][0]
    assert "u = 0.5000, p/q = 0.0000 → reject" in heat.customdata[1][1]
    assert "emitted 0 (sampling u = 0.5000)" in heat.customdata[2][0]


def test_token_strips_cap_the_rows_shown():
    rng = np.random.default_rng(0)
    B, K, V = 50, 2, 3
    target = rng.dirichlet(np.ones(V), size=(B, K + 1))
    draft = rng.dirichlet(np.ones(V), size=(B, K))
    res = verify(target, draft, rng.integers(0, V, size=(B, K)), np.full(B, K), rng=rng)
    heat = figures.token_strips(res, np.full(B, K), max_rows=32).data[0]
    assert np.asarray(heat.z).shape == (32, K + 1)
    assert list(heat.y)[-1] == "row 31"


def test_accepted_histogram_counts_rows():
    acc = np.array([0, 0, 1, 3, 3, 3])
    fig = figures.accepted_histogram(acc, 4, num_draft=np.array([4, 4, 1, 3, 4, 4]))
    np.testing.assert_array_equal(trace(fig, "accepted drafts").y, [2, 1, 0, 3, 0])
    np.testing.assert_array_equal(trace(fig, "drafts per row").y, [0, 1, 0, 1, 4])


def test_sequence_labels_follow_the_order_of_stats_counts():
    seqs = np.array([[1, 2, 0], [2, 2, 2], [0, 0, 1]])
    counts = stats.counts(seqs, V=3, L=3)
    labels = figures.sequence_labels(3, 3)
    assert sorted(labels[i] for i in np.flatnonzero(counts)) == ["0 0 1", "1 2 0", "2 2 2"]


def test_joint_comparison_holds_law_frequencies_and_pearson_residuals():
    law = np.array([[0.5, 0.2], [0.3, 0.0]])  # (V,) * L with V = 2, L = 2 and an impossible cell
    observed = np.array([48.0, 22.0, 30.0, 0.0])
    fig = figures.joint_comparison(observed, law, 2, 2)
    np.testing.assert_array_equal(trace(fig, "exact target law").y, law.ravel())
    np.testing.assert_allclose(trace(fig, "observed frequency").y, observed / 100)
    resid = np.asarray(trace(fig, "Pearson residual").y, dtype=float)
    np.testing.assert_allclose(resid[:3], (observed[:3] - 100 * law.ravel()[:3]) / np.sqrt(100 * law.ravel()[:3]))
    assert np.isnan(resid[3])
    assert list(fig.data[0].x) == ["0 0", "0 1", "1 0", "1 1"]


def test_tokens_curve_draws_theory_and_measured_points():
    Ks = list(range(6))
    a = 0.7
    with_b = [theory.expected_tokens(a, k) for k in Ks]
    without = [theory.expected_tokens(a, k, bonus=False) for k in Ks]
    se = np.full(6, 0.01)
    fig = figures.tokens_curve(Ks, with_b, without, measured=(np.array(with_b) + 0.001, se), K_mark=3)
    np.testing.assert_allclose(trace(fig, "theory, with bonus").y, with_b)
    assert trace(fig, "theory, with bonus").y[3] == pytest.approx(2.533, abs=1e-12)
    assert trace(fig, "theory, no bonus").y[3] == pytest.approx(2.19, abs=1e-12)
    np.testing.assert_allclose(trace(fig, "measured, with bonus").error_y.array, 2 * se)
    assert [t.name for t in fig.data].count("measured, no bonus") == 0


def test_speedup_curve_marks_the_best_k():
    fig = figures.speedup_curve([0, 1, 2, 3], [1.0, 1.5, 1.7, 1.6], best_K=2)
    star = trace(fig, "best K = 2")
    assert list(star.x) == [2] and list(star.y) == [1.7]


def test_figures_load_nothing_from_the_network():
    p, q = PAIRS[3]
    figs = [
        figures.decomposition_bar(p, q),
        figures.law_comparison(p, p, p, n=5),
        figures.joint_comparison(np.ones(8), np.full((2, 2, 2), 1 / 8), 2, 3),
        figures.tokens_curve([0, 1], [1, 2], [0, 1]),
        figures.timing_bar(["NumPy"], [1.0]),
    ]
    for fig in figs:
        text = json.dumps(fig.to_plotly_json(), default=str)
        assert "http" not in text.replace("plotly_white", "")
        assert "mathjax" not in text.lower()


def test_the_package_never_imports_streamlit():
    code = (
        "import importlib, pkgutil, sys, specviz\n"
        "mods = pkgutil.walk_packages(specviz.__path__, 'specviz.')\n"
        "names = [m.name for m in mods if not m.ispkg and m.name != 'specviz.__main__']  # __main__ runs the CLI\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "print(' '.join(names))\n"
        "print('streamlit' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    names, streamlit_loaded = out.stdout.splitlines()
    app = {"figures", "links", "limits", "position", "batch_demo", "speed", "presenter", "results", "text"}
    assert {f"specviz.app.{m}" for m in app} | {"specviz.verifiers.verify", "specviz.proof.prove"} <= set(names.split())
    assert streamlit_loaded == "False"


@pytest.mark.parametrize("p, q", PAIRS)
def test_decomposition_bar_draws_q(p, q):
    np.testing.assert_array_equal(trace(figures.decomposition_bar(p, q), "draft q").y, q)


def test_law_comparison_with_one_sample_marks_the_token_and_draws_no_histogram():
    fig = figures.law_comparison(REF_P, REF_P, np.array([0.0, 0.0, 1.0, 0.0]), n=1)
    names = [t.name for t in fig.data]
    assert not any(n.startswith("sampled") for n in names)
    star = trace(fig, "one sample: token 2")
    assert list(star.x) == ["token 2"] and REF_P[2] < star.y[0] < REF_P[2] + 0.1  # just above its bar
    # negative control: two samples are a histogram again
    fig2 = figures.law_comparison(REF_P, REF_P, np.array([0.0, 0.5, 0.5, 0.0]), n=2)
    assert "sampled (2 rows)" in [t.name for t in fig2.data]


@pytest.mark.parametrize("n", [2, 3, 10, 10_000])
def test_law_comparison_error_bars_stay_within_zero_and_one(n):
    rng = np.random.default_rng(n)
    freq = np.bincount(rng.choice(4, size=n, p=REF_P), minlength=4) / n
    err = trace(figures.law_comparison(REF_P, None, freq, n=n), f"sampled ({n:,} rows)").error_y
    half = 2 * np.sqrt(REF_P * (1 - REF_P) / n)
    assert np.all(freq - np.asarray(err.arrayminus) >= -1e-15) and np.all(freq + np.asarray(err.array) <= 1 + 1e-15)
    np.testing.assert_allclose(err.array, np.minimum(half, 1 - freq))
    np.testing.assert_allclose(err.arrayminus, np.minimum(half, freq))
