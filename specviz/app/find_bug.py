"""Find the bug: twenty histograms, one from a mistake; what the eye sees against what the test sees.

# M panels, N verifications per panel, V vocabulary

Each panel is the histogram of the first emitted token of N verifications of the textbook
example (p = [0.5, 0.3, 0.15, 0.05], q uniform, K = 3), 19 from :func:`specviz.verify` and one
from a mistake's verifier, placed by the seed. The class guesses; the reveal gives each panel's
chi-square against p.

Two ways to pick the odd panel out, and the N at which each starts to work (d = law - p is the
mistake's expected shift of the bar heights, SE_x = sqrt(p_x (1 - p_x) / N) a bar's sampling
noise):

- the eye compares bar heights with the ticks of p, in probability, not in standard errors: it
  can pick the odd panel when the mistake's most-shifted bar, max_x |d_x|, stands further from
  its tick than the largest wiggle among the 19 honest panels' bars. An honest bar x wiggles by
  sigma_x / sqrt(N), sigma_x = sqrt(p_x (1 - p_x)); the median of the largest is w / sqrt(N) with
  prod_x (2 Phi(w / sigma_x) - 1)^19 = 1/2, so the eye stops seeing the mistake below
  N_eye = (w / max_x |d_x|)^2. A shift on a rare token is small in height: the eye misses it;
- the chi-square test adds every bar's shift: under the mistake its statistic is about noncentral
  chi^2(V - 1, N D), D = sum_x d_x^2 / p_x, against honest statistics chi^2(V - 1), whose largest
  of 19 has median c with F(c)^19 = 1/2; it picks the panel out above N_test = lam / D, with lam
  the noncentrality whose median is c.

Beside both: the N at which the level-alpha test alone (no line-up) catches the mistake with
probability 0.99, lam* / D with lam* the noncentrality of :func:`specviz.proof.stats.detectable_tv`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import optimize
from scipy import stats as sps

from ..errors import InputError
from ..proof import stats, theory
from ..proof.bugs import BUGS
from .position import sample_position

PANELS = 20
P = np.array(theory.REFERENCE_P)
Q = np.array(theory.REFERENCE_Q)
K = theory.REFERENCE_K
MAX_N = 20_000  # verifications per panel: 20 panels of 20,000 rows answer a click in about a second
PLACE_STREAM = 20  # the seed's stream that places the mistake (panels use streams 0..19)
SHOWN_TV = 1e-9  # a first-token law closer to p than this is p: the mistake has nothing to show here


def first_token_law(mistake: str) -> np.ndarray:
    """The exact law (V,) of the first emitted token under ``mistake`` in the textbook example."""
    law = theory.position_law(P, Q, mistake, K=K)
    if law is None:
        raise InputError("mistake", "a mistake with a first-token law", repr(mistake))
    return law


def _visible(name: str) -> bool:
    if BUGS[name].drafter_mode is not None or name in theory.NOT_AT_ONE_POSITION:
        return name == "greedy_draft_sampled_q"  # its drafter is sample_position's to run
    return theory.total_variation(first_token_law(name), P) > SHOWN_TV


# The mistakes whose first token is off in the textbook example (the others need more than one histogram).
MISTAKES: tuple[str, ...] = tuple(n for n in BUGS if _visible(n))


class Lineup(NamedTuple):
    odd: int  # 0-based index of the mistake's panel
    counts: np.ndarray  # (M, V) first tokens of each panel
    tests: list[stats.ChiSquare]  # each panel against p


def place(seed: int) -> int:
    """Where the seed puts the mistake: 0..PANELS-1."""
    return int(np.random.default_rng([int(seed), PLACE_STREAM]).integers(PANELS))


def lineup(mistake: str, n: int, seed: int) -> Lineup:
    """19 panels from the rule and one from ``mistake``, each of ``n`` verifications."""
    if mistake not in MISTAKES:
        raise InputError("mistake", "one of " + ", ".join(MISTAKES), repr(mistake))
    if not 1 <= int(n) <= MAX_N:
        raise InputError("n", f"verifications per histogram in [1, {MAX_N:,}]", str(n))
    odd = place(seed)
    counts = np.zeros((PANELS, P.size), dtype=np.int64)
    for i in range(PANELS):
        draws = sample_position(P, Q, int(n), K, mistake if i == odd else None, [int(seed), i])
        counts[i] = np.bincount(draws.first_tokens, minlength=P.size)
    return Lineup(odd, counts, [stats.chi_square(c, P) for c in counts])


class Thresholds(NamedTuple):
    tv: float  # TV(law, p)
    eye_wiggle: float  # w: the median largest honest bar wiggle is w / sqrt(N), in probability
    eye_token: int  # the mistake's most shifted bar (in height)
    n_eye: int  # below it the eye cannot pick the mistake's panel out
    chi_max: float  # median of the largest honest chi-square
    n_test: int  # below it the chi-square cannot pick it out either
    n_power: int  # the level-alpha test alone catches it with probability POWER from here
    alpha: float
    power: float


def honest_wiggle() -> float:
    """w with prod_x (2 Phi(w / sigma_x) - 1)^19 = 1/2: the median largest honest wiggle is w / sqrt(N)."""
    sigma = np.sqrt(P * (1 - P))  # (V,)
    honest = PANELS - 1

    def gap(w: float) -> float:
        return honest * float(np.log(2 * sps.norm.cdf(w / sigma) - 1).sum()) - np.log(0.5)

    return float(optimize.brentq(gap, 1e-6, 10.0, xtol=1e-12))


def thresholds(mistake: str, *, alpha: float = stats.ALPHA, power: float = stats.POWER) -> Thresholds:
    law = first_token_law(mistake)
    d = law - P
    honest, dof = PANELS - 1, P.size - 1
    w = honest_wiggle()
    chi_max = float(sps.chi2.ppf(0.5 ** (1 / honest), dof))  # F(c)^19 = 1/2
    D = float((d**2 / P).sum())
    # The mistake's statistic is noncentral chi^2(dof, N D): its median reaches chi_max at N D = lam_half.
    lam_half = float(optimize.brentq(lambda lam: sps.ncx2.median(dof, lam) - chi_max, 1e-9, 10 * chi_max + 10))
    lam = 4 * stats.detectable_tv(1, dof, alpha=alpha, power=power) ** 2  # detectable_tv = sqrt(lam / n) / 2
    return Thresholds(
        theory.total_variation(law, P),
        w,
        int(np.argmax(np.abs(d))),
        math.ceil((w / float(np.abs(d).max())) ** 2),
        chi_max,
        math.ceil(lam_half / D),
        math.ceil(lam / D),
        alpha,
        power,
    )


def eye_scores(counts: np.ndarray) -> np.ndarray:
    """(M,) each panel's bar furthest from its tick of p, in probability: what the eye compares."""
    c = np.asarray(counts, dtype=np.float64)
    return np.abs(c / c.sum(axis=1, keepdims=True) - P).max(axis=1)


def chi_scores(counts: np.ndarray) -> np.ndarray:
    """(M,) each panel's Pearson statistic against p (no pooling): what the test compares."""
    c = np.asarray(counts, dtype=np.float64)
    e = c.sum(axis=1, keepdims=True) * P
    return ((c - e) ** 2 / e).sum(axis=1)


def p_value_text(test: stats.ChiSquare) -> str:
    """A chi-square p-value as the lessons print it: never a bare "0" unless a sample is impossible."""
    from .results import chi2_log10_sf  # the far tail, past float's range

    if test.impossible:
        return "0 (impossible sample)"
    if test.p_value > 0:
        return f"{test.p_value:.3g}"
    log10_p = chi2_log10_sf(test.statistic, test.dof)
    if not math.isfinite(log10_p):
        return "< 1e-300"
    exp = math.floor(log10_p)
    return f"{10 ** (log10_p - exp):.2f}e{exp}"
