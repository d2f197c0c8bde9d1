"""The false-alarm rate of the joint test, measured in every run of the suite (issue 7, item 4).

Fast version: 200 honest runs of 1,000 sequences on ``one_draft`` (64 cells, small cells
pooled) at level 0.05, so about 10 rejections are expected (13 with these seeds). The stated
critical value: 22 or more rejections of 200 has probability <= 0.001 under
Binomial(200, 0.05), so it means "the rate is far above the level". Two deliberately
miscalibrated tests run on the same samples and must cross it: Pearson's statistic without
pooling small cells (the chi-square approximation breaks; 36 of 200) and the right statistic
against the critical value of 8 fewer degrees of freedom (73 of 200). The tokens-per-step
z-test is measured on the same runs (5 of 200: conservative, as its standard error includes the
spread between contexts), with a standard error halved as its control (66 of 200). A broken
verifier must cross it too. The slow tests repeat the measurement at the suite's own sizes.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from specviz.proof.bugs import BUGS
from specviz.proof.prove import calibrate_tests, joint_passes, rejection_critical, tokens_passes
from specviz.proof.simulate import Simulation
from specviz.proof.stats import chi_square, counts, joint_test, mean_test

TRIALS, N, ALPHA = 200, 1000, 0.05


def no_pooling(sim: Simulation, law: np.ndarray, alpha: float) -> bool:
    """Pearson's statistic on every cell, however small its expected count."""
    obs = counts(sim.sequences, law.shape[0], law.ndim)
    return chi_square(obs, law.ravel(), alpha=alpha, min_expected=0.0).passed


def dof_too_small(sim: Simulation, law: np.ndarray, alpha: float) -> bool:
    """The right statistic against the critical value of 8 fewer degrees of freedom."""
    r = joint_test(sim.sequences, law, alpha=alpha)
    return r.statistic <= sps.chi2.isf(alpha, max(r.dof - 8, 1))


def tokens_se_halved(sim: Simulation, law: np.ndarray, alpha: float) -> bool:
    """The tokens z-test with a standard error half the true one."""
    return mean_test(sim.tokens_per_round, sim.expected_tokens_per_round, sim.tokens_per_round_se / 2,
                     sim.num_verifications, alpha=alpha).passed  # fmt: skip


def test_stated_critical_value():
    assert rejection_critical(TRIALS, ALPHA) == 22
    assert sps.binom.sf(21, TRIALS, ALPHA) <= 0.001 < sps.binom.sf(20, TRIALS, ALPHA)


@pytest.fixture(scope="module")
def fast():
    tests = {"joint": joint_passes, "no_pooling": no_pooling, "dof_too_small": dof_too_small,
             "tokens": tokens_passes, "tokens_se_halved": tokens_se_halved}  # fmt: skip
    return calibrate_tests(tests, "one_draft", seeds=range(TRIALS), n=N, alpha=ALPHA)


@pytest.mark.parametrize("name", ["joint", "tokens"])
def test_false_alarm_rate_is_not_far_above_the_level(fast, name):
    cal = fast[name]
    assert cal.trials == TRIALS and cal.critical == 22
    assert not cal.far_above, cal
    if name == "joint":  # the tokens test is conservative by design (its se includes the spread between contexts)
        assert cal.ci_low <= ALPHA <= cal.ci_high, cal  # the level lies in the rate's 95% interval


@pytest.mark.parametrize("name", ["no_pooling", "dof_too_small", "tokens_se_halved"])
def test_negative_control_a_miscalibrated_test_is_flagged(fast, name):
    assert fast[name].far_above, fast[name]


def test_negative_control_a_broken_verifier_is_flagged():
    cal = calibrate_tests(
        {"joint": joint_passes}, "one_draft", seeds=range(40), n=N, alpha=ALPHA, bug=BUGS["resample_from_p"]
    )["joint"]
    assert cal.far_above and cal.rejections == 40, cal


@pytest.mark.slow
def test_correct_verifier_rejection_rate_is_consistent_with_alpha():
    cal = calibrate_tests({"joint": joint_passes}, "reference", seeds=range(100), n=100_000, alpha=0.01)["joint"]
    assert cal.consistent, cal  # two-sided binomial test at 0.001


@pytest.mark.slow
def test_negative_control_a_broken_verifier_is_not_calibrated():
    cal = calibrate_tests(
        {"joint": joint_passes}, "reference", seeds=range(10), n=100_000, alpha=0.01, bug=BUGS["resample_from_p"]
    )["joint"]
    assert not cal.consistent and cal.rejections == 10, cal
