"""The Verifiers page's problem, its measured rows, and its certified bound: a verifier paired with the reference.

# B rows, K drafts (padded width), V vocabulary

The page's problem (the toy pair, a typed p and q, or a scenario) is a Markov chain target and
a drafter (:class:`specviz.proof.court.Problem`). :func:`problem_round` draws B rows from it:
each row a context drawn uniformly (the start or any token), drafts drawn from the drafter one
after another (a deterministic drafter takes the argmax), the target's and drafter's rows after
each prefix, the row's draft count as the problem says, and explicit uniforms. :func:`certify`
hands the same tables and uniforms to the verifier and to :func:`specviz.verifiers.reference.verify`
(float64 NumPy, padded layout, as the page's numbers are) and counts the rows whose tokens differ.
By the coupling inequality (:mod:`specviz.proof.ship`), 0 mismatches in n rows certify
TV(verifier, reference) <= -ln(0.05)/n at 95%, and the reference is within V * 2^-48 of the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import court
from ..proof.court import Problem
from ..proof.handover import outcome
from ..proof.ship import CONFIDENCE, certified_bound
from ..verifiers.reference import GRID
from ..verifiers.verify import PAD_TOKEN, verify
from . import results

ROWS = 100_000  # rows per certificate: at V = 4, K = 3 about 0.07 s of CPU for both verifiers (0.17 s at 200,000)
BATCH = 5_000  # rows per call
MAX_ROWS = 1_000_000
ENGINE = ("the chain engine (specviz.verify)", verify)  # (name, verifier) the page certifies


class Certificate(NamedTuple):
    """What the paired test on the page's problem saw and certified."""

    verifier: str
    rows: int
    drafts: int
    mismatches: int
    bound: float  # CONFIDENCE upper bound on P(mismatch) >= TV(verifier, reference)
    reference_tv: float  # V * 2^-48 >= TV(reference, target)
    V: int
    K: int
    seconds: float  # CPU seconds of the whole test

    @property
    def certified(self) -> bool:
        return self.mismatches == 0 and self.rows > 0

    def lines(self) -> list[str]:
        """The result in words (Markdown-free; the page shows each line as it is)."""
        ln = -np.log(1.0 - CONFIDENCE)
        head = f"{self.verifier} against specviz.verifiers.reference.verify on the same inputs and uniforms: "
        if self.certified:
            return [
                head + f"{self.mismatches} mismatches in {self.rows:,} rows ({self.drafts:,} drafts).",
                f"Certified: TV(engine, reference) <= -ln(0.05)/n = {ln:.4f} / {self.rows:,} = {self.bound:.4g} at "
                f"{CONFIDENCE:.0%}, plus the reference's own V * 2^-48 = {self.reference_tv:.2g} from the target.",
            ]
        return [
            head + f"{self.mismatches:,} mismatches in {self.rows:,} rows ({self.drafts:,} drafts).",
            f"No certificate: rows differ from the reference (mismatch rate {self.mismatches / max(self.rows, 1):.3g};"
            f" {CONFIDENCE:.0%} upper bound {self.bound:.3g}).",
        ]


