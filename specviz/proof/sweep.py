"""The sweep over the uniforms: a verifier's implied law at one step, computed from its own answers.

# B rows, K drafts (padded width), V vocabulary, G grid points, C cuts

When a verifier reads its uniforms another way than the reference (a coin 1 - u, a draw from
the top of the CDF), the paired test sees a mismatch on most rows, and a mismatch is not yet a
wrong law. Given the uniforms a verifier is a function, so its law at a step is the measure of
the uniforms that lead to each outcome, and that measure can be computed from calls:

- **accept**: one draft x at one position; the set of coins u in [0, 1) that accept it.
  Its measure must be min(1, p(x)/q(x)).
- **replacement**: a coin the verifier rejects with (found by the accept sweep); the sample
  uniform s in [0, 1) picks the token. For each cut c, the measure of {s : token(s) <= c}
  is the verifier's mass on tokens 0..c; it must be that of norm(max(0, p - q)).
- **bonus**: a coin it accepts with; the token after the accepted draft must follow p at the
  next position.

Each measure: the indicator on a grid of G midpoints locates its transitions, and each
transition is bisected to 2^-``BISECT`` (48 halvings). This assumes the set is a union of
intervals longer than 1/G (true of a coin compared with a threshold in either direction, and
of an inverse CDF over the token ids in either order); a set finer than the grid would be
mis-measured. The TV at a step is |accept measure - min(1, p/q)| for the accept step, and
half the sum of |mass differences| over the C + 1 blocks between cuts for a draw (a lower
bound of the draw's TV: differences inside a block cancel). The resolution bound printed
beside each is the bisection's, transitions * 2^-48, plus the reference grid's V * 2^-48 and,
for a draw, twice the rounding of p - q in the type it is computed in (2^-24 below float64).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..verifiers.reference import GRID
from .handover import DEFAULT_SPEC, CallSpec, Handover, Round, Tables, TableSource, outcome, tables_at
from .harness import raised_by_verifier
from .theory import total_variation

PROGRESS_EVERY = 5.0  # seconds between progress lines (the paired test's interval)
GRID_POINTS = 64  # G: the first look at each indicator
BISECT = 48  # halvings per transition: the boundary to 2^-48
CUTS = 32  # C: cuts of the token ids at equal steps of the exact CDF


class Step(NamedTuple):
    """One step's implied law against the exact one."""

    row: int  # the table row it came from
    part: str  # "accept" | "replacement" | "bonus"
    tv: float  # the verifier's TV from the exact law at this step (blocks for a draw)
    resolution: float  # what the sweep cannot resolve
    detail: str
    implied: tuple[float, ...] = ()  # accept: (its measure,); a draw: the block masses between cuts
    cuts: tuple[int, ...] = ()  # a draw: the last token of each block but the last

    @property
    def passed(self) -> bool:
        return self.tv <= self.resolution


class Sweep(NamedTuple):
    steps: list[Step]
    V: int
    spec: CallSpec
    seconds: float
    calls: int
    rows: tuple[tuple[int, np.ndarray, np.ndarray, int], ...] = ()  # (row, p (2, V), q (1, V), draft x) swept

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.steps)

    def lines(self) -> list[str]:
        out = [f"sweep over the uniforms at V = {self.V:,}, {self.spec.describe()}:",
               f"  the implied law at each step against the exact one ({self.calls} calls, {self.seconds:.1f} s)"]
        for s in self.steps:
            verdict = "pass" if s.passed else "FAIL"
            out.append(f"  {verdict:4s} row {s.row:>2} {s.part:11s} TV {s.tv:9.3g} (resolution {s.resolution:.2g})"
                       f" {s.detail}"[:99])  # fmt: skip
        return out


