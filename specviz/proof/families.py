"""Families of known mistakes, each fitted at its best parameter to what a failing verifier emitted.

# B rows, K drafts (padded width), V vocabulary, L tokens judged, C = V**L cells

The catalogue (:mod:`specviz.proof.bugs`) holds each mistake at one setting: the target
unprocessed at the request's temperature 0.5, say. An engine makes the same mistake at its own
setting, and a catalogue entry at another setting is no explanation of it. So a failing case is
also compared with a *family*: the same mistake at any value of its parameter, each member the
reference rule (:data:`specviz.verifiers.reference.verify`) with one thing done wrong.

- **unprocessed q** (accepted drafts and replacement): drafts come from q = softmax(l / T), the
  verifier is handed the drafter's raw softmax(l), proportional to q^T. T = 1 is the rule.
- **unprocessed p** (accepted drafts, replacement and bonus): the verifier is handed the target's
  raw softmax, proportional to p^T, while the request samples p. T = 1 is the rule.
- **mixture with q** (accepted drafts): the coin is compared with the ratio of (1 - w) p + w q to
  q. That is Hugging Face's assistant ensemble (its weight 0.5 is w = 0.5; its replacement,
  norm((v - q)^+), is the rule's). w = 0 is the rule.
- **misaligned rows** (accepted drafts and replacement): row b is verified against the draft rows
  of row b + 1 (an off-by-one in a gather). No parameter; no member is the rule.
- **residual normalization** (replacement): the replacement's inverse CDF compares the running
  sums of (p - q)^+ with u * m^k, m = sum (p - q)^+ = 1 - a. k = 1 is the rule; k = 0 is a
  residual never normalized (the mass past m falls on the last token with weight); k > 1
  divides by too small a number (the top of the residual is never drawn).

Each member's law in the case's scenario is exact (:func:`specviz.proof.exact.verifier_law`),
except misaligned rows: rows of one batch are different sequences, so that member's law is
sampled, at the case's N (:func:`sampled_law`). A parameter is fitted on :data:`Family.grid`,
then refined by golden-section search around the best grid point (:data:`REFINE` steps).

**When a family fits.** The distance is the total variation between the observed frequencies and
the member's law. A family *fits* when its best member is nearer than :data:`MARGIN` times the
target's own distance (TV(observed, target), which the member must beat for it to explain
anything). Otherwise the report says "no known family fits". Sampling noise alone puts the
observed frequencies about :func:`noise_tv` from the law that made them; the report prints it
beside the fit, so a reader sees whether the best member is as near as the noise allows.
"""

from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..verifiers import reference
from .exact import verifier_law
from .markov import Drafter
from .scenarios import SCENARIOS, Scenario, scenario_chains
from .simulate import generate
from .stats import counts
from .theory import total_variation

MARGIN = 0.5  # a family fits when its best member is nearer than this times the target's distance
REFINE = 6  # golden-section steps after the grid, for the family best on its grid
AUDIT = 512  # verifier_law's random audit points per context: members are thresholds on the uniforms, like
# the catalogue's bugs, so the probes resolve them; the audit is a check, and 512 points halve its cost
GOLD = (math.sqrt(5) - 1) / 2
SAMPLED_N = 100_000  # sequences at most of a sampled family's law (misaligned rows)


def _one_hot_q(draft_tokens: Any, V: int) -> np.ndarray:
    x = np.clip(np.asarray(draft_tokens, dtype=np.int64), 0, V - 1)
    return np.eye(V)[x]  # (B, K, V)


def _power_rows(a: np.ndarray, t: float) -> np.ndarray:
    """Rows of ``a`` (..., V) raised to ``t`` and renormalized; zeros stay zeros, empty rows stay empty."""
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(a > 0, np.power(np.where(a > 0, a, 1.0), t), 0.0)
        s = w.sum(axis=-1, keepdims=True)
        return np.where(s > 0, w / np.where(s > 0, s, 1.0), w)


def unprocessed_q(t: float) -> Callable[..., Any]:
    """The rule handed q^T (renormalized) where drafts came from q: a drafter temperature T forgotten."""

    def fn(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
           uniforms: Any = None, validate: bool = True) -> Any:  # fmt: skip
        q = None if draft_probs is None else _power_rows(np.asarray(draft_probs, dtype=np.float64), t)
        return reference.verify(np.asarray(target_probs, dtype=np.float64), q, draft_tokens, num_draft, rng=rng,
                                uniforms=uniforms, validate=False)  # fmt: skip

    return fn


