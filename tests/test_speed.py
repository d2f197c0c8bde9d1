"""Tokens per step (specviz.app.speed): measured against the closed form, and the speedup model."""

from __future__ import annotations

import numpy as np
import pytest

from specviz import InputError
from specviz.app import position, speed
from specviz.proof import theory

REF_P = np.array(position.REFERENCE_P)
UNIFORM = np.full(4, 0.25)


@pytest.mark.parametrize("a", [0.0, 0.3, 0.7, 0.95, 1.0])
def test_two_token_pair_has_the_requested_acceptance_rate(a):
    p, q = speed.two_token_pair(a)
    assert theory.acceptance_rate(p, q) == pytest.approx(a, abs=1e-15)


def test_measured_tokens_per_step_match_the_closed_form():
    p, q = speed.two_token_pair(0.7)
    Ks = [0, 1, 3, 6]
    for bonus in (True, False):
        m = speed.measure_tokens(p, q, Ks, 20_000, seed=1, bonus=bonus)
        theory_vals = [theory.expected_tokens(0.7, k, bonus=bonus) for k in Ks]
        z = (m.mean - theory_vals) / np.maximum(m.se, 1e-12)
        assert np.all(np.abs(z) < 4.5), (bonus, m.mean, theory_vals)  # 4.5 SE: a false alarm ~1e-5 per point
    ref = speed.measure_tokens(REF_P, UNIFORM, [3], 100_000, seed=0)
    assert abs(ref.mean[0] - 2.533) < 4.5 * ref.se[0]


def test_speedup_model():
    assert speed.speedup(2.533, 3, 0.1) == pytest.approx(2.533 / 1.3)
    table = speed.speedup_table(0.7, range(9), 0.1)
    assert table.best_K == 4 and table.speedup[0] == 1.0
    assert speed.speedup_table(0.7, range(9), 0.0).best_K == 8  # a free drafter: more drafts never hurt


def test_error_bars_only_where_a_point_can_speak():
    from specviz.app import results
    from specviz.proof import theory

    p, q = speed.two_token_pair(0.7)
    for n in (20, 20_000):  # too few rows: no bar anywhere; enough: a bar on every point
        m = speed.measure_tokens(p, q, [0, 1, 2, 3], n, seed=0)
        expected = [theory.expected_tokens(0.7, k) for k in range(4)]
        means, se = speed.error_bars(m, expected)
        speaks = [results.tokens_point(m.mean[i], m.se[i], n, expected[i]).conclusive for i in range(4)]
        np.testing.assert_array_equal(means, m.mean)
        assert [not np.isnan(s) for s in se] == speaks
        assert any(speaks) == (n == 20_000)
    with pytest.raises(InputError, match="expected"):
        speed.error_bars(m, expected[:2])
