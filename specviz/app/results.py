"""What the app says and lets people keep of a result: verdicts with their power, CSV and JSON records.

# C cells of a joint law (V**L), M values of K, R rows kept of a batch

A verdict is worth only the test behind it. :func:`case_verdict` reads a Bug-lab case
(:class:`specviz.proof.prove.CaseResult`) and says pass / FAIL / caught / missed only when the test
had the power to say it (:attr:`specviz.proof.stats.ChiSquare.conclusive`,
:attr:`specviz.proof.stats.MeanTest.conclusive`), "inconclusive" with the N it would need
otherwise, and always how large a shift it could have seen.

The ``*_record`` functions turn a result into plain dicts and lists (JSON-ready: non-finite
floats become ``None``), the ``*_csv`` functions into CSV text; pages hand them to a
download button. A Bug-lab record carries the same fields as ``specviz prove --json``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as sps

from ..proof import stats

# --- verdicts --------------------------------------------------------------------------------------


class Verdict(NamedTuple):
    word: str  # "pass", "FAIL", "caught", "missed", "inconclusive" or "ERROR"
    good: bool  # the outcome a teacher hopes for: a correct verifier passes, a bug is caught
    detectable_tv: float  # the joint test catches any shift of the law at least this large (TV)
    power: float  # ... with this probability
    tokens: stats.MeanTest | None  # the tokens-per-step test with its own power; None on error
    needed_n: int | None  # sequences the case needs before it can speak (when inconclusive)
    head: str  # the verdict and why, e.g. "inconclusive: N = 1 is too small — need N ≥ 8,347 ..."
    seen: str  # what the tests could have seen: detectable TV and tokens-per-step shift

    @property
    def line(self) -> str:
        return f"{self.head}. {self.seen}"


def joint_says(test: stats.ChiSquare) -> str:
    """What one chi-square test says: "fail", "pass" or "inconclusive", by the rule of :mod:`specviz.proof.prove`.

    A test speaks only when it is conclusive (:attr:`specviz.proof.stats.ChiSquare.conclusive`: the
    power to see a shift of :data:`specviz.proof.stats.MIN_TV`, or a sample the target cannot produce).
    """
    if not test.conclusive:
        return "inconclusive"
    return "pass" if test.passed else "fail"


def tokens_says(test: stats.MeanTest) -> str:
    """The same for the tokens-per-step z-test (:attr:`specviz.proof.stats.MeanTest.conclusive`)."""
    if not test.conclusive:
        return "inconclusive"
    return "pass" if test.passed else "fail"


def case_verdict(res: Any, subject: str = "the verifier") -> Verdict:
    """The verdict a page shows for one case, with the power behind it.

    ``res`` is a :class:`specviz.proof.prove.CaseResult`; ``subject`` names what ran (a bug name, or
    "the correct verifier").
    """
    j = res.joint
    if res.error:
        return Verdict("ERROR", False, math.inf, j.power, None, None, f"ERROR: {subject} raised: {res.error}", "")
    tokens = res.tokens  # prove's tokens-per-step test, with its own power
    word = str(res.verdict)  # prove's verdict: pass, FAIL, caught, missed or inconclusive
    seen = (
        f"The joint test catches any shift of the law by TV ≥ {j.detectable_tv:.4f} with {j.power:.0%} probability"
        if math.isfinite(j.detectable_tv)
        else "The joint test cannot detect any shift at this N (no degrees of freedom)"
    )
    if tokens is not None:
        seen += (
            f"; the tokens-per-step test, a shift of {tokens.detectable:.4f} tokens per verification."
            if math.isfinite(tokens.detectable) and tokens.rounds >= stats.MIN_ROUNDS
            else f"; the tokens-per-step test needs at least {stats.MIN_ROUNDS} verifications."
        )
    needed = None
    if word == "inconclusive":
        needed = res.needed_n
        # Below MIN_ROUNDS the tokens test's spread is not known yet, so its share of N is a floor.
        floor = tokens is not None and tokens.rounds < stats.MIN_ROUNDS
        head = (
            f"inconclusive: N = {j.n:,} is too small — need N ≥ {needed:,}{' at least' if floor else ''} to detect "
            f"a shift of TV {stats.MIN_TV:g} (or {stats.MIN_TOKENS:g} tokens per step) with {j.power:.0%} probability"
        )
    else:
        head = {
            "pass": f"pass: {subject} matched the target",
            "FAIL": (
                f"FAIL: {subject} produced a sequence the target cannot produce: certain"
                if j.impossible
                else f"FAIL: {subject} failed — a false alarm (rate {j.alpha:g}) or a real bug"
            ),
            "caught": f"caught: the test fails on {subject}",
            "missed": f"missed: the test passes on {subject} here",
        }.get(word, word)
    good = word == "pass" if not res.is_bug else word == "caught"
    return Verdict(word, good, float(j.detectable_tv), float(j.power), tokens, needed, head, seen)


SUGGEST_MARGIN = 1.25  # needed_n is where power just reaches 99% for the spread seen so far; a new run varies


def suggested_n(needed: int) -> int:
    """An N to try after an inconclusive run: ``needed`` with a 25% margin, rounded up to two significant digits."""
    x = math.ceil(int(needed) * SUGGEST_MARGIN)
    step = 10 ** max(len(str(x)) - 2, 0)
    return -(-x // step) * step


def z_critical(alpha: float) -> float:
    """The two-sided critical value of a z-test at level ``alpha``."""
    return float(sps.norm.isf(alpha / 2))


def tokens_point(mean: float, se: float, rows: int, expected: float) -> stats.MeanTest:
    """The tokens-per-step rule for one measured point: a mean of ``rows`` verifications."""
    return stats.mean_test(float(mean), float(expected), float(se), int(rows))


def point_text(t: stats.MeanTest) -> str:
    """``"2.5321 ± 0.0038"`` when the point can speak, else why not and the rows it would need."""
    if t.conclusive:
        return f"{t.measured:.4f} ± {t.se:.4f}"
    return f"{t.measured:.4f} (inconclusive: {t.rounds:,} rows is too few — need ≥ {t.needed_rounds:,})"


# --- records ---------------------------------------------------------------------------------------


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


def to_json(record: Mapping[str, Any]) -> str:
    """Strict JSON text (no NaN or Infinity) of a record."""
    return json.dumps(clean(record), indent=2, allow_nan=False)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV text with a header row from the keys of the first row; empty cells for None and NaN."""
    if not rows:
        return ""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: "" if v is None else v for k, v in clean(dict(r)).items()})
    return out.getvalue()


