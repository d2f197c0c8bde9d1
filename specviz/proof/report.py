"""The suite's results and their report: what ``prove`` prints, ``prove --json`` writes and the app shows.

# V vocabulary, L tokens judged, C = V**L cells

One module holds every result type of the proof suite (:class:`CaseResult`, :class:`SuiteResult`,
:class:`ExactCase`), the explanation of a failing case (:func:`explain`: the cells that weigh
most in chi-square; :class:`NearestBug`: the known mistakes nearest to what was observed), the
JSON record of a case (:func:`case_record`, the same for ``prove --json`` and the Bug lab's
download), the table's rows and closing lines, and the exact TVs ``specviz list`` prints. The
CLI and the app both read these, so the two never drift apart.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from . import stats
from .controls import kind_controls
from .engine_bugs import FAULTS
from .exact import verifier_law
from .families import MARGIN, Diagnosis, diagnose
from .markov import Drafter
from .registry import as_verify_signature
from .scenarios import HOME, SCENARIOS, cell_tokens, scenario_chains
from .stats import ChiSquare, MeanTest
from .theory import total_variation

TOP_CELLS = 5  # cells listed in the explanation of a failure

class ExactCase(NamedTuple):
    """The exact court's finding for one verifier on one small problem."""

    problem: str  # a scenario name, or "tree <parents> <drafter mode> L=<L> on <scenario>"
    verifier: str
    is_bug: bool
    tv: float  # total variation of its law from the target's (NaN when refused)
    tokens: float  # exact expected tokens of the first verification
    lossless: bool
    refused: str = ""  # why the court gave no law

    @property
    def verdict(self) -> str:
        if self.refused:
            return "refused"
        if self.is_bug:
            return "caught" if not self.lossless else "missed"
        return "pass" if self.lossless else "FAIL"


class Cell(NamedTuple):
    """One cell of the joint law: the L tokens, its counts and its share of chi-square."""

    tokens: str  # e.g. "0 2 1"
    observed: int
    expected: float  # N * law
    contribution: float  # (observed - expected)^2 / expected; inf for an impossible cell


class NearestBug(NamedTuple):
    bug: str
    tv: float  # TV(observed frequencies, the bug's law)
    source: str  # "exact" (specviz.proof.exact.verifier_law) or "sampled, N = ..."


class Explanation(NamedTuple):
    """Why a case failed, in the terms a reader can check."""

    scenario: str
    covers: str  # which emitted tokens the scenario judges
    cells: list[Cell]  # the largest contributions to chi-square, impossible cells first
    tv_to_target: float  # TV(observed frequencies, the target's law)
    nearest: list[NearestBug]  # known bugs by TV to the observed law, nearest first
    nearest_note: str  # where the bugs' laws came from, or why there are none
    families: Diagnosis | None = None  # the families of known mistakes fitted to it (specviz.proof.families)
    families_note: str = ""  # why there is no fit here (e.g. fitted on another failing case)
    by_position: str = ""  # where the law breaks: each position's marginal test, in words

    def lines(self) -> list[str]:
        out = [f"scenario {self.scenario}: judges {self.covers}"]
        if self.cells:
            out.append("cells contributing most to chi-square (tokens: observed vs expected):")
            for c in self.cells:
                contrib = "impossible under the target" if math.isinf(c.contribution) else f"+{c.contribution:.1f}"
                out.append(f'  "{c.tokens}": {c.observed:,} vs {c.expected:,.1f}  ({contrib})')
        out.append(f"TV(observed, target) = {self.tv_to_target:.4f}")
        if self.by_position:
            out.append(self.by_position)
        # A catalogue entry is offered as the explanation only when it fits (nearer than MARGIN times the
        # target's distance); otherwise it is named as not fitting, never as the nearest explanation.
        fitting = [b for b in self.nearest if b.tv < MARGIN * self.tv_to_target]
        if fitting:
            near = ", ".join(f"{b.bug} {b.tv:.4f} ({b.source})" for b in fitting[:3])
            out.append(f"nearest known bugs by TV to the observed law: {near}")
        elif self.nearest:
            b = self.nearest[0]
            out.append(f"no catalogue bug fits: the nearest, {b.bug}, is at TV {b.tv:.4f}, not below {MARGIN} x "
                       f"the target's {self.tv_to_target:.4f}")  # fmt: skip
        if self.families is not None:
            out += self.families.lines()
        elif self.families_note:
            out.append(self.families_note)
        if self.nearest_note:
            out.append(self.nearest_note)
        return out