def unprocessed_p(t: float) -> Callable[..., Any]:
    """The rule handed p^T (renormalized) where the request samples p: the target's temperature forgotten."""

    def fn(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
           uniforms: Any = None, validate: bool = True) -> Any:  # fmt: skip
        p = _power_rows(np.asarray(target_probs, dtype=np.float64), t)
        return reference.verify(p, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)

    return fn


def mixture(w: float) -> Callable[..., Any]:
    """The rule with (1 - w) p + w q as the target of each drafted position (the bonus row keeps p)."""

    def fn(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
           uniforms: Any = None, validate: bool = True) -> Any:  # fmt: skip
        P = np.array(target_probs, dtype=np.float64)  # (B, K+1, V), a private copy
        B, K1, V = P.shape
        Q = _one_hot_q(draft_tokens, V) if draft_probs is None else np.asarray(draft_probs, dtype=np.float64)
        drafted = np.arange(K1 - 1)[None, :] < np.asarray(num_draft, dtype=np.int64).reshape(B, 1)  # (B, K)
        mixed = (1 - w) * P[:, :-1] + w * Q  # (B, K, V)
        P[:, :-1] = np.where(drafted[..., None], mixed, P[:, :-1])
        return reference.verify(P, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=False)

    return fn


def misaligned(_: float = 0.0) -> Callable[..., Any]:
    """The rule with row b verified against the draft rows of row b + 1 (the last row against row 0)."""

    def fn(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
           uniforms: Any = None, validate: bool = True) -> Any:  # fmt: skip
        q = draft_probs
        if q is not None and len(q) > 1:
            q = np.roll(np.asarray(q, dtype=np.float64), -1, axis=0)  # (B, K, V): row b gets row b + 1
        return reference.verify(np.asarray(target_probs, dtype=np.float64), q, draft_tokens, num_draft, rng=rng,
                                uniforms=uniforms, validate=False)  # fmt: skip

    return fn


def residual_normalized(k: float) -> Callable[..., Any]:
    """The rule whose replacement compares the residual's running sums with u * m^k (m its mass)."""

    def replacement(p: np.ndarray, q: np.ndarray | None, x: np.ndarray, u: np.ndarray) -> np.ndarray:
        w = reference.residual(p, q, x)  # (R, V)
        m = w.sum(axis=1)  # (R,)
        empty = m <= 0
        w[empty] = p[empty]
        m = np.where(empty, 1.0, m)
        cdf = np.cumsum(w, axis=1)  # (R, V)
        tok = np.count_nonzero(cdf <= (u * m**k)[:, None], axis=1)
        last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)  # never past the last token with weight
        return np.minimum(tok, last).astype(np.int64)

    return reference.with_step(reference.verify, f"residual_normalized_{k:g}", replacement=replacement)


class Family(NamedTuple):
    name: str
    step: str  # where the law breaks: the steps this mistake changes
    parameter: str  # its name ("" when it has none)
    rule: float | None  # the parameter's value at which the member is the rule (None: none is)
    grid: tuple[float, ...]  # where the fit looks first
    build: Callable[[float], Callable[..., Any]]
    exact: bool = True  # its law by enumeration; False: sampled in the case's scenario

    def member(self, value: float) -> str:
        """The member at ``value`` in words, e.g. "unprocessed q, T = 0.60"."""
        return self.name if not self.parameter else f"{self.name}, {self.parameter} = {value:.2f}"


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("unprocessed q", "accepted drafts and replacement", "T", 1.0,
           (0.3, 0.5, 0.75, 1.4, 2.2), unprocessed_q),
    Family("unprocessed p", "accepted drafts, replacement and bonus", "T", 1.0,
           (0.3, 0.5, 0.75, 1.4, 2.2), unprocessed_p),
    Family("mixture with q", "accepted drafts", "w", 0.0, (0.15, 0.35, 0.55, 0.75, 0.95), mixture),
    Family("misaligned rows", "accepted drafts and replacement", "", None, (0.0,), misaligned, exact=False),
    Family("residual normalization", "replacement", "k", 1.0, (0.0, 0.5, 1.6, 2.5), residual_normalized),
)}  # fmt: skip


