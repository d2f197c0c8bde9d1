"""specviz.app.results: verdicts that carry their power, and the records the pages let people download."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from scipy.stats import binom

from specviz.app import batch_demo, results, speed
from specviz.proof import prove, report, scenarios, stats, theory
from specviz.proof.bugs import BUGS


@pytest.fixture(scope="module")
def big_pass():
    return prove.run_case("reference", n=100_000, seed=0)


@pytest.mark.parametrize("n", [1, 5, 30])
def test_a_powerless_case_is_inconclusive_never_pass_or_fail(n):
    """Issue 7 item 9: at N = 1 the joint test has 0 dof, at N <= 30 the z-test's SE is 0 or unreliable."""
    for bug in (None, "shared_uniform"):
        res = prove.run_case("reference", n=n, seed=0, bug=BUGS[bug] if bug else None)
        v = results.case_verdict(res, bug or "the correct verifier")
        assert v.word == "inconclusive", (n, bug, v)
        assert v.needed_n is not None and v.needed_n > n
        assert f"need N ≥ {v.needed_n:,}" in v.line
        assert not v.good


def test_a_powered_pass_says_what_it_could_have_seen(big_pass):
    v = results.case_verdict(big_pass, "the correct verifier")
    assert v.word == "pass" and v.good and v.needed_n is None
    assert v.detectable_tv == big_pass.joint.detectable_tv < stats.MIN_TV
    assert f"TV ≥ {big_pass.joint.detectable_tv:.4f} with 99% probability" in v.line
    assert f"a shift of {v.tokens.detectable:.4f} tokens per verification" in v.line


def test_negative_control_a_bug_with_power_is_caught():
    res = prove.run_case("reference", n=100_000, seed=0, bug=BUGS["resample_from_p"])
    v = results.case_verdict(res, "resample_from_p")
    assert v.word == "caught" and v.good
    assert results.joint_says(res.joint) == "fail"


def test_test_words_follow_conclusive():
    base = stats.chi_square(np.array([10.0, 10.0]), np.array([0.5, 0.5]))  # n = 20: too few to speak
    assert not base.conclusive and results.joint_says(base) == "inconclusive"
    strong = stats.chi_square(np.array([60_000.0, 40_000.0]), np.array([0.5, 0.5]))
    assert strong.conclusive and results.joint_says(strong) == "fail"
    fine = stats.chi_square(np.array([50_100.0, 49_900.0]), np.array([0.5, 0.5]))
    assert results.joint_says(fine) == "pass"
    assert results.tokens_says(stats.mean_test(3.0, 2.5, 0.0, 2)) == "inconclusive"  # the "± 0.0000" case
    assert results.tokens_says(stats.mean_test(2.6, 2.5, 0.001, 10_000)) == "fail"
    assert results.tokens_says(stats.mean_test(2.5005, 2.5, 0.001, 10_000)) == "pass"
    assert results.z_critical(0.001) == pytest.approx(3.2905, abs=1e-4)


def test_point_text_never_shows_a_zero_error_at_tiny_n():
    m = speed.measure_tokens(*speed.two_token_pair(0.7), [3], 2, seed=0)
    t = results.tokens_point(m.mean[0], m.se[0], m.n, theory.expected_tokens(0.7, 3))
    assert "inconclusive: 2 rows is too few" in results.point_text(t) and "±" not in results.point_text(t)
    big = speed.measure_tokens(*speed.two_token_pair(0.7), [3], 50_000, seed=0)
    t = results.tokens_point(big.mean[0], big.se[0], big.n, theory.expected_tokens(0.7, 3))
    assert results.point_text(t) == f"{big.mean[0]:.4f} ± {big.se[0]:.4f}"


