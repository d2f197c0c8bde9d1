"""``python -m specviz power``: the smallest TV another test design detects, and what the paired test needs.

# V cells (the vocabulary of the token tested), N samples, t a total-variation distance

Engines test their verifiers by sampling one token's law and comparing it with the exact one.
Three designs are in use (:data:`PRESETS` holds the published ones, with their files):

- ``chi2``: Pearson's chi-square of N samples on V cells at level alpha; it fails when the
  statistic passes the critical value.
- ``l2``: the Euclidean distance between the empirical law and the target's; it fails above a
  threshold T.
- ``per-cell``: every cell's frequency within +-atol of its probability.

For each design :func:`smallest_tv` gives the smallest TV of a shift of the law that the test
detects with probability ``power`` (0.9) *whatever the shift's shape*. Which shape hides best
depends on the design, and for all three it is the same one on a uniform target: the shift
spread evenly, +t/k on k = floor(V/2) cells and -t/(V-k) on the rest (:func:`hardest_shift`).
Why, design by design, for a shift d with sum |d| = 2t:

- chi2: the statistic is about noncentral chi-square with V - 1 degrees of freedom and
  noncentrality N * D, D = sum d^2 / p >= (2t)^2 (Cauchy-Schwarz; equal for the even spread
  when V is even), so the power is ``ncx2.sf(critical, V - 1, N D)``
  (:func:`specviz.proof.stats.detectable_tv` is the same computation at power 0.99);
- l2: ||d||_2 >= 2t / sqrt(V), equal for the even spread; ||p^ - p||^2 is taken as a gamma law
  with its mean ||d||^2 + (1 - sum p'^2) / N and variance 2 tr(S^2) + 4 d'S d, S = (diag p' -
  p'p'^T) / N (a quadratic form of a normal vector: exactly a scaled chi-square at d = 0 on a
  uniform target, near normal for a large shift);
- per-cell: max |d_i| >= 2t / V, equal for the even spread; the cells are taken as independent
  normals (they are slightly negatively correlated: the approximation errs towards more power).

The target is uniform over V (the shape of p moves the chi-square figure not at all, the others
a little). The figures are checked against simulations in ``tests/test_power.py``.

**specviz's paired test** (:func:`specviz.proof.ship.paired_test`) runs the verifier and the
reference on the same uniforms: a defect of TV t makes the coupled rows differ with probability
at least t (the coupling inequality), so n rows show a mismatch with probability at least
1 - (1 - t)^n: ``power`` at n = ln(1 - power) / ln(1 - t), about 2.3 / t at 0.9. Certifying
TV <= t with no mismatch takes -ln(0.05) / t, about 3 / t (:func:`specviz.proof.ship.rows_for`).
Its cost does not grow with V; every sampled design's does.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from scipy import optimize, stats

from ..errors import InputError
from .stats import _noncentrality

TESTS = ("chi2", "l2", "per-cell")
POWER = 0.9


class Design(NamedTuple):
    """A sampled test of one token's law."""

    test: str  # one of TESTS
    n: int  # samples of the token
    V: int  # cells
    alpha: float = 1e-3  # chi2: the level
    threshold: float = 0.0  # l2: fail above this distance; per-cell: fail when a cell is off by more
    source: str = ""  # where the design is published
    note: str = ""

    def describe(self) -> str:
        what = {"chi2": f"level {self.alpha:g}", "l2": f"fails when ||p^ - p||_2 > {self.threshold:g}",
                "per-cell": f"fails when a cell is off by more than {self.threshold:g}"}[self.test]  # fmt: skip
        return f"{self.test}: N = {self.n:,} samples on V = {self.V:,} cells, {what}"