@functools.lru_cache(maxsize=512)
def exact_law(scenario: str, family: str, value: float) -> np.ndarray | None:
    """The exact joint law (C,) of a family member in a scenario, or None where the court refuses."""
    sc = SCENARIOS[scenario]
    target, dchain = scenario_chains(sc)
    num_draft: Any = range(sc.K + 1) if sc.ragged else sc.K
    try:
        res = verifier_law(FAMILIES[family].build(value), target, Drafter(dchain, sc.drafter_mode), L=sc.L,
                           num_draft=num_draft, K=sc.K, audit=AUDIT)  # fmt: skip
    except Exception:  # refused: this member has no exact law here
        return None
    law = np.asarray(res.law, dtype=np.float64).ravel()
    if not np.isfinite(law).all() or abs(law.sum() - 1) > 1e-9 or res.unresolved > 1e-9:
        return None
    return law


def sampled_law(sc: Scenario, verifier: Callable[..., Any], n: int, seed: int) -> np.ndarray:
    """A verifier's joint frequencies (C,) in a scenario from ``n`` sequences, as prove samples them."""
    target, dchain = scenario_chains(sc)
    rng = np.random.default_rng([seed, 1 + list(SCENARIOS).index(sc.name), 18])  # not the case's own stream
    sim = generate(verifier, target, Drafter(dchain, sc.drafter_mode), n=n, L=sc.L, K=sc.K, rng=rng,
                   ragged=sc.ragged)  # fmt: skip
    obs = counts(sim.sequences, sc.V, sc.L).astype(np.float64)
    return obs / max(obs.sum(), 1.0)


def noise_tv(law: np.ndarray, n: int) -> float:
    """The expected TV between ``law`` (C,) and the frequencies of ``n`` draws from it, to first order:
    half the sum of E|X/n - p| = sqrt(2 p (1 - p) / (pi n)) over cells."""
    p = np.asarray(law, dtype=np.float64).ravel()
    return 0.5 * float(np.sum(np.sqrt(2 * p * (1 - p) / (math.pi * max(n, 1)))))


class Fit(NamedTuple):
    """One family at its best parameter."""

    family: str
    step: str
    value: float  # the best parameter (0 for a family without one)
    tv: float  # TV(observed, the member's law)
    source: str  # "exact" or "sampled, N = ..."

    def member(self) -> str:
        return FAMILIES[self.family].member(self.value)


class Diagnosis(NamedTuple):
    """The families fitted to a failing case, best first."""

    scenario: str
    tv_to_target: float  # TV(observed, the target's law): what the correct rule scores
    noise: float  # TV that sampling noise alone gives, at the case's N
    fits: list[Fit]  # best first; families with no law here are left out
    refused: list[str]  # families whose law was unavailable here

    @property
    def best(self) -> Fit | None:
        return self.fits[0] if self.fits else None

    @property
    def fitted(self) -> bool:
        """The best family is nearer than MARGIN times the target's distance."""
        return self.best is not None and self.best.tv < MARGIN * self.tv_to_target

    def lines(self) -> list[str]:
        """The diagnosis within 100 columns."""
        if not self.fits:
            return ["no known family fits: no family's law is available here"]
        b = self.best
        assert b is not None
        if self.fitted:
            out = [f"nearest family: {b.member()} (wrong at: {b.step})",
                   f"  TV(observed, it) = {b.tv:.4f} against {self.tv_to_target:.4f} for the rule "
                   f"(noise alone ~{self.noise:.4f}; {b.source})"]  # fmt: skip
        else:
            out = [f"no known family fits: the nearest, {b.member()}, is at TV {b.tv:.4f},",
                   f"  not below {MARGIN} x the rule's {self.tv_to_target:.4f} (noise alone ~{self.noise:.4f})"]
        others = [f"{f.member()} {f.tv:.4f}" for f in self.fits[1:]]
        if others:  # wrapped between members, never inside one
            nbsp = [o.replace(" ", "\0") for o in others]
            text = textwrap.wrap("others at their best: " + "; ".join(nbsp), 99, initial_indent="  ",
                                 subsequent_indent="    ")  # fmt: skip
            out += [t.replace("\0", " ") for t in text]
        if self.refused:
            out.append("  no law here for: " + ", ".join(self.refused))
        return out


def _golden(f: Callable[[float], float], lo: float, hi: float, steps: int) -> tuple[float, float]:
    """(argmin, min) of f on [lo, hi] by golden-section search, ``steps`` shrinkings."""
    a, b = lo, hi
    c, d = b - GOLD * (b - a), a + GOLD * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - GOLD * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLD * (b - a)
            fd = f(d)
    return (c, fc) if fc <= fd else (d, fd)