class CaseResult(NamedTuple):
    scenario: str
    verifier: str
    is_bug: bool
    joint: ChiSquare
    first_token: ChiSquare
    positions: list[ChiSquare]
    tokens: MeanTest  # tokens per verification against the exact expectation
    passed: bool  # joint and tokens tests both pass, whatever their power (see verdict)
    seconds: float
    observed: np.ndarray  # (C,) joint counts in base-V order
    law: np.ndarray  # (V,) * L exact target law
    n: int = 0  # sequences
    needed_n: int | None = None  # N at which every test of the case would be conclusive
    error: str | None = None  # the verifier raised: the message
    traceback: str | None = None  # ... and its traceback, from the verifier's own frames
    explanation: Explanation | None = None  # set when a test fails
    rule: str | None = "residual"  # the rule tokens per step are judged by; None: efficiency, not a verdict

    @property
    def conclusive(self) -> bool:
        return self.joint.conclusive and (self.tokens.conclusive or self.rule is None)

    @property
    def tokens_failed(self) -> bool:
        """Tokens per step conclusively off the rule's exact value (never without a rule)."""
        return self.rule is not None and not self.tokens.passed and self.tokens.conclusive

    @property
    def failed(self) -> bool:
        """A conclusive test failed (an impossible sample is conclusive)."""
        return (not self.joint.passed and self.joint.conclusive) or self.tokens_failed

    @property
    def verdict(self) -> str:
        """One of pass, FAIL, inconclusive (the verifier under test); caught, missed,
        inconclusive (a bug); ERROR (the verifier raised)."""
        if self.error:
            return "ERROR"
        if self.failed:
            return "caught" if self.is_bug else "FAIL"
        if not self.conclusive:
            return "inconclusive"
        return "missed" if self.is_bug else "pass"


class SuiteResult(NamedTuple):
    results: list[CaseResult]
    ok: bool  # the verifier passed every case and every bug run was caught somewhere
    failures: list[str]  # why not ok, one line each (empty when merely inconclusive)
    controls: list[str]  # the bugs run as negative controls (empty: none ran)
    inconclusive: list[str]  # cases whose tests lack the power to speak, one line each
    needed_n: int | None  # N at which every case would be conclusive, when some is not
    exact: tuple[ExactCase, ...] = ()  # the exact court's rows (kinds block and tree)
    kind: str = "chain"

    @property
    def verdict(self) -> str:
        """One of ok, FAIL (something failed, raised or a bug was missed) or inconclusive."""
        return "FAIL" if self.failures else "inconclusive" if self.inconclusive else "ok"


def top_cells(observed: np.ndarray, law: np.ndarray, k: int = TOP_CELLS) -> list[Cell]:
    """The k largest terms of the chi-square statistic, cells the target cannot produce first.

    Cells tested on their own (expected count >= ``stats.MIN_EXPECTED``) are listed by their
    tokens; the cells the test pools (expected below that) count as one, "pooled (m cells)",
    as they do in the statistic.
    """
    law = np.asarray(law)
    V, L = law.shape[0], law.ndim
    obs = np.asarray(observed, dtype=np.float64).ravel()
    p0 = law.ravel()
    exp = obs.sum() * p0
    out = [Cell(cell_tokens(int(i), V, L), int(obs[i]), 0.0, math.inf) for i in np.flatnonzero((p0 == 0) & (obs > 0))]
    alone = np.flatnonzero(exp >= stats.MIN_EXPECTED)
    terms = [(float((obs[i] - exp[i]) ** 2 / exp[i]), cell_tokens(int(i), V, L), obs[i], exp[i]) for i in alone]
    small = (p0 > 0) & (exp < stats.MIN_EXPECTED)
    if small.any():
        o, e = obs[small].sum(), exp[small].sum()
        terms.append((float((o - e) ** 2 / e), f"pooled ({int(small.sum())} cells)", o, e))
    terms.sort(key=lambda t: -t[0])
    out += [Cell(name, int(o), float(e), c) for c, name, o, e in terms if c > 0]
    return out[:k]