def test_case_record_carries_the_prove_json_fields_the_counts_and_the_law(big_pass):
    from specviz.cli import to_json as prove_json

    record = results.case_record(big_pass, bug=None, n=100_000, seed=0, V=4, L=3)
    back = json.loads(results.to_json(record))
    assert set(prove_json(big_pass)) <= set(back)
    assert back["verdict"] == "pass" and back["n"] == 100_000 and back["bug"] is None
    assert back["joint"]["statistic"] == pytest.approx(big_pass.joint.statistic)
    cells = back["cells"]
    assert len(cells) == 4**3 and cells[0]["sequence"] == "0 0 0" and cells[-1]["sequence"] == "3 3 3"
    np.testing.assert_array_equal([c["observed"] for c in cells], big_pass.observed)
    np.testing.assert_allclose([c["exact_probability"] for c in cells], big_pass.law.ravel(), rtol=0, atol=0)
    assert sum(c["observed"] for c in cells) == 100_000


def test_csv_reads_back_and_json_is_strict():
    rows = [{"a": 1, "b": float("nan"), "c": "x y"}, {"a": 2, "b": 0.5, "c": None}]
    back = list(csv.DictReader(io.StringIO(results.to_csv(rows))))
    assert back == [{"a": "1", "b": "", "c": "x y"}, {"a": "2", "b": "0.5", "c": ""}]
    text = results.to_json({"x": float("inf"), "y": np.float32(0.25), "z": np.arange(3)})
    assert json.loads(text) == {"x": None, "y": 0.25, "z": [0, 1, 2]}
    assert results.to_csv([]) == ""


def test_an_error_case_records_without_nan():
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    res = prove.run_case("reference", broken, n=100, seed=0)
    v = results.case_verdict(res, "mine")
    assert v.word == "ERROR" and "boom" in v.line
    json.loads(results.to_json(results.case_record(res, bug=None, n=100, seed=0, V=4, L=3)))


def test_batch_record_holds_settings_timings_threads_and_the_rows_shown():
    j = batch_demo.draft_counts("random 0..K", 10, 3, seed=1)
    rep = batch_demo.run_batch_demo(10, 3, 7, j, "peaked", 1.0, 1, "NumPy", ["NumPy", "PyTorch CPU"], max_rows=4)
    record = json.loads(results.to_json(results.batch_record(rep, {"B": 10, "K": 3, "seed": 1})))
    assert record["settings"] == {"B": 10, "K": 3, "seed": 1} and record["rows"] == 10
    assert [t["backend"] for t in record["timings"]] == ["NumPy", "PyTorch CPU"]
    import torch

    assert record["timings"][1]["threads"] == torch.get_num_threads() and record["timings"][0]["threads"] is None
    rows = record["rows_kept"]
    assert len(rows) == 4
    for b, r in enumerate(rows):
        n_tok = int(rep.head.num_tokens[b])
        assert r["emitted_tokens"] == " ".join(str(int(x)) for x in rep.head.tokens[b, :n_tok])
        assert len(r["draft_tokens"].split()) == r["num_draft"] == int(j[b])
    assert sum(record["accepted_histogram"]) == 10
    assert list(csv.DictReader(io.StringIO(results.to_csv(results.batch_rows(rep)))))[0]["row"] == "0"


def test_tokens_rows_hold_theory_and_measurement_per_k():
    Ks = [0, 1, 2]
    pq = speed.two_token_pair(0.6)
    w, wo = speed.measure_tokens(*pq, Ks, 500, 0), speed.measure_tokens(*pq, Ks, 500, 0, bonus=False)
    tw = [theory.expected_tokens(0.6, k) for k in Ks]
    two = [theory.expected_tokens(0.6, k, bonus=False) for k in Ks]
    rows = results.tokens_rows(Ks, 0.6, w, wo, tw, two)
    assert [r["K"] for r in rows] == Ks
    assert rows[2]["theory_with_bonus"] == pytest.approx(1 + 0.6 + 0.36)
    assert rows[2]["theory_without_bonus"] == pytest.approx(1 + 0.6)
    assert rows[1]["measured_with_bonus"] == w.mean[1] and rows[1]["se_without_bonus"] == wo.se[1]
    assert rows[0]["rows_with_bonus"] == 500
    empty = results.tokens_rows(Ks, 0.6, None, None, tw, two)
    assert empty[0]["measured_with_bonus"] is None


