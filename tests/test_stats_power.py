"""The power rule behind every verdict: no pass or fail from a test that could not see a TV 0.05 shift."""

from __future__ import annotations

import numpy as np
import pytest

from specviz.errors import InputError
from specviz.proof import stats
from specviz.proof.scenarios import SCENARIOS, scenario_chains


def _law(name: str = "reference", L: int = 3) -> np.ndarray:
    target, _ = scenario_chains(SCENARIOS[name])
    return target.joint_law(L)


def _at_expected(law: np.ndarray, n: int) -> stats.ChiSquare:
    """The test on counts equal to their expectation (rounded): its power depends only on n."""
    obs = np.round(law.ravel() * n)
    obs[np.argmax(law.ravel())] += n - obs.sum()
    return stats.chi_square(obs, law.ravel())


@pytest.mark.parametrize("name", ["reference", "textbook", "zeros"])
def test_needed_n_is_the_first_n_with_power(name):
    law = _law(name)
    n = stats.needed_n(law)
    assert _at_expected(law, n).detectable_tv <= stats.MIN_TV
    assert _at_expected(law, n).conclusive
    assert _at_expected(law, n - 1).detectable_tv > stats.MIN_TV
    assert not _at_expected(law, n - 1).conclusive


def test_one_sample_is_inconclusive_but_an_impossible_sample_is_a_certain_fail():
    law = _law("zeros")
    one = np.zeros(law.size)
    one[np.argmax(law.ravel())] = 1
    res = stats.chi_square(one, law.ravel())
    assert res.passed and not res.conclusive  # "pass" at N = 1 says nothing
    bad = np.zeros(law.size)
    bad[np.flatnonzero(law.ravel() == 0)[0]] = 1
    res = stats.chi_square(bad, law.ravel())
    assert not res.passed and res.conclusive


def test_needed_n_grows_like_one_over_tv_squared():
    law = _law()
    n05, n01 = stats.needed_n(law, tv=0.05), stats.needed_n(law, tv=0.01)
    assert 20 < n01 / n05 < 30  # 25 with fixed dof; more cells survive pooling at larger N
    with pytest.raises(InputError, match="tv"):
        stats.needed_n(law, tv=0)


def test_mean_test_at_few_rounds_is_inconclusive_even_with_zero_spread():
    t = stats.mean_test(2.0, 2.2, 0.0, 5)
    assert not t.conclusive and not t.passed and t.z == -np.inf
    assert stats.mean_test(2.2, 2.2, 0.0, 5).z == 0.0


def test_mean_test_power_at_its_detectable_shift_and_level_at_no_shift():
    """Monte-Carlo of the z-test on normal means (seeded): rejection rate at the detectable
    shift is about 0.99, at no shift about alpha. Critical values: one-sided binomial bounds."""
    rng = np.random.default_rng(7)
    trials, rounds, sd = 4000, 400, 1.3
    se = sd / np.sqrt(rounds)
    shift = stats.mean_test(0.0, 0.0, se, rounds, alpha=0.01).detectable
    means = rng.normal(0.0, se, trials)
    rej_shift = sum(not stats.mean_test(m + shift, 0.0, se, rounds, alpha=0.01).passed for m in means)
    rej_null = sum(not stats.mean_test(m, 0.0, se, rounds, alpha=0.01).passed for m in means)
    assert rej_shift / trials > 0.98  # expected 0.99; sd of the rate 0.0016
    assert rej_null / trials < 0.02  # expected 0.01; negative control for the power claim
    assert rej_shift / trials > 0.5 > rej_null / trials
    t = stats.mean_test(0.0, 0.0, se, rounds, alpha=0.01)
    assert t.needed_rounds >= stats.MIN_ROUNDS
    assert stats.mean_test(0.0, 0.0, sd / np.sqrt(t.needed_rounds), t.needed_rounds, alpha=0.01).conclusive
