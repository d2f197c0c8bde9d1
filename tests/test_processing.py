"""Sampling settings: processing against a plain per-row reference, and what must match."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from specviz import verify
from specviz.errors import InputError
from specviz.verifiers.processing import Settings, output_law, process_logits


def reference(logits: list[float], s: Settings) -> list[float]:
    """One row, written as a textbook would: plain Python, sorted lists, no vectorization."""
    V = len(logits)
    alive = [z > -math.inf for z in logits]
    if s.temperature == 0:
        best = max(range(V), key=lambda i: (logits[i], -i))
        return [1.0 if i == best else 0.0 for i in range(V)]
    z = [x / s.temperature if a else -math.inf for x, a in zip(logits, alive, strict=True)]
    if 0 < s.top_k < V:
        kth = sorted(z, reverse=True)[s.top_k - 1]
        z = [x if x >= kth else -math.inf for x in z]
    m = max(z)
    e = [math.exp(x - m) if x > -math.inf else 0.0 for x in z]
    p = [x / sum(e) for x in e]
    if s.top_p < 1:
        keep = [sum(y for y in p if y > x) < s.top_p for x in p]
        p = [x if k else 0.0 for x, k in zip(p, keep, strict=True)]
        p = [x / sum(p) for x in p]
    if s.min_p > 0:
        top = max(p)
        p = [x if x >= s.min_p * top else 0.0 for x in p]
        p = [x / sum(p) for x in p]
    return p


SETTINGS = [
    Settings(),
    Settings(temperature=0.7),
    Settings(temperature=1.3, top_k=3),
    Settings(top_p=0.9),
    Settings(temperature=0.5, top_k=5, top_p=0.8),
    Settings(min_p=0.1),
    Settings(temperature=2.0, top_k=4, top_p=0.95, min_p=0.05),
    Settings(temperature=0),
    Settings(top_k=1000),  # larger than V: keeps everything
]


@pytest.mark.parametrize("s", SETTINGS, ids=repr)
def test_matches_the_plain_reference_on_random_rows_with_minus_inf(s, rng):
    logits = rng.normal(0, 2, (20, 11))
    logits[rng.random(logits.shape) < 0.15] = -np.inf
    logits[:, 3] = np.where(np.isinf(logits).all(-1), 0.0, logits[:, 3])
    got = process_logits(logits, s)
    for row, want_row in zip(got, (reference(list(r), s) for r in logits), strict=True):
        np.testing.assert_allclose(row, want_row, rtol=0, atol=1e-12)
    assert np.allclose(got.sum(-1), 1) and (got[np.isinf(logits)] == 0).all()


def test_ties_at_the_top_p_boundary_are_kept_together():
    logits = np.log([0.4, 0.3, 0.3])
    np.testing.assert_allclose(process_logits(logits, Settings(top_p=0.5)), [0.4, 0.3, 0.3], atol=1e-12)
    np.testing.assert_allclose(process_logits(logits, Settings(top_p=0.4)), [1, 0, 0], atol=1e-12)
    # The tie is kept whatever order a sort puts it in.
    np.testing.assert_allclose(process_logits(np.log([0.3, 0.3, 0.4]), Settings(top_p=0.5)), [0.3, 0.3, 0.4])


def test_ties_at_the_kth_logit_are_kept_and_top_k_above_v_is_a_no_op():
    z = np.array([2.0, 1.0, 1.0, 0.0])
    p = process_logits(z, Settings(top_k=2))
    assert (p > 0).tolist() == [True, True, True, False]
    np.testing.assert_allclose(process_logits(z, Settings(top_k=9)), process_logits(z))


def test_temperature_to_zero_tends_to_greedy_and_greedy_takes_the_lowest_tie():
    z = np.array([0.1, 2.0, 1.9, -np.inf])
    cold = process_logits(z, Settings(temperature=1e-3))
    assert cold[0] + cold[2] < 1e-40 and np.argmax(cold) == 1  # exp(-0.1 / 1e-3) = 3.7e-44
    np.testing.assert_array_equal(process_logits(z, Settings(temperature=0)), [0, 1, 0, 0])
    np.testing.assert_array_equal(process_logits(np.array([1.0, 3.0, 3.0]), Settings(temperature=0)), [0, 1, 0])


def test_top_p_and_top_k_cut_what_they_say():
    z = np.log([0.5, 0.3, 0.15, 0.05])
    assert (process_logits(z, Settings(top_p=0.75)) == 0).tolist() == [False, False, True, True]
    assert (process_logits(z, Settings(top_k=3)) == 0).tolist() == [False, False, False, True]


@pytest.mark.parametrize(
    ("kw", "arg"),
    [({"temperature": -1}, "temperature"), ({"temperature": float("nan")}, "temperature"), ({"top_k": -1}, "top_k"),
     ({"top_k": 1.5}, "top_k"), ({"top_p": 0}, "top_p"), ({"top_p": 1.2}, "top_p"), ({"min_p": 2}, "min_p")],
)  # fmt: skip
def test_bad_settings_name_the_argument(kw, arg):
    with pytest.raises(InputError, match=f"^{arg}: expected"):
        Settings(**kw)


def test_rows_without_a_distribution_raise():
    with pytest.raises(InputError, match="all -inf"):
        process_logits(np.array([[0.0, 1.0], [-np.inf, -np.inf]]))
    with pytest.raises(InputError, match="NaN"):
        process_logits(np.array([0.0, np.nan]))
    with pytest.raises(InputError, match="logits"):
        process_logits("abc")


def test_torch_gives_the_same_probabilities(rng):
    torch = pytest.importorskip("torch")
    z = rng.normal(0, 2, (5, 3, 17))
    s = Settings(temperature=0.8, top_k=6, top_p=0.9, min_p=0.02)
    out = process_logits(torch.tensor(z, dtype=torch.float32), s)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), process_logits(z.astype(np.float32), s))


def _random_pair(rng, V=6):
    return rng.normal(0, 1.5, V), rng.normal(0, 1.5, V)


def test_the_rule_p_processed_q_as_drafted_gives_the_processed_target_exactly(rng):
    """Any pair of settings: the first token's law is the request's processed target."""
    for request, drafter in [(Settings(temperature=0.7, top_p=0.9), Settings()),
                             (Settings(top_k=2), Settings(temperature=1.5, top_k=4)),
                             (Settings(temperature=0.3), Settings(temperature=0))]:  # fmt: skip
        zt, zd = _random_pair(rng)
        p, q = process_logits(zt, request), process_logits(zd, drafter)
        np.testing.assert_allclose(output_law(p, q), p, atol=1e-15)
        # Reporting the raw softmax instead of the law the draft was drawn from moves it.
        raw = process_logits(zd)
        if not np.allclose(raw, q):
            assert 0.5 * np.abs(output_law(p, q, raw) - p).sum() > 1e-3


def test_output_law_is_what_verify_emits_when_told_the_wrong_q(rng):
    """Chi-square (seeded, level 0.001, critical value from scipy) of verify's first token
    against output_law with the q it was told; negative control: the same sample against p."""
    zt, zd = np.array([1.0, 0.2, -0.5, 0.7, -1.0]), np.array([0.1, 1.4, 0.3, -0.2, 0.6])
    p = process_logits(zt, Settings(temperature=0.8))
    q = process_logits(zd, Settings(temperature=0.5, top_k=3))
    raw = process_logits(zd)
    n = 200_000
    drafts = rng.choice(5, size=(n, 1), p=q)  # drawn from the drafter's processed law
    res = verify(np.tile(p, (n, 2, 1)), np.tile(raw, (n, 1, 1)), drafts, np.ones(n, dtype=np.int64), rng=rng)
    first = np.bincount(np.asarray(res.tokens)[:, 0], minlength=5)
    crit = sps.chi2.isf(0.001, 4)

    def chi2(law):
        return float(((first - n * law) ** 2 / (n * law)).sum())

    assert chi2(output_law(p, q, raw)) < crit
    assert chi2(p) > crit  # negative control: the q_unprocessed pipeline is not lossless