@pytest.mark.parametrize("needed, suggested", [(1, 2), (8, 10), (99, 130), (8_347, 11_000), (123_456, 160_000)])
def test_suggested_n_adds_a_margin_and_rounds_up(needed, suggested):
    assert results.suggested_n(needed) == suggested >= needed * results.SUGGEST_MARGIN


def test_an_impossible_sequence_is_a_certain_fail_not_a_false_alarm():
    from specviz import verify

    def shifted(*args, **kw):  # emits the next token id: sequences the one-hot target cannot produce
        res = verify(*args, **kw)
        toks = np.asarray(res.tokens)
        return res._replace(tokens=np.where(toks >= 0, (toks + 1) % 4, toks))

    bad = prove.run_case("greedy", shifted, n=2_000, seed=0, name="shifted")
    v = results.case_verdict(bad)
    assert bad.joint.impossible and v.word == "FAIL" and "certain" in v.head and "false alarm" not in v.head
    # Control: a failure with no impossible cell keeps the usual wording.
    other = prove.run_case("reference", BUGS["resample_from_p"].verifier, n=20_000, seed=0, name="mine")
    w = results.case_verdict(other)
    assert not other.joint.impossible and w.word == "FAIL" and "false alarm" in w.head and "certain" not in w.head


# --- issue 19: a rejection at the stated level is a fail; Monte Carlo p-values at small N -----------


def test_a_rejection_without_power_is_a_fail_with_its_power_beside_it():
    """N = 300: the joint test lacks power (detectable TV > 0.05) but rejects shared_uniform at p ~ 4e-6."""
    res = prove.run_case("reference", n=300, seed=0, bug=BUGS["shared_uniform"])
    assert not res.joint.conclusive and res.joint.p_value < res.joint.alpha  # what the issue saw
    v = results.case_verdict(res, "shared_uniform")
    assert v.word == "caught" and v.good
    assert v.joint_p.method == "Monte Carlo" and v.joint_p.rejects and v.joint_p.p_value <= res.joint.alpha
    assert "low power voids a pass, not a rejection" in v.head
    assert f"TV ≥ {res.joint.detectable_tv:.4f}" in v.seen  # the power, beside the verdict
    assert results.joint_says(res.joint, v.joint_p) == "fail"
    # Negative control: the correct verifier at the same N does not reject, and without power it cannot pass.
    ok = results.case_verdict(prove.run_case("reference", n=300, seed=0), "the correct verifier")
    assert ok.word == "inconclusive" and not ok.joint_p.rejects and ok.joint_p.method == "Monte Carlo"


def test_a_correct_verifier_with_power_is_never_failed_by_the_monte_carlo_rule():
    for seed in range(3):
        v = results.case_verdict(prove.run_case("reference", n=100_000, seed=seed), "the correct verifier", seed=seed)
        assert v.word == "pass" and v.joint_p.method == "chi-square"


MC_TRIALS, MC_LEVEL, MC_N = 300, 0.05, 300
# Rejections of a valid level-0.05 test in 300 independent datasets are at most Binomial(300, 0.05):
# more than this many happens with probability below 0.001.
MC_CRITICAL = int(binom.isf(0.001, MC_TRIALS, MC_LEVEL))


def mc_rejections(sample_law: np.ndarray, null_law: np.ndarray) -> int:
    rng = np.random.default_rng(19)
    hits = 0
    for t in range(MC_TRIALS):
        obs = rng.multinomial(MC_N, sample_law).astype(np.float64)
        p, _, _ = results.mc_p_value(obs, null_law, draws=199, seed=t, alpha=MC_LEVEL)
        hits += p <= MC_LEVEL
    return hits