class _Scorer:
    """TV between the observed frequencies and a family's members, each member's law computed once."""

    def __init__(self, family: Family, scenario: str, freq: np.ndarray) -> None:
        self.family, self.scenario, self.freq = family, scenario, freq
        self.scores: dict[float, float] = {}

    def __call__(self, v: float) -> float:
        v = round(float(v), 4)
        if v not in self.scores:
            law = exact_law(self.scenario, self.family.name, v)
            self.scores[v] = math.inf if law is None else total_variation(self.freq, law)
        return self.scores[v]

    def best(self) -> tuple[float, float]:
        v = min(self.scores, key=lambda k: self.scores[k])
        return v, self.scores[v]

    def refine(self) -> tuple[float, float]:
        """Golden-section search between the grid points either side of the best one."""
        grid = list(self.family.grid)
        i = grid.index(min(grid, key=lambda g: self(g)))
        lo = grid[i - 1] if i > 0 else max(grid[i] - (grid[1] - grid[0]) / 2, 0.0)
        hi = grid[i + 1] if i + 1 < len(grid) else grid[i] + (grid[-1] - grid[-2]) / 2
        _golden(self, lo, hi, REFINE)
        return self.best()


def diagnose(scenario: str, observed: np.ndarray, target_law: np.ndarray, *, seed: int = 0,
             families: Sequence[str] | None = None, sample_n: int = SAMPLED_N) -> Diagnosis:  # fmt: skip
    """Fit every family (or those named) to the joint counts ``observed`` (C,) of a case in ``scenario``.

    Each family with a parameter is scored on its grid; the best of them is refined
    (:data:`REFINE` golden-section steps), the others are reported at their best grid point.
    A sampled family (misaligned rows) runs min(N, ``sample_n``) sequences.
    """
    sc = SCENARIOS[scenario]
    obs = np.asarray(observed, dtype=np.float64).ravel()
    n = int(obs.sum())
    freq = obs / max(n, 1)
    target = np.asarray(target_law, dtype=np.float64).ravel()
    fits, refused, scorers = [], [], {}
    for name in families or FAMILIES:
        fam = FAMILIES[name]
        if not fam.exact:
            m = max(min(n, sample_n), 1)
            law = sampled_law(sc, fam.build(0.0), m, seed)
            fits.append(Fit(name, fam.step, 0.0, total_variation(freq, law), f"sampled, N = {m:,}"))
            continue
        scorer = _Scorer(fam, scenario, freq)
        for v in fam.grid:
            scorer(v)
        v, tv = scorer.best()
        if math.isfinite(tv):
            scorers[name] = scorer
            fits.append(Fit(name, fam.step, v, tv, "exact"))
        else:
            refused.append(name)
    graded = [f for f in fits if f.family in scorers]
    if graded:  # refine the best family with a parameter
        top = min(graded, key=lambda f: f.tv)
        v, tv = scorers[top.family].refine()
        fits[fits.index(top)] = top._replace(value=v, tv=tv)
    fits.sort(key=lambda f: f.tv)
    return Diagnosis(scenario, total_variation(freq, target), noise_tv(target, n), fits, refused)


# --- the same families at one step of the sweep over the uniforms (prove --vocab) -------------------
#
# The sweep (specviz.proof.sweep) measures a verifier's implied law at a few realistic steps: the
# accept measure of one draft x and the block masses of the replacement and of the bonus. Each
# family member's law at such a step is a closed form of the row's p (2, V) and q (1, V), so the
# fit is over a fine grid of the parameter, then refined. Misaligned rows are not visible there
# (the sweep's queries are copies of one row): the batch_invariance probe catches them.

SWEEP_GRIDS = {"unprocessed q": np.linspace(0.1, 3.0, 59), "unprocessed p": np.linspace(0.1, 3.0, 59),
               "mixture with q": np.linspace(0.0, 1.0, 51), "residual normalization": np.linspace(0.0, 3.0, 61)}


def _norm_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    r = np.maximum(p - q, 0.0)
    s = r.sum()
    return r / s if s > 0 else p / p.sum()


def _scaled_draw(w: np.ndarray, k: float) -> np.ndarray:
    """The law (V,) of a draw comparing the running sums of w with u * m^k (m = sum w), the overflow on
    the last token with weight."""
    m = w.sum()
    if m <= 0:
        return w
    z = m**k
    cdf = np.cumsum(w)
    law = np.diff(np.concatenate([[0.0], np.minimum(cdf, z)])) / z  # (V,) the part of [0, z) each token holds
    if z > m:
        law[np.flatnonzero(w > 0)[-1]] += (z - m) / z
    return law


