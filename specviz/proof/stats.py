"""Goodness-of-fit of sampled sequences against an exact law, with the test's power beside it.

# N sequences, L tokens, V vocabulary, C cells (V**L for the joint test)

Pearson's chi-square on the joint distribution of the first L tokens. Cells whose expected
count is below ``min_expected`` are pooled into one cell (and that cell into the smallest
other one if it is still too small), the usual condition for the chi-square approximation.
Cells the target gives probability 0 are left out of the statistic, but a single sample in
one of them fails the test outright: the target cannot produce it.

A "pass" says nothing without the test's power, so every result carries ``detectable_tv``:
with probability at least ``power``, the test flags *any* shift of the law whose
total-variation distance from the target is at least this much (as resolved by the pooled
cells). The argument: a shift d of the cell probabilities has chi-square divergence
D = sum d^2 / p0 >= (sum |d|)^2 = (2 TV)^2 by Cauchy-Schwarz, and the statistic then follows
approximately a noncentral chi-square with noncentrality N * D; so once 4 N TV^2 reaches
the noncentrality lam* at which the test's power is ``power``, the shift is detected.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from scipy import optimize, stats

from ..errors import InputError, digits
from .theory import total_variation

ALPHA = 0.001  # default level: a false alarm in 1 of 1000 honest runs
MIN_EXPECTED = 5.0  # pool cells expected to hold fewer samples than this
POWER = 0.99
# A verdict speaks only when its test would catch a shift this large with probability POWER.
# TV 0.05 is smaller than every law-changing classic mistake in their home scenarios and large
# enough that a click in the app (N around 10^4 to 10^5) has the power to see it.
MIN_TV = 0.05
# The tokens-per-step test speaks only after this many verifications (the normal approximation
# and the standard-error estimate need them) and when it would catch a shift of MIN_TOKENS
# tokens per verification with probability POWER.
MIN_ROUNDS = 100
MIN_TOKENS = 0.05


class ChiSquare(NamedTuple):
    statistic: float
    dof: int
    p_value: float
    critical_value: float  # at level alpha
    alpha: float
    tv: float  # total variation between observed frequencies and the law (all cells)
    detectable_tv: float  # smallest TV shift detected with probability >= power
    power: float
    n: int
    cells: int  # cells after pooling
    impossible: int  # samples in cells of probability 0
    passed: bool  # statistic below the critical value and no impossible sample

    @classmethod
    def empty(cls, alpha: float) -> ChiSquare:
        """No test ran (the verifier raised): every number NaN, nothing passed."""
        nan = float("nan")
        return cls(statistic=nan, dof=0, p_value=nan, critical_value=nan, alpha=alpha, tv=nan, detectable_tv=nan,
                   power=POWER, n=0, cells=0, impossible=0, passed=False)  # fmt: skip

    @property
    def conclusive(self) -> bool:
        """The test has the power to speak: it catches a shift of :data:`MIN_TV` with
        probability ``power``, or it saw a sample the target cannot produce (a certain fail)."""
        return bool(self.impossible) or bool(self.detectable_tv <= MIN_TV)


def counts(sequences: np.ndarray, V: int, L: int | None = None) -> np.ndarray:
    """Joint counts of the first L tokens: sequences (N, >= L) -> (V**L,) in base-V order."""
    seq = np.asarray(sequences)
    if seq.ndim != 2:
        raise InputError("sequences", "shape (N, L)", f"shape {seq.shape}")
    L = seq.shape[1] if L is None else L
    if seq.shape[1] < L:
        raise InputError("sequences", f"at least L = {L} tokens per row", f"{seq.shape[1]}")
    seq = seq[:, :L]
    if seq.size:
        # One pass finds both ends for int64: a negative token is huge as uint64.
        wide = seq.dtype == np.int64 and seq.flags.c_contiguous
        if (seq.view(np.uint64).max() >= V) if wide else (seq.min() < 0 or seq.max() >= V):
            raise InputError("sequences", f"tokens in [0, {V})", f"range [{seq.min()}, {seq.max()}]")
    code = seq.astype(np.int64, copy=False, casting="safe") @ V ** np.arange(L - 1, -1, -1, dtype=np.int64)  # (N,)
    return np.bincount(code, minlength=V**L).astype(np.float64)


def chi_square(
    observed: np.ndarray,
    expected_probs: np.ndarray,
    *,
    alpha: float = ALPHA,
    min_expected: float = MIN_EXPECTED,
    power: float = POWER,
) -> ChiSquare:
    """Pearson chi-square of observed counts (C,) against cell probabilities (C,)."""
    obs = np.asarray(observed, dtype=np.float64).ravel()
    p0 = np.asarray(expected_probs, dtype=np.float64).ravel()
    if obs.shape != p0.shape:
        raise InputError("observed", f"as many cells as expected_probs ({p0.size})", f"{obs.size}")
    if not 0 < alpha < 1:
        raise InputError("alpha", "a level in (0, 1)", str(alpha))
    if (p0 < 0).any() or abs(p0.sum() - 1) > 1e-9:
        raise InputError("expected_probs", "probabilities summing to 1", f"sum {digits(p0.sum())}")
    n = int(obs.sum())
    if n == 0:
        raise InputError("observed", "at least one sample", "0")
    tv = total_variation(obs / n, p0)
    impossible = int(obs[p0 == 0].sum())
    o, e = _pool(obs[p0 > 0], n * p0[p0 > 0], min_expected)
    dof = max(len(o) - 1, 0)
    stat = float(((o - e) ** 2 / e).sum()) if dof else 0.0
    crit = float(stats.chi2.isf(alpha, dof)) if dof else 0.0
    pval = float(stats.chi2.sf(stat, dof)) if dof else 1.0
    if impossible:
        stat, pval = float("inf"), 0.0
    return ChiSquare(
        statistic=stat,
        dof=dof,
        p_value=pval,
        critical_value=crit,
        alpha=alpha,
        tv=tv,
        detectable_tv=_detectable(n, dof, bool((p0 == 0).any()), alpha, power),
        power=power,
        n=n,
        cells=len(o),
        impossible=impossible,
        passed=bool(stat <= crit and not impossible),
    )


def _pool(obs: np.ndarray, exp: np.ndarray, min_expected: float) -> tuple[np.ndarray, np.ndarray]:
    small = exp < min_expected
    if not small.any():
        return obs, exp
    o = np.append(obs[~small], obs[small].sum())
    e = np.append(exp[~small], exp[small].sum())
    if e[-1] < min_expected and len(e) > 1:  # still too small: merge into the smallest other cell
        k = int(np.argmin(e[:-1]))
        o[k] += o[-1]
        e[k] += e[-1]
        o, e = o[:-1], e[:-1]
    return o, e


def _detectable(n: int, dof: int, has_zero_cells: bool, alpha: float, power: float) -> float:
    if dof == 0 and has_zero_cells:
        # One possible cell (a greedy target): any shift puts mass t on impossible cells, and
        # one sample there fails the test, which happens with probability 1 - (1 - t)^n.
        return float(1 - (1 - power) ** (1 / n))
    return detectable_tv(n, dof, alpha=alpha, power=power)


def detectable_tv(n: int, dof: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest TV shift detected with probability >= power by a level-alpha test of n samples."""
    if dof < 1 or n < 1:
        return float("inf")
    return float(0.5 * np.sqrt(_noncentrality(int(dof), float(alpha), float(power)) / n))


