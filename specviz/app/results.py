"""What the app says and lets people keep of a result: verdicts with their power, CSV and JSON records.

# C cells of a joint law (V**L), M values of K, R rows kept of a batch

A verdict is worth only the test behind it. :func:`case_verdict` reads a Bug-lab case
(:class:`specviz.proof.prove.CaseResult`). A rejection at the stated level alpha is a fail
(FAIL, or "caught" for a bug) whatever the power: low power voids a pass, never a rejection.
A pass (or "missed") needs the power to see a shift (:attr:`specviz.proof.stats.ChiSquare.conclusive`,
:attr:`specviz.proof.stats.MeanTest.conclusive`); a non-rejection without it is "inconclusive",
with the N it would need. Every verdict says how large a shift the tests could have seen.

Where the joint test lacks power, N is small and the chi-square approximation of the pooled
statistic's tail is doubtful, so :func:`joint_p_value` takes that statistic's p-value by Monte
Carlo under the exact law (known): :data:`MC_DRAWS` multinomial samples of N from it, and
p = (1 + #{simulated >= observed}) / (1 + draws), which is a valid p-value (P(p <= alpha) <= alpha
under the law). A fail therefore always means a rejection at level alpha.

The ``*_record`` functions turn a result into plain dicts and lists (JSON-ready: non-finite
floats become ``None``), the ``*_csv`` functions into CSV text; pages hand them to a
download button. A Bug-lab record carries the same fields as ``specviz prove --json``.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as sps

from ..errors import InputError
from ..proof import stats
from ..proof.report import clean

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
    joint_p: JointP | None = None  # the joint test's p-value behind the verdict (None on error)

    @property
    def line(self) -> str:
        return f"{self.head}. {self.seen}"


def joint_says(test: stats.ChiSquare, jp: JointP | None = None) -> str:
    """What one chi-square test says: "fail", "pass" or "inconclusive".

    With ``jp`` (:func:`joint_p_value` of the case), a rejection at level alpha is "fail" whatever the
    power. Otherwise the test speaks only when it is conclusive
    (:attr:`specviz.proof.stats.ChiSquare.conclusive`: the power to see a shift of
    :data:`specviz.proof.stats.MIN_TV`, or a sample the target cannot produce): without power the
    chi-square approximation of its tail is not trusted either way.
    """
    if jp is not None and jp.rejects:
        return "fail"
    if not test.conclusive:
        return "inconclusive"
    return "pass" if test.passed else "fail"


def tokens_says(test: stats.MeanTest) -> str:
    """The same for the tokens-per-step z-test: "fail" when it rejects with at least
    :data:`specviz.proof.stats.MIN_ROUNDS` rounds (whatever its power), "pass" only with power
    (:attr:`specviz.proof.stats.MeanTest.conclusive`)."""
    if tokens_rejects(test):
        return "fail"
    if not test.conclusive:
        return "inconclusive"
    return "pass" if test.passed else "fail"


# How a page shows each verdict: (Streamlit alert, icon). The colour is what the test said.
VERDICT_BOXES = {
    "pass": ("success", ":material/check_circle:"),
    "FAIL": ("error", ":material/cancel:"),
    "caught": ("error", ":material/bug_report:"),  # the test failed, as it should on a bug: red, not green
    "missed": ("warning", ":material/visibility_off:"),
    "inconclusive": ("warning", ":material/help:"),
    "ERROR": ("error", ":material/error:"),
}
P_HELP = {
    "chi-square": "from the chi-square distribution of the pooled statistic (the test has the power to speak here)",
    "Monte Carlo": "by Monte Carlo under the exact law: {draws:,} samples of the same N, pooled alike; at small N the "
    "chi-square approximation of the tail is doubtful, this p-value is not",
    "impossible sample": "a sequence the target gives probability 0: a certain fail",
}
MC_DRAWS = 9_999  # Monte Carlo p-values resolve 1e-4, ten times finer than the default alpha = 0.001


class JointP(NamedTuple):
    """The joint test's p-value as the verdict uses it."""

    p_value: float  # 0 only for a sample the target cannot produce
    method: str  # "chi-square" (the approximation, at the power to speak), "Monte Carlo" or "impossible sample"
    draws: int  # Monte Carlo samples behind it (0 otherwise)
    critical_value: float  # of the statistic at level alpha, by the same method
    log10_p: float  # log10 of the p-value, finite where the float underflows (chi-square tails)
    rejects: bool  # p-value <= alpha


def _pooling(law: np.ndarray, n: int) -> np.ndarray:
    """(G, C) 0/1 matrix taking counts of the C positive cells to the G cells :func:`stats.chi_square` pools.

    The same rule as ``stats._pool``: cells expected below MIN_EXPECTED go into one cell, and that one
    into the smallest other cell if it is still too small (tests/test_results.py checks the two agree).
    """
    exp = n * law  # (C,)
    small = exp < stats.MIN_EXPECTED
    group = np.empty(law.size, dtype=np.int64)
    big = np.flatnonzero(~small)
    group[big] = np.arange(big.size)
    groups = big.size
    if small.any():
        group[small] = groups
        groups += 1
        if exp[small].sum() < stats.MIN_EXPECTED and big.size:  # still too small: into the smallest other cell
            group[small] = int(np.argmin(exp[big]))
            groups -= 1
    out = np.zeros((groups, law.size))
    out[group, np.arange(law.size)] = 1.0
    return out  # (G, C)