def step_laws(family: str, value: float, p: np.ndarray, q: np.ndarray, x: int) -> tuple[float, np.ndarray, np.ndarray]:
    """(accept probability of x, replacement law (V,), bonus law (V,)) of a member at one step; the
    rule for family "" (p (2, V) the target rows, q (1, V) the draft row)."""
    p0, p1, q0 = p[0], p[1] / p[1].sum(), q[0]
    if family == "unprocessed q":
        qt = _power_rows(q0, value)
        return min(1.0, p0[x] / qt[x]), _norm_residual(p0, qt), p1
    if family == "unprocessed p":
        pt = _power_rows(p, value)
        return min(1.0, pt[0, x] / q0[x]), _norm_residual(pt[0], q0), pt[1]
    if family == "mixture with q":
        return min(1.0, (1 - value) * p0[x] / q0[x] + value), _norm_residual(p0, q0), p1
    if family == "residual normalization":
        return min(1.0, p0[x] / q0[x]), _scaled_draw(np.maximum(p0 - q0, 0.0), value), p1
    if family:
        raise ValueError(f"no step laws for family {family!r}")
    return min(1.0, p0[x] / q0[x]), _norm_residual(p0, q0), p1


def _blocks(law: np.ndarray, cuts: Sequence[int]) -> np.ndarray:
    cdf = np.cumsum(law)
    return np.diff(np.concatenate([[0.0], cdf[list(cuts)], [1.0]]))


def sweep_distance(sweep: Any, family: str, value: float) -> float:
    """Sum over the sweep's steps of the TV between the verifier's implied law and the member's."""
    rows = {b: (p, q, x) for b, p, q, x in sweep.rows}
    total = 0.0
    for s in sweep.steps:
        if s.row not in rows or not s.implied:
            continue
        a, rep, bonus = step_laws(family, value, *rows[s.row])
        if s.part == "accept":
            total += abs(s.implied[0] - a)
        else:
            law = rep if s.part == "replacement" else bonus
            total += total_variation(s.implied, _blocks(law, s.cuts))
    return total


class SweepDiagnosis(NamedTuple):
    """The families fitted to the steps of a failing sweep, best first."""

    rule: float  # the sum of the steps' TVs from the exact law: the correct rule's distance
    fits: list[Fit]  # tv: the sum of the steps' TVs from the member's law
    broken: list[str]  # the parts of the law that break ("accept", "replacement", "bonus")
    resolution: float  # the sum of the steps' resolutions: what the sweep cannot tell apart

    @property
    def fitted(self) -> bool:
        """The best member agrees with the verifier at the steps swept, to the sweep's resolution (no
        sampling noise here: a member merely nearer than the rule, like q at T = 0.9996 for a q
        rounded to bfloat16, is not an explanation)."""
        return bool(self.fits) and self.fits[0].tv <= self.resolution < self.rule

    def lines(self) -> list[str]:
        out = [f"the law breaks at: {', '.join(self.broken)}"]
        b = self.fits[0] if self.fits else None
        if b is None:
            return [*out, "no known family fits: none has a law at these steps"]
        if self.fitted:
            out += [f"nearest family: {b.member()} (wrong at: {b.step})",
                    f"  summed step TV from it {b.tv:.3g} (resolution {self.resolution:.2g}) against "
                    f"{self.rule:.3g} from the rule"]  # fmt: skip
        else:
            out += [f"no known family fits: the nearest, {b.member()}, is at summed step TV {b.tv:.3g},",
                    f"  beyond the sweep's resolution {self.resolution:.2g} (the rule: {self.rule:.3g})"]
        return out


def diagnose_sweep(sweep: Any) -> SweepDiagnosis:
    """Fit every family with step laws to a sweep (:class:`specviz.proof.sweep.Sweep`) that failed."""
    rule = sweep_distance(sweep, "", 0.0)
    fits = []
    for name, grid in SWEEP_GRIDS.items():
        scores = [sweep_distance(sweep, name, float(v)) for v in grid]
        i = int(np.argmin(scores))
        lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
        v, tv = _golden(functools.partial(sweep_distance, sweep, name), lo, hi, 24)
        if tv > scores[i]:
            v, tv = float(grid[i]), scores[i]
        fits.append(Fit(name, FAMILIES[name].step, round(v, 4), tv, "exact, at the steps swept"))
    fits.sort(key=lambda f: f.tv)
    broken = list(dict.fromkeys(s.part for s in sweep.steps if not s.passed))
    return SweepDiagnosis(rule, fits, broken, float(sum(s.resolution for s in sweep.steps)))