# The engines' published designs (the facts of their tests; none of their code is used here).
PRESETS: dict[str, Design] = {
    "vllm-chi2": Design(
        "chi2", 30_000, 3, alpha=1e-4,
        source="vllm-project/vllm tests/v1/spec_decode/test_rejection_sample.py "
               "(test_sample_recovered_and_bonus_tokens_correctness)",
        note="one chi-square per emitted position (8 of them), each at level 1e-4, V = 3, 30,000 draws; zero cells "
             "checked apart",
    ),
    "vllm-l2": Design(
        "l2", 200_000, 10, threshold=0.0106,
        source="vllm-project/vllm tests/v1/sample/test_rejection_sampler.py "
               "(test_rejection_sampling_approximates_target_distribution)",
        note="V = 10, k = 2 drafts, 100,000 samples (200,000 tokens); passes when the distance at 100,000 samples "
             "shrank 20 times more than a random reference's: about ||p^ - p|| < d_10 / 20 with d_10 = "
             "sqrt(0.9 / 20) the distance at 10 samples, so T = 0.0106",
    ),
}  # fmt: skip


def hardest_shift(V: int, t: float) -> np.ndarray:
    """(V,) the shift of total variation t that hides best from all three designs on a uniform target:
    +t/k on the first k = floor(V/2) cells, -t/(V-k) on the rest."""
    if V < 2:
        raise InputError("vocab", "at least 2 cells", str(V))
    k = V // 2
    d = np.full(V, -t / (V - k))
    d[:k] = t / k
    return d


def _check(d: Design) -> None:
    if d.test not in TESTS:
        raise InputError("--test", "one of " + ", ".join(TESTS), repr(d.test))
    if d.n < 1:
        raise InputError("--n", "at least 1 sample", str(d.n))
    if d.V < 2:
        raise InputError("--vocab", "at least 2 cells", str(d.V))
    if d.test == "chi2" and not 0 < d.alpha < 1:
        raise InputError("--alpha", "a level in (0, 1)", str(d.alpha))
    if d.test != "chi2" and not d.threshold > 0:
        raise InputError("--threshold", f"a positive threshold for the {d.test} test", str(d.threshold))


def power_at(d: Design, t: float) -> float:
    """Probability that design ``d`` fails a verifier whose token law is uniform shifted by
    :func:`hardest_shift` of TV ``t`` (the approximations are in the module's docstring)."""
    _check(d)
    p = np.full(d.V, 1.0 / d.V)
    shift = hardest_shift(d.V, t)
    if t > 0 and (p + shift).min() < 0:
        return 1.0  # beyond the largest even spread: a cell would go negative; any design sees it
    q = p + shift
    if d.test == "chi2":
        lam = d.n * float((shift**2 / p).sum())
        crit = float(stats.chi2.isf(d.alpha, d.V - 1))
        return float(stats.ncx2.sf(crit, d.V - 1, lam)) if lam > 0 else float(d.alpha)
    if d.test == "l2":
        S = (np.diag(q) - np.outer(q, q)) / d.n  # (V, V) covariance of the frequencies
        mean = float(shift @ shift) + (1.0 - float(q @ q)) / d.n
        var = 2.0 * float((S * S).sum()) + 4.0 * float(shift @ S @ shift)
        return float(stats.gamma.sf(d.threshold**2, mean**2 / var, scale=var / mean))
    sd = np.sqrt(q * (1 - q) / d.n)  # per-cell: inside +-atol in every cell, independently
    inside = stats.norm.cdf((d.threshold - shift) / sd) - stats.norm.cdf((-d.threshold - shift) / sd)
    return float(1.0 - np.prod(inside))