@functools.lru_cache(maxsize=256)
def _mc_null(law_bytes: bytes, n: int, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    law = np.frombuffer(law_bytes, dtype=np.float64)  # (C,) positive cells only
    pool = _pooling(law, n)  # (G, C)
    e = pool @ (n * law)  # (G,)
    sims = np.random.default_rng([seed, n]).multinomial(n, law, size=draws) @ pool.T  # (draws, G)
    stat = ((sims - e) ** 2 / e).sum(axis=1)  # (draws,)
    return np.sort(stat), pool, e


def mc_p_value(observed: np.ndarray, law: np.ndarray, *, draws: int = MC_DRAWS, seed: int = 0,
               alpha: float = stats.ALPHA) -> tuple[float, float, float]:  # fmt: skip
    """(p-value, statistic, critical value) of the pooled Pearson statistic of ``observed`` (C,) counts,
    by Monte Carlo under ``law`` (C,): ``draws`` multinomial samples of the same N, pooled alike.

    p = (1 + #{simulated >= observed}) / (1 + draws); the critical value is the simulated
    (1 - alpha) quantile. Cells of probability 0 are left out (one sample there is a certain fail,
    which :func:`joint_p_value` reports before calling this).
    """
    obs = np.asarray(observed, dtype=np.float64).ravel()
    p0 = np.asarray(law, dtype=np.float64).ravel()
    if obs.shape != p0.shape:
        raise InputError("observed", f"as many cells as law ({p0.size})", f"{obs.size}")
    if int(draws) < 1:
        raise InputError("draws", "at least 1 Monte Carlo sample", str(draws))
    n = int(round(obs.sum()))
    keep = p0 > 0
    null, pool, e = _mc_null(np.ascontiguousarray(p0[keep] / p0[keep].sum()).tobytes(), n, int(draws), int(seed))
    o = pool @ obs[keep]  # (G,)
    stat = float(((o - e) ** 2 / e).sum())
    tol = 1e-9 * max(stat, 1.0)  # the same statistic recomputed: equal values tie
    k = null.size - int(np.searchsorted(null, stat - tol, side="left"))  # simulated >= observed
    crit = float(np.quantile(null, 1 - alpha)) if null.size else math.inf
    return (1 + k) / (1 + null.size), stat, crit


def joint_p_value(res: Any, seed: int = 0, draws: int = MC_DRAWS) -> JointP:
    """The joint test's p-value for the verdict: chi-square where the test has the power to speak,
    Monte Carlo under the exact law where it does not (small N), 0 for an impossible sample."""
    j = res.joint
    if j.impossible:
        return JointP(0.0, "impossible sample", 0, j.critical_value, -math.inf, True)
    if j.conclusive or j.dof == 0:  # at dof 0 every cell is pooled into one: nothing to test
        log10_p = chi2_log10_sf(j.statistic, j.dof) if j.dof else 0.0
        return JointP(j.p_value, "chi-square", 0, j.critical_value, log10_p, bool(j.p_value <= j.alpha))
    p, _, crit = mc_p_value(res.observed, res.law, draws=draws, seed=seed, alpha=j.alpha)
    return JointP(p, "Monte Carlo", int(draws), crit, math.log10(p), bool(p <= j.alpha))


def chi2_log10_sf(x: float, dof: int) -> float:
    """log10 P(chi-square(dof) > x), finite far past the point where the p-value underflows to 0.

    SciPy's logsf underflows too there, so in the far tail (x/2 > dof/2 + 1, where the p-value is
    below 1e-300) the upper incomplete gamma Q(a, z), a = dof/2, z = x/2, comes from Legendre's
    continued fraction Gamma(a, z) = e^-z z^a / (z + 1 - a - 1(1 - a) / (z + 3 - a - 2(2 - a) / ...)),
    evaluated by the modified Lentz method (Numerical Recipes, gcf).
    """
    p = float(sps.chi2.sf(x, dof))
    a, z = dof / 2, x / 2
    if p > 0 or not math.isfinite(x) or z <= a + 1:
        return math.log10(p) if p > 0 else -math.inf
    tiny = 1e-300
    b = z + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return (-z + a * math.log(z) - math.lgamma(a) + math.log(h)) / math.log(10)


def p_text(jp: JointP) -> str:
    """A p-value as a page prints it: never a bare "0" unless the sample is impossible."""
    if jp.method == "impossible sample":
        return "0 (impossible sample)"
    if jp.method == "Monte Carlo" and jp.p_value <= 1 / (1 + jp.draws):
        return f"≤ {jp.p_value:.1g}"  # no simulated statistic reached the observed one
    if jp.p_value > 0:
        return f"{jp.p_value:.3g}"
    if not math.isfinite(jp.log10_p):
        return "< 1e-300"
    exp = math.floor(jp.log10_p)
    return f"{10 ** (jp.log10_p - exp):.2f}e{exp}"  # below float's range: from log sf


def tokens_rejects(t: stats.MeanTest) -> bool:
    """The tokens-per-step z-test rejects at its level, with enough rounds for its standard error to mean something."""
    return t.rounds >= stats.MIN_ROUNDS and not t.passed


def case_verdict(res: Any, subject: str = "the verifier", seed: int = 0) -> Verdict:
    """The verdict a page shows for one case, with the power behind it.

    ``res`` is a :class:`specviz.proof.prove.CaseResult`; ``subject`` names what ran (a bug name, or
    "the correct verifier"); ``seed`` seeds the Monte Carlo p-value where one is needed. A
    rejection at level alpha fails (FAIL, or caught for a bug) whatever the power; a pass needs
    power; a non-rejection without power is inconclusive.
    """
    j = res.joint
    if res.error:
        return Verdict("ERROR", False, math.inf, j.power, None, None, f"ERROR: {subject} raised: {res.error}", "")
    tokens = res.tokens  # prove's tokens-per-step test, with its own power
    jp = joint_p_value(res, seed)
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
    rejected = jp.rejects or (tokens is not None and tokens_rejects(tokens))
    powered = j.conclusive and (tokens is None or tokens.conclusive)
    needed = None
    if rejected:
        word = "caught" if res.is_bug else "FAIL"
        shown = p_text(jp)
        which = [f"the joint test (p {'' if shown[0] in '≤<' else '= '}{shown}, {jp.method})"] if jp.rejects else []
        if tokens is not None and tokens_rejects(tokens):
            which.append(f"tokens per step (z = {tokens.z:+.2f})")
        why = f"{' and '.join(which)} rejected at level α = {j.alpha:g}"
        if j.impossible:
            why = "a sequence the target cannot produce: certain"
        if res.is_bug:
            head = f"caught: the test fails on {subject}, as it should — {why}"
        elif j.impossible:
            head = f"FAIL: {subject} produced {why}"
        else:
            head = f"FAIL: {subject} failed — {why}: a false alarm (rate {j.alpha:g}) or a real bug"
        if not powered:
            head += (
                f". The rejection stands at N = {j.n:,} although the test lacks full power there: low power voids "
                "a pass, not a rejection"
            )
    elif powered:
        word = "missed" if res.is_bug else "pass"
        head = f"missed: the test passes on {subject} here" if res.is_bug else f"pass: {subject} matched the target"
    else:
        word = "inconclusive"
        needed = res.needed_n
        # Below MIN_ROUNDS the tokens test's spread is not known yet, so its share of N is a floor.
        floor = tokens is not None and tokens.rounds < stats.MIN_ROUNDS
        head = (
            f"inconclusive: N = {j.n:,} is too small — need N ≥ {needed:,}{' at least' if floor else ''} to detect "
            f"a shift of TV {stats.MIN_TV:g} (or {stats.MIN_TOKENS:g} tokens per step) with {j.power:.0%} probability"
        )
    good = word == "pass" if not res.is_bug else word == "caught"
    return Verdict(word, good, float(j.detectable_tv), float(j.power), tokens, needed, head, seen, jp)


LOSSLESS_TV_TEXT = 1e-12  # the court's lossless tolerance: a smaller TV is rounding, printed as "< 1e-12"


def tv_text(tv: float) -> str:
    """A total-variation distance as a page prints it: "0", "< 1e-12" for rounding noise (not "6.59e-17"),
    "refused" for NaN (no law), else three significant digits."""
    tv = float(tv)
    if math.isnan(tv):
        return "refused"
    if tv == 0:
        return "0"
    if tv < LOSSLESS_TV_TEXT:
        return "< 1e-12"
    return f"{tv:.3g}"


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


class Download(NamedTuple):
    """One download button: its label, the file's text, name and type, its key on the page, its help."""

    label: str
    data: str
    file_name: str
    mime: str
    key: str
    help: str | None = None


# --- records ---------------------------------------------------------------------------------------


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
    from ..proof.report import case_record as prove_json  # the record prove --json prints: the two never drift

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
        row: dict[str, Any] = {"a": float(acceptance), "K": int(K), "theory_with_bonus": float(theory_with[i]),
               "theory_without_bonus": float(theory_without[i])}  # fmt: skip
        for tag, m in (("with_bonus", with_bonus), ("without_bonus", without_bonus)):
            row[f"measured_{tag}"] = None if m is None else float(m.mean[i])
            row[f"se_{tag}"] = None if m is None else float(m.se[i])
            row[f"rows_{tag}"] = None if m is None else int(m.n)
        rows.append(row)
    return rows


def plural(n: int, word: str) -> str:
    """``n`` with ``word``, plural unless n is 1: "1 round", "2 rounds" (thousands separated)."""
    return f"{int(n):,} {word}{'' if int(n) == 1 else 's'}"
