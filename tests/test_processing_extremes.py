"""process_logits at the edges of float64: huge logits, temperatures that underflow (issue 21, point 1).

``z / T`` before the maximum was subtracted overflowed to inf - inf = NaN: ``[1e308, -1e308]`` at
T = 0.5 and ``[1, 0]`` at T = 1e-320 both came back as ``[nan, nan]``. Every processed row must be
finite and sum to 1, whatever the logits and the temperature.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from specviz.verifiers.processing import Settings, process_logits

TINY = 5e-324  # the smallest positive float64 (subnormal)


@pytest.mark.parametrize(
    ("logits", "T", "expected"),
    [
        ([1e308, -1e308], 0.5, [1.0, 0.0]),  # z / T overflows both ways
        ([1.0, 0.0], 1e-320, [1.0, 0.0]),  # 1 / 1e-320 overflows: the limit T -> 0+ is the argmax
        ([1e308, 0.0], 0.5, [1.0, 0.0]),  # the typed case of the Sampling settings page
        ([0.0, 1e308], 0.5, [0.0, 1.0]),
        ([2.0, 2.0, -math.inf], 1e-320, [0.5, 0.5, 0.0]),  # ties share the mass as T -> 0+
        ([-1e308, 1e308, 1e308], TINY, [0.0, 0.5, 0.5]),
        ([3.0, 1.0], 1e308, [0.5, 0.5]),  # (3 - 1) / 1e308 rounds to 0: uniform
    ],
)
def test_extreme_logits_and_temperatures_give_the_limit_law(logits, T, expected):
    p = process_logits(np.array(logits), Settings(temperature=T))
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-15)


def test_the_underflowing_temperature_keeps_the_filters_meaningful():
    z = np.array([[5.0, 4.0, 4.0, -1e308], [0.0, 1e-300, -1.0, -math.inf]])
    for s in (Settings(1e-320, top_k=2), Settings(1e-320, top_p=0.3), Settings(1e-320, min_p=0.5)):
        p = process_logits(z, s)
        assert np.isfinite(p).all() and np.allclose(p.sum(-1), 1.0, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(p.argmax(-1), [0, 1])


def test_moderate_inputs_are_unchanged_by_the_reordering():
    # Subtracting the maximum first is the same law: compare with softmax(z / T) where that is finite.
    rng = np.random.default_rng(21)
    z = rng.normal(0, 5, (64, 37))
    z[rng.random(z.shape) < 0.1] = -np.inf
    for T in (0.05, 0.7, 1.0, 3.0):
        w = np.exp(np.where(np.isfinite(z), z / T, -np.inf))
        expected = w / w.sum(-1, keepdims=True)
        np.testing.assert_allclose(process_logits(z, Settings(T)), expected, rtol=1e-12, atol=1e-300)


# --- property test: every row finite, non-negative, summing to 1, in the logits' order -------------

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")

logit = st.one_of(
    st.floats(-1e308, 1e308, allow_nan=False, allow_infinity=False),
    st.sampled_from([-math.inf, 1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308, 0.0, TINY]),
)
temperature = st.one_of(
    st.floats(TINY, 1.7976931348623157e308, allow_nan=False, allow_infinity=False),
    st.sampled_from([TINY, 1e-320, 1e-310, 2.2250738585072014e-308, 1e308]),
)


@hypothesis.settings(max_examples=400, deadline=None, derandomize=True, database=None)
@hypothesis.given(
    row=st.lists(logit, min_size=1, max_size=12).filter(lambda r: any(x > -math.inf for x in r)),
    T=temperature,
    top_k=st.integers(0, 13),
    top_p=st.sampled_from([1.0, 0.999, 0.5, 1e-9]),
    min_p=st.sampled_from([0.0, 0.1, 1.0]),
)
def test_every_processed_row_is_a_distribution_in_the_logits_order(row, T, top_k, top_p, min_p):
    z = np.array(row)
    p = process_logits(z, Settings(T, top_k=top_k, top_p=top_p, min_p=min_p))
    assert p.shape == z.shape
    assert np.isfinite(p).all() and (p >= 0).all(), (row, T, p)
    assert abs(p.sum() - 1.0) <= 1e-12, (row, T, p)
    assert (p[z == -math.inf] == 0).all()
    assert p[int(np.argmax(z))] == p.max()  # a most likely logit keeps the largest probability
    hi, lo = z[:, None] > z[None, :], p[:, None] < p[None, :]
    assert not (hi & lo).any(), (row, T, p)  # a larger logit never gets less probability


def test_the_property_test_catches_the_old_order():
    # Negative control: the old arithmetic (divide first) fails the property on the rows.
    def old(z: np.ndarray, T: float) -> np.ndarray:
        with np.errstate(all="ignore"):
            w = z / T
            e = np.exp(w - w.max())
            return e / e.sum()

    for z, T in (([1e308, -1e308], 0.5), ([1.0, 0.0], 1e-320)):
        assert not np.isfinite(old(np.array(z), T)).all()
        assert np.isfinite(process_logits(np.array(z), Settings(T))).all()