def explain(res: CaseResult, nearest: list[NearestBug] | None = None, note: str = "",
            families: Diagnosis | None = None, families_note: str = "") -> Explanation:  # fmt: skip
    """Which cells and tokens-per-step figures make ``res`` fail; ``nearest`` bugs if known; the
    ``families`` of known mistakes fitted to it (:func:`diagnose_case`)."""
    sc = SCENARIOS[res.scenario]
    obs = np.asarray(res.observed, dtype=np.float64)
    tv = total_variation(obs / max(obs.sum(), 1), res.law.ravel())
    return Explanation(sc.name, sc.covers, top_cells(obs, res.law), tv, nearest or [], note, families,
                       families_note, by_position(res))  # fmt: skip


def by_position(res: CaseResult) -> str:
    """Each position's marginal token law in words: "1 pass, 2 FAIL (TV 0.031), 3 inconclusive"."""
    if not res.positions:
        return ""
    words = []
    for t, c in enumerate(res.positions, start=1):
        if not c.passed and c.conclusive:
            words.append(f"{t} FAIL (TV {c.tv:.3f})")
        else:
            words.append(f"{t} {'pass' if c.conclusive else 'inconclusive'}")
    return "token law by position (each marginal alone): " + ", ".join(words)


def diagnose_case(res: CaseResult, *, seed: int = 0) -> Diagnosis | None:
    """The families of known mistakes (:mod:`specviz.proof.families`) fitted to a failing chain case,
    or None where its law says nothing (an ERROR, or only tokens per step failed)."""
    if res.error or res.joint.passed:
        return None
    return diagnose(res.scenario, res.observed, res.law, seed=seed)


@functools.lru_cache(maxsize=128)
def exact_bug_law(scenario: str, bug: str, kind: str = "chain") -> np.ndarray | None:
    """The exact law (C,) of ``bug`` in a scenario by :func:`specviz.proof.exact.verifier_law`, or
    None where it refuses (too large, a ragged scenario it does not model, ...)."""
    sc, b = SCENARIOS[scenario], kind_controls(kind)[bug]
    fn = as_verify_signature(b.verifier, kind)
    target, dchain = scenario_chains(sc)
    # Ragged rounds draw each row's count uniformly from 0..K: verifier_law takes that as a sequence.
    num_draft: Any = range(sc.K + 1) if sc.ragged else sc.K
    try:
        res = verifier_law(fn, target, Drafter(dchain, b.drafter_mode or sc.drafter_mode), L=sc.L,
                           num_draft=num_draft, K=sc.K)  # fmt: skip
        law = np.asarray(getattr(res, "law", res), dtype=np.float64).ravel()
        unresolved = float(getattr(res, "unresolved", 0.0))
    except Exception:  # refused or failed: the caller falls back to a sampled law
        return None
    if law.size != sc.V**sc.L or not np.isfinite(law).all() or abs(law.sum() - 1) > 1e-9 or unresolved > 1e-9:
        return None
    return law


