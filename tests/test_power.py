"""``specviz power``: every figure it prints is checked against a simulation of the design it audits.

Each simulation draws TRIALS multinomial samples of the design's N from a uniform law over V shifted by
:func:`specviz.proof.power.hardest_shift`, with a fixed seed, and counts how often the design fails it.
Tolerance: the simulated rate within TOL = 0.04 of the stated power (binomial standard error at 0.9 and
2,000 trials: 0.0067; the rest is the approximations' own error). Negative controls: at half the TV the
rate is far below the power (< 0.6), and at TV 0 it is the design's level.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from scipy import stats

from specviz.cli import EXIT_OK, EXIT_USAGE, main
from specviz.proof import power as P

TRIALS = 2000
TOL = 0.04

DESIGNS = {
    "vllm-chi2": P.PRESETS["vllm-chi2"],
    "vllm-l2": P.PRESETS["vllm-l2"],
    "chi2-V10": P.Design("chi2", 5_000, 10, alpha=1e-3),
    "per-cell": P.Design("per-cell", 10_000, 10, threshold=0.017),
    "l2-V7": P.Design("l2", 20_000, 7, threshold=0.012),
}


def fails(d: P.Design, t: float, seed: int) -> float:
    """Share of TRIALS simulated runs of design ``d`` that fail a law at TV t (the hardest shape)."""
    rng = np.random.default_rng(seed)
    p = np.full(d.V, 1.0 / d.V)
    c = rng.multinomial(d.n, p + P.hardest_shift(d.V, t), size=TRIALS).astype(np.float64)  # (TRIALS, V)
    if d.test == "chi2":
        stat = ((c - d.n * p) ** 2 / (d.n * p)).sum(axis=1)
        return float((stat > stats.chi2.isf(d.alpha, d.V - 1)).mean())
    off = c / d.n - p
    if d.test == "l2":
        return float((np.sqrt((off**2).sum(axis=1)) > d.threshold).mean())
    return float((np.abs(off).max(axis=1) > d.threshold).mean())


@pytest.mark.parametrize("name", list(DESIGNS))
def test_the_smallest_tv_is_detected_at_the_stated_power(name):
    d = DESIGNS[name]
    t = P.smallest_tv(d, 0.9)
    assert 0 < t < 1
    assert P.power_at(d, t) == pytest.approx(0.9, abs=1e-6)
    assert abs(fails(d, t, seed=1) - 0.9) <= TOL, (name, t)


@pytest.mark.parametrize("name", list(DESIGNS))
def test_negative_controls_half_the_tv_and_the_exact_law(name):
    d = DESIGNS[name]
    t = P.smallest_tv(d, 0.9)
    assert fails(d, t / 2, seed=2) < 0.6  # half the TV: far from the stated power
    at_zero = fails(d, 0.0, seed=3)
    level = d.alpha if d.test == "chi2" else P.false_alarm(d)
    assert at_zero <= level + 3 * np.sqrt(max(level, 1e-4) / TRIALS) + 1 / TRIALS


def test_the_hardest_shape_is_a_tv_shift_that_hides_best():
    d = P.hardest_shift(7, 0.1)
    assert abs(d).sum() / 2 == pytest.approx(0.1) and d.sum() == pytest.approx(0.0, abs=1e-15)
    # Another shape of the same TV (all of it on two cells) is easier for every design.
    other = np.zeros(7)
    other[0], other[1] = 0.1, -0.1
    p = np.full(7, 1 / 7)
    assert (other**2 / p).sum() > (d**2 / p).sum() and abs(other).max() > abs(d).max()


def test_the_paired_test_rows_see_a_mismatch_at_the_stated_power():
    rng = np.random.default_rng(4)
    for t in (0.0149, 0.05, 1e-3):
        n = P.paired_rows(t, 0.9)
        seen = rng.binomial(n, t, size=20_000) > 0
        assert abs(seen.mean() - 0.9) <= 0.01, t
        assert (rng.binomial(n // 2, t, size=20_000) > 0).mean() < 0.75  # negative control: half the rows


def test_the_vllm_chi2_design_figure():
    # vLLM's chi-square (V = 3, 30,000 draws, level 1e-4) misses shifts below about TV 0.015.
    assert P.smallest_tv(P.PRESETS["vllm-chi2"]) == pytest.approx(0.0149, abs=5e-4)


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["power", *args])
    return code, out.getvalue(), err.getvalue()


def test_cli_prints_the_design_the_tv_and_the_paired_test():
    code, out, _ = run("--test", "chi2", "--n", "30000", "--vocab", "3", "--alpha", "1e-4", "--no-catalogue")
    text = " ".join(out.split())
    assert code == EXIT_OK
    t = P.smallest_tv(P.Design("chi2", 30_000, 3, alpha=1e-4))
    assert f"whatever the shape of the shift: {t:.3g}" in text
    assert f"specviz's paired test at the same TV: {P.paired_rows(t):,} rows" in text


def test_cli_presets_cite_their_files():
    code, out, _ = run("--no-catalogue")
    text = " ".join(out.split())
    assert code == EXIT_OK and "tests/v1/spec_decode/test_rejection_sample.py" in text
    assert "tests/v1/sample/test_rejection_sampler.py" in text


@pytest.mark.parametrize("args", [["--test", "kl", "--n", "10", "--vocab", "4"], ["--test", "l2", "--n", "10",
                                  "--vocab", "4"], ["--preset", "nope"], ["--test", "chi2", "--n", "0", "--vocab",
                                  "4"]])  # fmt: skip
def test_cli_bad_input_is_a_usage_error_naming_the_flag(args):
    code, _, err = run(*args, "--no-catalogue")
    assert code == EXIT_USAGE and "error: --" in err