def case_cells(res: Any, V: int, L: int) -> list[dict[str, Any]]:
    """One row per L-token sequence (C rows): observed count, exact probability, expected count."""
    obs = np.asarray(res.observed, dtype=np.float64).ravel()  # (C,)
    law = np.asarray(res.law, dtype=np.float64).ravel()  # (C,)
    n = float(obs.sum())
    idx = np.indices((V,) * L).reshape(L, -1).T  # (C, L) in base-V order, as stats.counts
    return [
        {"sequence": " ".join(str(t) for t in idx[c]), "observed": int(obs[c]), "exact_probability": float(law[c]),
         "expected_count": n * float(law[c])}
        for c in range(obs.size)
    ]  # fmt: skip


def case_record(res: Any, *, bug: str | None, n: int, seed: int, V: int, L: int) -> dict[str, Any]:
    """A Bug-lab run: the fields of ``specviz prove --json``, the verdict with its power, the counts and law."""
    from ..cli import to_json as prove_json  # the CLI's record, so the two never drift apart

    v = case_verdict(res, bug or "the correct verifier")
    record = prove_json(res)
    record.update(
        bug=bug,
        n=int(n),
        seed=int(seed),
        verdict=v.word,
        verdict_line=v.line,
        needed_n=v.needed_n,
        tokens_test=None if v.tokens is None else v.tokens._asdict(),
        cells=case_cells(res, V, L),
    )
    return clean(record)


def batch_rows(report: Any) -> list[dict[str, Any]]:
    """The batch rows the report keeps (R of them): draft count, accepted, tokens emitted, and the tokens."""
    head = report.head
    tokens = np.asarray(head.tokens)  # (R, K+1), -1 padding
    drafts = np.asarray(report.head_draft_tokens)  # (R, K)
    rows = []
    for b in range(tokens.shape[0]):
        rows.append({
            "row": b,
            "num_draft": int(report.num_draft[b]),
            "num_accepted": int(head.num_accepted[b]),
            "num_tokens": int(head.num_tokens[b]),
            "draft_tokens": " ".join(str(int(x)) for x in drafts[b, : int(report.num_draft[b])]),
            "emitted_tokens": " ".join(str(int(x)) for x in tokens[b, : int(head.num_tokens[b])]),
        })  # fmt: skip
    return rows


def batch_record(report: Any, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A Batch run: its settings, summary counts, timings (with threads) and the rows it kept."""
    return clean({
        "settings": dict(settings),
        "rows": int(len(report.num_draft)),
        "acceptance_rate": report.acceptance_rate,
        "mean_drafts_per_row": float(np.mean(report.num_draft)),
        "mean_tokens_per_row": float(np.mean(report.num_tokens)),
        "accepted_histogram": np.bincount(np.asarray(report.num_accepted, dtype=np.int64)).tolist(),
        "timings": [t._asdict() for t in report.timings],
        "generate_seconds": report.generate_seconds,
        "rows_kept": batch_rows(report),
    })  # fmt: skip


def tokens_rows(
    Ks: Sequence[int],
    acceptance: float,
    with_bonus: Any | None,
    without_bonus: Any | None,
    theory_with: Sequence[float],
    theory_without: Sequence[float],
) -> list[dict[str, Any]]:
    """The tokens-per-step points (M rows): theory and measurement (mean, SE, rows) with and without the bonus."""
    rows = []
    for i, K in enumerate(Ks):
        row = {"a": float(acceptance), "K": int(K), "theory_with_bonus": float(theory_with[i]),
               "theory_without_bonus": float(theory_without[i])}  # fmt: skip
        for tag, m in (("with_bonus", with_bonus), ("without_bonus", without_bonus)):
            row[f"measured_{tag}"] = None if m is None else float(m.mean[i])
            row[f"se_{tag}"] = None if m is None else float(m.se[i])
            row[f"rows_{tag}"] = None if m is None else int(m.n)
        rows.append(row)
    return rows