def smallest_tv(d: Design, power: float = POWER) -> float:
    """The smallest TV design ``d`` detects with probability ``power``, whatever the shape (inf if none
    below the largest even spread)."""
    _check(d)
    if not 0 < power < 1:
        raise InputError("--power", "a probability in (0, 1)", str(power))
    if d.test == "chi2":  # closed form: N * D = the noncentrality at that power, D = V^2 t^2 / (k (V - k))
        k = d.V // 2
        lam = _noncentrality(d.V - 1, float(d.alpha), float(power))
        return math.sqrt(lam * k * (d.V - k) / d.n) / d.V
    top = (d.V - d.V // 2) / d.V  # the even spread's largest t: the negative cells reach 0
    if power_at(d, top * (1 - 1e-9)) < power:
        return math.inf
    if power_at(d, 1e-12) >= power:
        return 0.0  # the design fails even the exact law that often: it is not a test at this power
    return float(optimize.brentq(lambda t: power_at(d, t) - power, 1e-12, top * (1 - 1e-9), xtol=1e-9))


def paired_rows(t: float, power: float = POWER) -> int:
    """Rows after which the paired test has seen a mismatch with probability ``power`` when the TV is t."""
    if not 0 < t < 1:
        return 1 if t >= 1 else 0
    return math.ceil(math.log(1 - power) / math.log1p(-t))


def false_alarm(d: Design) -> float:
    """Probability that ``d`` fails the exact law (its level; for l2 and per-cell from the same approximations)."""
    return d.alpha if d.test == "chi2" else power_at(d, 0.0)


def catalogue_tvs() -> dict[str, float]:
    """Each law-changing mistake of the catalogue: the smallest exact TV of its joint law from the target's
    over its home scenarios (``specviz list --tv`` prints them all)."""
    from .bugs import BUGS
    from .report import exact_bug_law
    from .scenarios import HOME, SCENARIOS, scenario_chains
    from .theory import total_variation

    out: dict[str, float] = {}
    for b in BUGS.values():
        if not b.changes_law:
            continue
        tvs = []
        for h in HOME.get(b.name, ("reference",)):
            law = exact_bug_law(h, b.name)
            if law is not None:
                sc = SCENARIOS[h]
                tvs.append(total_variation(law, scenario_chains(sc)[0].joint_law(sc.L).ravel()))
        if tvs:
            out[b.name] = min(tvs)
    return out


def report(d: Design, power: float = POWER, catalogue: dict[str, float] | None = None) -> list[str]:
    """The audit of design ``d`` in lines."""
    t = smallest_tv(d, power)
    out = [f"design {d.describe()}"]
    if d.source:
        out.append(f"  published in {d.source}")
    if d.note:
        out.append(f"  {d.note}")
    out.append(f"  false alarm rate on the exact law: {false_alarm(d):.3g}")
    if t == 0.0:
        out.append(f"smallest TV detected with probability {power}: none, it fails the exact law that often")
        return out
    if math.isinf(t):
        out.append(f"smallest TV detected with probability {power}: none (no shift of a uniform law is that visible)")
        return out
    out.append(f"smallest TV detected with probability {power}, whatever the shape of the shift: {t:.3g}")
    out.append(f"  (the hardest shape: +TV/{d.V // 2} on {d.V // 2} cells, -TV/{d.V - d.V // 2} on the rest)")
    out.append(f"specviz's paired test at the same TV: {paired_rows(t, power):,} rows see a mismatch with "
               f"probability {power}; {math.ceil(-math.log(0.05) / t):,} rows without one certify TV <= {t:.3g} "
               f"(at any V)")  # fmt: skip
    if catalogue:
        out.append("the catalogue's mistakes (exact TV of the joint law, prove's scenarios at V = 4):")
        for name, tv in sorted(catalogue.items(), key=lambda x: x[1]):
            seen = "caught whatever its shape" if tv >= t else "may be missed: below the design's TV"
            out.append(f"  {name:26s} TV {tv:.4f}  {seen}; paired test: {paired_rows(tv, power):,} rows")
    return out


def design_from(args: Any) -> Design:
    """A :class:`Design` from ``power``'s command line: a preset, its fields overridden by the flags given."""
    base = PRESETS.get(args.preset) if args.preset else None
    if args.preset and base is None:
        raise InputError("--preset", "one of " + ", ".join(PRESETS), repr(args.preset))
    if base is None:
        if args.test is None or args.n is None or args.vocab is None:
            raise InputError("--test", "--test, --n and --vocab (or --preset NAME)", "some missing")
        base = Design(args.test, args.n, args.vocab)
    fields = {"test": args.test, "n": args.n, "V": args.vocab, "alpha": args.alpha, "threshold": args.threshold}
    return base._replace(**{k: v for k, v in fields.items() if v is not None})


__all__ = ["PRESETS", "TESTS", "Design", "catalogue_tvs", "hardest_shift", "paired_rows", "power_at", "report",
           "smallest_tv"]  # fmt: skip