@functools.lru_cache(maxsize=4096)
def _noncentrality(dof: int, alpha: float, power: float) -> float:
    """The noncentrality at which the level-alpha chi-square test on dof has the given power.

    It does not depend on n, and a proof run asks for the same few dof hundreds of times
    (each root search costs about 10 ms), so it is cached.
    """
    crit = stats.chi2.isf(alpha, dof)

    def gap(lam: float) -> float:
        return stats.ncx2.sf(crit, dof, lam) - power

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2
    return float(optimize.brentq(gap, 1e-9, hi, xtol=1e-6))


def joint_test(sequences: np.ndarray, law: np.ndarray, **kw: float) -> ChiSquare:
    """Chi-square of the joint law of the first L tokens; law has shape (V,) * L."""
    law = np.asarray(law)
    V, L = law.shape[0], law.ndim
    return chi_square(counts(sequences, V, L), law.ravel(), **kw)


def position_tests(sequences: np.ndarray, law: np.ndarray, **kw: float) -> list[ChiSquare]:
    """One chi-square per position t on the marginal law of token t alone."""
    law = np.asarray(law)
    V, L = law.shape[0], law.ndim
    seq = np.asarray(sequences)[:, :L]
    out = []
    for t in range(L):
        marginal = law.sum(axis=tuple(a for a in range(L) if a != t))
        out.append(chi_square(np.bincount(seq[:, t], minlength=V), marginal, **kw))
    return out