class _Prober:
    """Calls the verifier on copies of one step: each query row its own coin and sample uniform."""

    def __init__(self, verifier: Callable[..., Any], spec: CallSpec, p: np.ndarray, q: np.ndarray, x: int) -> None:
        self.verifier, self.spec, self.p, self.q, self.x = verifier, spec, p, q, x  # p (2, V), q (1, V)
        self.calls = 0

    def run(self, coins: np.ndarray, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(accepted (M,) bool, last token (M,)) for M queries."""
        M = len(coins)
        P = np.broadcast_to(self.p, (M, *self.p.shape))
        Q = np.broadcast_to(self.q, (M, *self.q.shape))
        t = Tables(P, Q, np.ones(M, dtype=np.int64), Q)
        c = Handover(t, self.spec).call(Round(np.full((M, 1), self.x, dtype=np.int64), coins[:, None], samples))
        self.calls += 1
        with raised_by_verifier("the sweep over the uniforms"):
            res = self.verifier(*c.args, uniforms=c.uniforms)
        tokens, num = outcome(res, M, 1)
        return num == 2, tokens[np.arange(M), num - 1]


def measure(indicator: Callable[[np.ndarray], np.ndarray], G: int = GRID_POINTS,
            extra: np.ndarray | None = None) -> tuple[float, int]:  # fmt: skip
    """(measure of {u in [0, 1): indicator(u)}, transitions found), ``indicator`` batched over u (M,).

    The first look is at G midpoints, at 0 and 1 - 2^-53 (a set touching an end is found however
    short), and at ``extra`` points in [0, 1).
    """
    grid = np.concatenate([[0.0, 1.0 - 2.0**-53], (np.arange(G) + 0.5) / G, [] if extra is None else extra])
    grid = np.unique(np.clip(grid, 0.0, 1.0 - 2.0**-53))
    ind = indicator(grid)  # (G,)
    flips = np.flatnonzero(ind[1:] != ind[:-1])  # transitions between grid[k] and grid[k + 1]
    lo, hi = grid[flips].copy(), grid[flips + 1].copy()
    for _ in range(BISECT):
        if not flips.size:
            break
        mid = 0.5 * (lo + hi)
        same = indicator(mid) == ind[flips]  # still on the left point's side
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    edges = 0.5 * (lo + hi)  # (T,) the transitions
    # Pieces between 0, the transitions and 1 alternate starting with the first grid point's value.
    bounds = np.concatenate([[0.0], edges, [1.0]])
    values = np.concatenate([[ind[0]], ind[flips + 1]])
    return float(np.sum(np.diff(bounds)[values.astype(bool)])), int(flips.size)


def _exact_residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    r = np.maximum(p - q, 0.0)
    s = r.sum()
    return r / s if s > 0 else p / p.sum()


class _Progress:
    """A line now and then with the steps done and the time left, estimated from the pace so far."""

    def __init__(self, note: Callable[[str], None] | None, total: int, every: float) -> None:
        self.note, self.total, self.every = note, total, every
        self.t0 = self.last = time.perf_counter()

    def within(self, start: float, fraction: float) -> None:
        """A step that began after ``start`` steps is ``fraction`` done."""
        self.tick(start + fraction)

    def tick(self, done: float) -> None:
        now = time.perf_counter()
        if self.note is None or done <= 0 or now - self.last < self.every:
            return
        self.last = now
        left = (now - self.t0) / done * max(self.total - done, 0.0)
        self.note(f"sweep over the uniforms: {done:.1f} of at most {self.total} steps, "
                  f"about {left:.0f} s left at most")  # fmt: skip


def _draw_step(prober: _Prober, coin: float, law: np.ndarray, part: str, row: int, V: int, eps: float,
               tick: Callable[[float], None] = lambda f: None) -> Step:  # fmt: skip
    cdf = np.cumsum(law)
    cuts = np.searchsorted(cdf, np.arange(1, CUTS + 1) / (CUTS + 1) * cdf[-1])
    cuts = np.unique(np.concatenate([cuts, cuts - 1]).clip(0, V - 2))  # each cut token a block of its own
    total_flips = 0
    masses = []
    for c in cuts:  # mass on tokens 0..c
        level = cdf[c] / cdf[-1]  # look near the exact level, either way round
        extra = np.array([level, np.nextafter(level, 0), 1 - level, np.nextafter(1 - level, 0)])
        def at_most_c(s: np.ndarray, c: Any = c) -> np.ndarray:  # the draw's token <= c, for sample uniforms s
            return prober.run(np.full(len(s), coin), s)[1] <= c

        m, f = measure(at_most_c, extra=extra)
        masses.append(m)
        total_flips += f
        tick(len(masses) / len(cuts))
    implied = np.diff(np.concatenate([[0.0], masses, [1.0]]))  # (C + 1,) block masses
    exact = np.diff(np.concatenate([[0.0], cdf[cuts] / cdf[-1], [1.0]]))
    tv = total_variation(implied, exact)
    res = total_flips * 2.0**-BISECT + V / GRID + 2 * eps
    return Step(row, part, tv, res, f"{len(cuts)} cuts, {total_flips} transitions", tuple(implied.tolist()),
                tuple(int(c) for c in cuts))  # fmt: skip


def sweep(verifier: Callable[..., Any], *, V: int, spec: CallSpec = DEFAULT_SPEC, rows: int = 3,
          seed: int = 0, progress: Callable[[str], None] | None = None, every: float | None = None,
          source: TableSource | None = None) -> Sweep:
    """The implied law of ``verifier`` at ``rows`` realistic steps, each against the exact law.

    ``verifier`` takes :func:`specviz.verify`'s arguments (the padded layout; ``spec.layout``
    = flat calls it with :func:`specviz.verify_flat`'s) and ``uniforms=``. Per row: the accept
    measure of the drafted token, the replacement law after a rejection, the bonus law after an
    acceptance. ``progress`` gets a line with the steps done and the time left every ``every``
    seconds (default :data:`PROGRESS_EVERY`). ``source``: where the rows come from (default:
    realistic rows at V, :func:`specviz.proof.handover.tables_at`). Returns :class:`Sweep`.
    """
    t0 = time.perf_counter()
    bar = _Progress(progress, 3 * rows, PROGRESS_EVERY if every is None else every)
    t = tables_at(V, source)(1, max(rows, 2) + 2, seed=seed, dtype=spec.dtype)
    steps, calls, swept = [], 0, []
    eps = 2.0**-53 if spec.dtype == "float64" else 2.0**-24  # the residual's rounding, in the type it is computed in
    for b in range(1, rows + 1):
        p, q = t.target[b], t.draft[b]  # (2, V), (1, V)
        both = np.flatnonzero((q[0] > 0) & (p[0] > 0))
        if not both.size:
            continue
        base = 3.0 * (b - 1)  # steps before this row's: accept, replacement, bonus per row
        ratio = p[0, both] / q[0, both]
        x = int(both[np.argmin(np.abs(ratio - 0.5))])  # a draft accepted about half the time
        prober = _Prober(verifier, spec, p, q, x)
        def accepted(u: np.ndarray, pr: _Prober = prober) -> np.ndarray:  # accepted, for coins u
            return pr.run(u, np.full(len(u), 0.5))[0]

        a, flips = measure(accepted)
        exact = min(1.0, p[0, x] / q[0, x])
        steps.append(Step(b, "accept", abs(a - exact), flips * 2.0**-BISECT + 1e-15,
                          f"x = {x}: {a:.12f} vs p/q {exact:.12f}", (a,)))  # fmt: skip
        bar.tick(base + 1)
        swept.append((b, p, q, x))
        grid = (np.arange(GRID_POINTS) + 0.5) / GRID_POINTS
        acc = prober.run(grid, np.full(GRID_POINTS, 0.5))[0]
        if (~acc).any():
            steps.append(_draw_step(prober, float(grid[np.argmax(~acc)]), _exact_residual(p[0], q[0]),
                                    "replacement", b, V, eps, functools.partial(bar.within, base + 1)))  # fmt: skip
        if acc.any():
            steps.append(_draw_step(prober, float(grid[np.argmax(acc)]), p[1] / p[1].sum(), "bonus", b, V, eps,
                                    functools.partial(bar.within, base + 2)))  # fmt: skip
        calls += prober.calls
    return Sweep(steps, V, spec, time.perf_counter() - t0, calls, tuple(swept))