def covers(pb: Problem, source_label: str) -> str:
    """What the certificate covers, in words."""
    nd = pb.num_draft
    counts = f"{nd} drafts per row" if isinstance(nd, int) else f"draft counts {', '.join(map(str, nd))} (ragged)"
    drafter = {"sample": "drafts sampled from q", "argmax": "a deterministic drafter (argmax, no q)",
               "argmax_reports_softmax": "argmax drafts reported with the full q"}[pb.drafter.mode]  # fmt: skip
    return (f"Covers: these distributions ({source_label}: V = {pb.target.V}, K = {pb.K}, {counts}, {drafter}, "
            "every context equally often), this dtype (float64 NumPy) and this layout (padded); the law of whole "
            "rows, averaged over the rows drawn. Nothing about other distributions, dtypes or layouts: "
            "python -m specviz prove --vocab V tests those.")  # fmt: skip


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(R,) tokens by inverse CDF: cdf (R, V) running sums, u (R,) in [0, 1); never a zero-mass token."""
    V = cdf.shape[1]
    x = np.minimum((cdf <= (u * cdf[:, -1])[:, None]).sum(axis=1), V - 1)
    mass = np.diff(cdf, axis=1, prepend=0.0)
    zero = mass[np.arange(len(x)), x] <= 0  # float rounding at a zero's edge: the heaviest token instead
    x[zero] = mass[zero].argmax(axis=1)
    return x


def problem_round(pb: Problem, B: int, rng: np.random.Generator) -> tuple[tuple, tuple, int]:
    """(verifier arguments, uniforms (accept, sample), drafts) of B rows drawn from ``pb`` (module docstring)."""
    V, K = pb.target.V, pb.K
    chain = pb.drafter.chain
    nd = pb.num_draft
    num = np.full(B, nd, dtype=np.int64) if isinstance(nd, int) else rng.choice(np.asarray(nd, np.int64), size=B)
    prev = rng.integers(-1, V, size=B)  # -1: the start row
    P = np.empty((B, K + 1, V))
    Q = np.empty((B, K, V))
    x = np.full((B, K), PAD_TOKEN, dtype=np.int64)
    for i in range(K + 1):
        P[:, i] = pb.target.probs(prev)
        if i == K:
            break
        q = chain.probs(prev)  # (B, V)
        Q[:, i] = q
        tok = q.argmax(axis=1) if pb.drafter.mode != "sample" else _draw(np.cumsum(q, axis=1), rng.random(B))
        x[:, i] = np.where(i < num, tok, PAD_TOKEN)
        prev = tok  # rows past their count go on with a valid context: their rows are never read
    draft = Q if pb.drafter.reports_q else None
    return (P, draft, x, num), (rng.random((B, K)), rng.random(B)), int(num.sum())


def certify(verifier: Callable[..., Any], name: str, pb: Problem, *, rows: int = ROWS, seed: int = 0) -> Certificate:
    """Paired test of ``verifier`` (:func:`specviz.verify`'s signature and ``uniforms=``) against the reference
    on ``rows`` rows of ``pb``; stops at the first call with a mismatch. Returns :class:`Certificate`."""
    from ..verifiers.reference import verify as ref

    if not isinstance(rows, int) or not 1 <= rows <= MAX_ROWS:
        raise InputError("rows", f"an integer in [1, {MAX_ROWS:,}]", repr(rows))
    rng = np.random.default_rng([seed, 18, 7])
    t0 = time.process_time()
    done = drafts = bad = 0
    while done < rows and not bad:
        B = min(BATCH, rows - done)
        args, uniforms, nd = problem_round(pb, B, rng)
        expected, _ = outcome(ref(*args, uniforms=uniforms, validate=False), B, pb.K)
        got, _ = outcome(verifier(*args, uniforms=uniforms), B, pb.K)
        bad += int((got != expected).any(axis=1).sum())
        done += B
        drafts += nd
    return Certificate(name, done, drafts, bad, certified_bound(bad, done), pb.target.V / GRID,
                       pb.target.V, pb.K, time.process_time() - t0)  # fmt: skip


# --- the page's problem and its measured rows ---------------------------------------------------------

TOY = "toy"  # the block paper's p = (1/3, 2/3), q = (2/3, 1/3), K = 2
PQ = "pq"  # a typed p and q, the same at every position


class Shown(NamedTuple):
    """The p, q and K a problem of the Verifiers page judges, as its greyed-out inputs show them."""

    p: str
    q: str
    K: int


def shown_problem(source: str) -> Shown:
    """What the Verifiers page's p, q and K boxes show for a problem other than a typed pair: its own numbers."""
    if source == TOY:
        return Shown(f"{court.TOY_P[0] * 3:g}/3, {court.TOY_P[1] * 3:g}/3", f"{court.TOY_Q[0] * 3:g}/3, "
                     f"{court.TOY_Q[1] * 3:g}/3", court.TOY_K)  # fmt: skip
    if source == PQ:
        raise InputError("source", "a problem other than the typed pair (its boxes show what was typed)", source)
    pb = court.problem(source)
    return Shown("the scenario's target chain (a row per context)", "the scenario's drafter (a row per context)", pb.K)


def page_problem(source: str, p: tuple[float, ...], q: tuple[float, ...], K: int) -> court.Problem:
    """The problem the Verifiers page judges: the toy pair, a typed p and q with K drafts, or a prove scenario."""
    if source == TOY:
        return court.toy_problem()
    if source == PQ:
        return court.pair_problem(p, q, K)
    return court.problem(source)


# The tokens test of a measured rule compares its simulation with the court's exact expectation for the same
# rule: it checks the simulation, lossy rule or not, and says nothing about losslessness (the badge does).
SIMULATION_TEST = "simulation = exact tokens?"
SIMULATION_SAYS = {"pass": "agrees", "fail": "differs", "inconclusive": "inconclusive"}


def measured_rows(judgements: list[court.Judgement], pb: court.Problem, n: int, seed: int) -> list[dict]:
    """Tokens per verification measured for each rule the court judged (``n`` sequences each) beside the exact value.

    Trees have no verify-signature run and refused rules no exact table: they are left out. A
    point speaks only with the power every verdict needs (:func:`specviz.app.results.tokens_point`).
    """
    out = []
    for j in judgements:
        if j.rule not in court.RULES or j.refused:
            continue
        m = court.measure(j, j.rule, pb, n=n, seed=seed)
        t = results.tokens_point(m.tokens_per_round, m.se, m.rounds, m.exact)
        # z as text: without power the test gives no z ("–"), where a number column would print "None".
        z = f"{m.z:+.2f}" if t.conclusive and np.isfinite(m.z) else "–"
        out.append({"rule": j.rule, "measured tokens per verification (±1 SE)": results.point_text(t),
                    "exact, over the rounds run": m.exact, "z": z,
                    SIMULATION_TEST: SIMULATION_SAYS[results.tokens_says(t)],
                    "detectable shift": t.detectable})  # fmt: skip
    return out