def detectable_at(
    law: np.ndarray, n: int, *, alpha: float = ALPHA, power: float = POWER, min_expected: float = MIN_EXPECTED
) -> float:
    """Smallest TV shift the joint test of ``law`` (any shape, probabilities) detects with
    probability ``power`` at ``n`` samples, pooling cells as :func:`chi_square` does at that n."""
    p0 = np.asarray(law, dtype=np.float64).ravel()
    pos = p0[p0 > 0]
    _, e = _pool(np.zeros(pos.size), n * pos, min_expected)
    return _detectable(n, max(len(e) - 1, 0), bool((p0 == 0).any()), alpha, power)


def needed_n(
    law: np.ndarray,
    *,
    tv: float = MIN_TV,
    alpha: float = ALPHA,
    power: float = POWER,
    min_expected: float = MIN_EXPECTED,
) -> int:
    """Smallest N at which the joint test of ``law`` (any shape, probabilities) detects a TV
    shift of ``tv`` with probability ``power``, pooling cells as :func:`chi_square` does at that N.

    The degrees of freedom grow with N (fewer cells pooled), so the search is over N itself:
    doubling to a bracket, then bisection on integers.
    """
    p0 = np.asarray(law, dtype=np.float64).ravel()
    if not 0 < tv <= 1:
        raise InputError("tv", "a total-variation distance in (0, 1]", str(tv))

    def detect(n: int) -> float:
        return detectable_at(p0, n, alpha=alpha, power=power, min_expected=min_expected)

    hi = 1
    while detect(hi) > tv:
        hi *= 2
        if hi > 2**40:
            raise InputError("law", f"a law whose test can reach TV {tv} at some N", "none below 2^40")
    lo = hi // 2
    while hi - lo > 1:  # detect(lo) > tv >= detect(hi)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detect(mid) <= tv else (mid, hi)
    return hi


class MeanTest(NamedTuple):
    """A z-test of a measured mean (tokens per verification) against its exact expectation."""

    measured: float
    expected: float
    se: float  # standard error of the measured mean
    z: float  # (measured - expected) / se; 0 when both are equal, +-inf when se is 0 and they differ
    rounds: int  # observations behind the mean
    alpha: float
    detectable: float  # smallest shift of the mean detected with probability ``power``
    power: float
    passed: bool  # |z| within the two-sided critical value
    conclusive: bool  # enough rounds, and ``detectable`` <= MIN_TOKENS

    @classmethod
    def empty(cls, alpha: float) -> MeanTest:
        """No test ran (the verifier raised): every number NaN, nothing passed."""
        nan = float("nan")
        return cls(measured=nan, expected=nan, se=nan, z=nan, rounds=0, alpha=alpha, detectable=nan, power=POWER,
                   passed=False, conclusive=False)  # fmt: skip

    @property
    def needed_rounds(self) -> int:
        """Rounds at which this test would reach :data:`MIN_TOKENS` (same spread per round)."""
        sd = self.se * np.sqrt(max(self.rounds, 1))
        k = stats.norm.isf(self.alpha / 2) + stats.norm.isf(1 - self.power)
        return int(max(MIN_ROUNDS, np.ceil((k * sd / MIN_TOKENS) ** 2)))


def mean_test(
    measured: float, expected: float, se: float, rounds: int, *, alpha: float = ALPHA, power: float = POWER
) -> MeanTest:
    """Two-sided z-test at level ``alpha``, with the shift it detects with probability ``power``.

    A shift d is detected with probability about Phi(d / se - z_{alpha/2}), so the detectable
    shift is (z_{alpha/2} + z_{power}) * se. Below :data:`MIN_ROUNDS` rounds the estimate of se
    is itself unreliable (at N = 1 it is 0), so the test is inconclusive whatever z says.
    """
    if not 0 < alpha < 1:
        raise InputError("alpha", "a level in (0, 1)", str(alpha))
    diff = measured - expected
    if se > 0:
        z = diff / se
    else:
        z = 0.0 if diff == 0 else float(np.copysign(np.inf, diff))
    crit = float(stats.norm.isf(alpha / 2))
    detectable = float((crit + stats.norm.isf(1 - power)) * se)
    ok_rounds = rounds >= MIN_ROUNDS and np.isfinite(measured) and np.isfinite(expected)
    return MeanTest(
        measured=float(measured), expected=float(expected), se=float(se), z=float(z), rounds=int(rounds),
        alpha=alpha, detectable=detectable, power=power, passed=bool(abs(z) <= crit),
        conclusive=bool(ok_rounds and detectable <= MIN_TOKENS),
    )  # fmt: skip