def test_monte_carlo_p_value_is_calibrated_under_the_exact_law():
    """Under the law itself the Monte Carlo test rejects at rate <= alpha (fixed seeds, critical value above)."""
    law = scenarios.scenario_chains(scenarios.SCENARIOS["reference"])[0].joint_law(3).ravel()
    hits = mc_rejections(law, law)
    assert hits <= MC_CRITICAL, (hits, MC_CRITICAL)
    assert hits >= 1  # not a test that never rejects: its expected count is about 15


def test_negative_control_monte_carlo_calibration_fails_for_a_moved_law():
    """The same check on samples from a buggy verifier's exact law must exceed the critical value."""
    law = scenarios.scenario_chains(scenarios.SCENARIOS["reference"])[0].joint_law(3).ravel()
    moved = report.exact_bug_law("reference", "resample_from_p").ravel()
    assert 0.5 * np.abs(moved - law).sum() > 0.05
    assert mc_rejections(moved, law) > MC_CRITICAL


def test_monte_carlo_p_value_agrees_with_chi_square_where_the_approximation_holds():
    """Two cells at N = 10,000: the pooled statistic is chi-square(1) to good accuracy."""
    obs, law = np.array([5_120.0, 4_880.0]), np.array([0.5, 0.5])
    p, stat, _ = results.mc_p_value(obs, law, draws=19_999, seed=0)
    chi = stats.chi_square(obs, law)
    assert stat == pytest.approx(chi.statistic)
    assert p == pytest.approx(chi.p_value, abs=0.005)  # 0.0164: Monte Carlo SE ~ 0.0009


def test_p_values_never_print_as_zero():
    import mpmath

    for x, dof in ((2_000.0, 35), (20_000.0, 40), (600.0, 35)):
        exact = float(mpmath.log10(mpmath.gammainc(dof / 2, x / 2, mpmath.inf, regularized=True)))
        assert results.chi2_log10_sf(x, dof) == pytest.approx(exact, abs=1e-9)
    res = prove.run_case("reference", n=100_000, seed=0, bug=BUGS["resample_from_p"])
    assert res.joint.p_value == 0.0  # the float underflows
    jp = results.joint_p_value(res)
    text = results.p_text(jp)
    mantissa, exponent = text.split("e")
    exact = stats_chi2_log10(res.joint.statistic, res.joint.dof)
    assert 1 <= float(mantissa) < 10 and int(exponent) == int(np.floor(exact)) < -300  # 1.93e-6426, not "0"
    assert np.log10(float(mantissa)) + int(exponent) == pytest.approx(exact, abs=0.01)


def stats_chi2_log10(x: float, dof: int) -> float:
    import mpmath

    return float(mpmath.log10(mpmath.gammainc(dof / 2, x / 2, mpmath.inf, regularized=True)))


def test_monte_carlo_p_value_refuses_bad_input():
    with pytest.raises(ValueError, match="observed"):
        results.mc_p_value(np.ones(3), np.full(4, 0.25))
    with pytest.raises(ValueError, match="draws"):
        results.mc_p_value(np.ones(4), np.full(4, 0.25), draws=0)


def test_monte_carlo_pooling_is_the_chi_square_pooling():
    rng = np.random.default_rng(5)
    for n in (1, 10, 300, 5_000):
        for C in (2, 7, 64):
            law = rng.dirichlet(np.full(C, 0.3))
            obs = rng.multinomial(n, law).astype(np.float64)
            o, e = stats._pool(obs, n * law, stats.MIN_EXPECTED)
            pool = results._pooling(law, n)
            assert np.allclose(np.sort(pool @ obs), np.sort(o)) and np.allclose(np.sort(pool @ (n * law)), np.sort(e))
            po, pe = pool @ obs, pool @ (n * law)
            assert np.isclose(((po - pe) ** 2 / pe).sum(), ((o - e) ** 2 / e).sum())  # the same statistic