def clean(x: Any) -> Any:
    """JSON-ready: NumPy scalars and arrays to Python, non-finite floats to None, recursively."""
    if isinstance(x, Mapping):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_asdict"):
        return clean(x._asdict())
    if isinstance(x, list | tuple):
        return [clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return clean(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def case_record(r: CaseResult) -> dict[str, Any]:
    """Every field of a case as plain JSON-ready data: what ``prove --json`` prints and what an
    app page offers for download. Cells are keyed by their tokens ("0 2 1")."""

    def chi(c: Any) -> dict[str, Any]:
        return {**{k: clean(v) for k, v in c._asdict().items()}, "conclusive": c.conclusive}

    sc = SCENARIOS[r.scenario]
    V, L = sc.V, sc.L
    names = [cell_tokens(i, V, L) for i in range(V**L)]
    n_obs = float(np.sum(r.observed))
    ex = r.explanation
    return {
        "scenario": r.scenario,
        "covers": sc.covers,
        "verifier": r.verifier,
        "is_bug": r.is_bug,
        "verdict": r.verdict,
        "n": r.n,
        "needed_n": r.needed_n,
        "V": V, "L": L, "K": sc.K, "ragged": sc.ragged,
        "tokens_test": None if r.error else {**{k: clean(v) for k, v in r.tokens._asdict().items()},
                                             "needed_rounds": r.tokens.needed_rounds},
        "joint": chi(r.joint),
        "first_token": chi(r.first_token),
        "positions": [chi(p) for p in r.positions],
        "tokens_per_step": {"measured": clean(r.tokens.measured), "theory": clean(r.tokens.expected),
                            "se": clean(r.tokens.se), "z": clean(r.tokens.z), "passed": r.tokens.passed},
        "counts": [int(v) for v in r.observed],  # (C,) in base-V order, as "cells"
        "law": [float(v) for v in r.law.ravel()],
        "cells": [{"sequence": c, "observed": int(o), "exact_probability": float(p), "expected_count": n_obs * float(p)}
                  for c, o, p in zip(names, r.observed, r.law.ravel(), strict=True)],
        "explanation": None if ex is None else {
            "scenario": ex.scenario, "covers": ex.covers, "tv_to_target": clean(ex.tv_to_target),
            "cells": [{k: clean(v) for k, v in c._asdict().items()} for c in ex.cells],
            "nearest_bugs": [{k: clean(v) for k, v in b._asdict().items()} for b in ex.nearest],
            "note": ex.nearest_note,
            "families": None if ex.families is None else {
                "fitted": ex.families.fitted, "margin": MARGIN, "noise_tv": clean(ex.families.noise),
                "fits": [{**{k: clean(v) for k, v in f._asdict().items()}, "member": f.member()}
                         for f in ex.families.fits],
                "refused": ex.families.refused},
            "families_note": ex.families_note,
            "by_position": ex.by_position,
        },
        "seconds": round(r.seconds, 3),
        "error": r.error,
        "traceback": r.traceback,
    }  # fmt: skip




# --- exact TVs, as ``specviz list`` prints them -----------------------------------------------------


def home_tvs(bug: str) -> str:
    """TV between the exact joint law of ``bug`` (:func:`exact_bug_law`) and the target's, in each
    of its home scenarios, in words."""
    out = []
    for h in HOME.get(bug, ("reference",)):
        sc = SCENARIOS[h]
        law = exact_bug_law(h, bug)
        if law is None:
            out.append(f"{h}: exact law unavailable")
            continue
        target = scenario_chains(sc)[0].joint_law(sc.L).ravel()
        out.append(f"{h}: {total_variation(law, target):.4f} (joint law of L = {sc.L} tokens)")
    return "; ".join(out)


def fault_tv(name: str) -> str:
    """The exact TV of a :data:`specviz.proof.engine_bugs.FAULTS` entry from the target's law, in words."""
    if name == "inclusive_coin":  # enumerated like a bug, with continuous uniforms, in prove's reference scenario
        sc = SCENARIOS["reference"]
        target, draft = scenario_chains(sc)
        fn = FAULTS[name].verifier
        assert fn is not None  # inclusive_coin is a faulty function (other faults may have none)
        law = verifier_law(fn, target, Drafter(draft), L=sc.L, num_draft=sc.K, K=sc.K).law
        tv = total_variation(law.ravel(), target.joint_law(sc.L).ravel())
        return (
            f"reference: {tv:.4f} (joint law of L = {sc.L} tokens, continuous uniforms; a coin of exactly 0 shows it)"
        )
    if name == "seed_of_first_request":
        return "0 for each row alone (the fault is the dependence between rows of one batch)"
    if name == "nan_row":
        return "none (robustness: a NaN row has no distribution)"
    raise InputError("name", "one of " + ", ".join(FAULTS), repr(name))


# --- the table ``prove`` prints ------------------------------------------------------------------


def num(x: float | None, fmt: str) -> str:
    """``x`` formatted, or "-" for None and NaN."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


# Width of each column, the whole row within 100 characters: the verdict is last and unpadded
# ("inconclusive", 12). The chi-square's statistic, dof and critical value are in the JSON record.
COLUMNS = [
    ("scenario", 19), ("verifier", 22), ("p-value", 7), ("TV", 6), ("detect", 6), ("tokens", 6), ("exact", 5),
    ("1st-tok", 8), ("verdict", 0),
]  # fmt: skip
NAME_WIDTH = 22  # the verifier column


def short_name(name: str, width: int = NAME_WIDTH) -> str:
    """``name`` within ``width`` characters: a longer one ("tests.user_verifiers:bonus_from_q")
    keeps its end, the function, behind "..." (the output names it in full above the table)."""
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def _row(cells: list[str]) -> str:
    # The first two columns (names) to the left, the numbers to the right, the verdict last as it is.
    out = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, (_, w)) in enumerate(zip(cells, COLUMNS, strict=True))]
    return " ".join(out[:-1] + [cells[-1]])


def format_row(r: CaseResult) -> str:
    """One case as a row of :data:`COLUMNS`."""
    j = r.joint
    cells = [
        r.scenario, short_name(r.verifier), num(j.p_value, ".2g"), num(j.tv, ".4f"), num(j.detectable_tv, ".4f"),
        num(r.tokens.measured, ".3f"), num(r.tokens.expected, ".3f"), first_token(r), r.verdict,
    ]  # fmt: skip
    return _row(cells)


def first_token(r: CaseResult) -> str:
    """The first-token test's outcome, by the same power rule as the verdicts."""
    if r.error:
        return "-"
    if not r.first_token.conclusive:
        return "inconcl."
    return "pass" if r.first_token.passed else "fail"


def header() -> str:
    """The column names over a rule as wide as the widest row."""
    top = _row([n for n, _ in COLUMNS])
    return top + "\n" + "-" * (len(top) - len(COLUMNS[-1][0]) + len("inconclusive"))


def controls_line(suite: SuiteResult) -> str:
    """What the negative controls showed, or plainly that none ran."""
    if not suite.controls:
        return ("Negative controls: NOT RUN (--bugs none). Nothing in this output shows that these tests "
                "can fail on these scenarios.")  # fmt: skip
    verdicts = {b: [r.verdict for r in suite.results if r.is_bug and r.verifier == b] for b in suite.controls}
    caught = [b for b, v in verdicts.items() if "caught" in v]
    line = f"Negative controls: {len(caught)} of {len(suite.controls)} bugs run on these scenarios were caught"
    for word in ("inconclusive", "ERROR", "missed"):
        these = [b for b, v in verdicts.items() if b not in caught and word in v]
        if these:
            line += f"; {word}: " + ", ".join(these)
    left = [b for b in kind_controls(suite.kind) if b not in suite.controls]
    if left:
        line += "; not run: " + ", ".join(left) + " (each shows only in scenarios not chosen: see specviz list)"
    return line + "."


def summary_line(suite: SuiteResult) -> str:
    """The verdict in one line (several when something failed or was inconclusive)."""
    if suite.failures:
        return "NOT OK:\n  " + "\n  ".join(suite.failures)
    if suite.inconclusive:
        return f"inconclusive: N too small, need N >= {suite.needed_n:,}\n  " + "\n  ".join(suite.inconclusive)
    if suite.controls:
        return (f"OK: the verifier passed every case, and each of the {len(suite.controls)} bugs run as "
                "negative controls was caught.")  # fmt: skip
    return "OK: the verifier passed every case (no negative control ran)."


def exact_table(suite: SuiteResult) -> str:
    """The exact court's rows: TV of each law from the target's, exact tokens, verdict."""
    lines = [f"Exact court ({suite.kind}): TV from the target's law by enumeration (lossless iff TV <= 1e-12); "
             "tokens: exact expected tokens of the first verification.",
             f"{'problem':34s} {'verifier':{NAME_WIDTH}s} {'TV':>10s} {'tokens':>7s} verdict"]  # fmt: skip
    for e in suite.exact:
        lines.append(f"{e.problem:34s} {short_name(e.verifier):{NAME_WIDTH}s} {num(e.tv, '10.3g')} "
                     f"{num(e.tokens, '7.3f')} {e.verdict}" + (f" ({e.refused})" if e.refused else ""))  # fmt: skip
    return "\n".join(lines)


def exact_record(e: ExactCase) -> dict[str, Any]:
    """One row of the exact court as JSON-ready data."""
    tv = e.tv if math.isfinite(e.tv) else None
    tokens = e.tokens if math.isfinite(e.tokens) else None
    return {"problem": e.problem, "verifier": e.verifier, "is_bug": e.is_bug, "tv": tv, "tokens": tokens,
            "verdict": e.verdict, "refused": e.refused}  # fmt: skip
