"""Three verdicts, each on its own line: *law*, *support* and *policy*.

# V vocabulary, N sequences

A verifier can be wrong in three ways that an engineer fixes differently, so ``prove`` says each
apart (docs/proof.md, "Three verdicts"):

- **law**: the output distribution differs from the target's (the joint chi-square, the paired
  test and the sweep, the black-box output laws; the law probes, :mod:`specviz.proof.probes`).
  Tokens per step are part of it only when the run names a rule (``--rule``); otherwise they are
  efficiency, said beside the verdict (:func:`efficiency_line`). A failure exits 1.
- **support**: a token the target rules out (p = 0), or an id outside [0, V), can come out. It
  has probability zero under a continuous coin, so no sampled test sees it, but a coin drawn in
  float64 is exactly 0 once in 2^53 draws (float32: 2^-24; bfloat16: about 2^-9). Said with the
  coin, the token's probability, that rate and the one-line fix. A failure exits 1.
- **policy**: what the call does with invalid input (NaN, inf, negative entries, rows that do
  not sum to 1, ids out of range). The contract raises; a verifier that returns tokens gets a
  warning saying what it returned. Exit 0 unless ``strict`` (``prove --strict``).

:func:`summary` joins the three in one line:
``law OK (...) · support FAIL: coin 0.0 of the bonus draw emits token 0 with p = 0 (2^-53 per draw) ·
policy: no check for NaN, inf (warning)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .probes import Probe
from .report import SuiteResult

# What each policy probe checks, in the words of the policy line.
POLICY_WORDS = {"nan_row": "NaN", "nan_residual": "NaN", "inf_row": "inf", "negative_row": "negative entries",
                "unnormalized_row": "rows not summing to 1",
                "draft_id_out_of_range": "draft ids out of range", "inf_in_q": "inf in q"}  # fmt: skip


class Verdict(NamedTuple):
    kind: str  # "law" | "support" | "policy"
    status: str  # "OK" | "FAIL" | "ERROR" | "inconclusive" | "warning" | "not probed"
    headline: str  # what the summary line says after the status, short
    details: tuple[str, ...] = ()  # one line each, below the verdict's line

    @property
    def fails(self) -> bool:
        """Decides exit status 1."""
        return self.status in ("FAIL", "ERROR")

    def line(self) -> str:
        """``law OK: ...``, ``support FAIL: ...``, ``policy warning: ...``."""
        return f"{self.kind} {self.status}" + (f": {self.headline}" if self.headline else "")

    def lines(self) -> list[str]:
        return [self.line(), *("  " + d for d in self.details)]

    def short(self) -> str:
        """The verdict's part of the summary line."""
        if self.kind == "policy" and self.status == "warning":
            return f"policy: {self.headline} (warning)"
        if self.status in ("OK", "inconclusive", "not probed"):
            return f"{self.kind} {self.status}" + (f" ({self.headline})" if self.headline else "")
        return f"{self.kind} {self.status}: {self.headline}"


def _first(detail: str) -> str:
    """A probe's finding up to its first "; " (the probes put the headline first)."""
    return detail.split("; ")[0]


def law_verdict(suite: SuiteResult | None, probes: Sequence[Probe] = (), *, headline_ok: str = "") -> Verdict:
    """The law from the suite's cases (V = 4 sampling, the exact court) and the law probes."""
    failed = [p for p in probes if p.kind == "law" and p.failed]
    lines = list(suite.failures) if suite is not None else []
    lines += [f"probe {p.name}: {p.detail}" for p in failed]
    errors = [r for r in (suite.results if suite is not None else []) if not r.is_bug and r.verdict == "ERROR"]
    if errors:
        return Verdict("law", "ERROR", f"{errors[0].verifier} raised on {errors[0].scenario}: {errors[0].error}",
                       tuple(lines))  # fmt: skip
    if lines:
        return Verdict("law", "FAIL", lines[0], tuple(lines[1:]))
    if suite is not None and suite.inconclusive:
        return Verdict("law", "inconclusive", f"N too small, need N >= {suite.needed_n:,}", tuple(suite.inconclusive))
    if headline_ok:
        return Verdict("law", "OK", headline_ok)
    mine = [r for r in (suite.results if suite is not None else []) if not r.is_bug]
    detect = max((r.joint.detectable_tv for r in mine), default=float("nan"))
    controls = (f"each of the {len(suite.controls)} bugs run as negative controls was caught" if suite is not None
                and suite.controls else "no negative control ran (--bugs none)")  # fmt: skip
    cases = "1 case passes" if len(mine) == 1 else f"{len(mine)} cases pass"
    return Verdict("law", "OK", f"{cases}; detects TV >= {detect:.3g}",
                   (f"any shift of a joint law by TV >= {detect:.3g} is detected with probability 0.99; {controls}",))


def support_verdict(probes: Sequence[Probe], why_not: str = "") -> Verdict:
    """FAIL when a support probe saw a p = 0 token or an id outside [0, V) come out."""
    mine = [p for p in probes if p.kind == "support"]
    if not mine:
        return Verdict("support", "not probed", why_not or "no support probe ran")
    failed = [p for p in mine if p.failed]
    if failed:
        return Verdict("support", "FAIL", _first(failed[0].detail), tuple(f"{p.name}: {p.detail}" for p in failed))
    return Verdict("support", "OK", "no token with p = 0 or id outside [0, V) at coins 0, 2^-53, 1 - 2^-53")


def policy_verdict(probes: Sequence[Probe], *, strict: bool = False, why_not: str = "") -> Verdict:
    """A warning per invalid input the call accepted (FAIL with ``strict``)."""
    mine = [p for p in probes if p.kind == "policy"]
    if not mine:
        return Verdict("policy", "not probed", why_not or "no policy probe ran")
    warned = [p for p in mine if p.warned or p.failed]
    if not warned:
        return Verdict("policy", "OK", "raises on " + ", ".join(dict.fromkeys(POLICY_WORDS[p.name] for p in mine
                                                                             if p.name in POLICY_WORDS)))  # fmt: skip
    words = ", ".join(dict.fromkeys(POLICY_WORDS.get(p.name, p.name) for p in warned))
    returned = "tokens came back instead of an error in: " + ", ".join(p.name for p in warned)
    if strict:
        return Verdict("policy", "FAIL", f"no check for {words} (--strict)", (returned,))
    return Verdict("policy", "warning", f"no check for {words}", (returned + "; --strict makes these failures",))


def summary(verdicts: Sequence[Verdict]) -> str:
    """The three in one line, joined by " · "."""
    return " · ".join(v.short() for v in verdicts)


def exit_status(verdicts: Sequence[Verdict]) -> int:
    """1 when a verdict fails, 3 when the law is inconclusive and nothing fails, else 0."""
    if any(v.fails for v in verdicts):
        return 1
    return 3 if any(v.kind == "law" and v.status == "inconclusive" for v in verdicts) else 0


def efficiency_line(suite: SuiteResult) -> str:
    """Tokens per step against the residual rule's exact figure, where no rule was named: information."""
    mine = [r for r in suite.results if not r.is_bug and not r.error and r.rule is None]
    if not mine:
        return ""
    parts = [f"{r.scenario} {r.tokens.measured:.3f} vs {r.tokens.expected:.3f}" for r in mine]
    off = [r for r in mine if not r.tokens.passed and r.tokens.conclusive]
    head = ("efficiency (no --rule, so not a verdict): tokens per step, measured vs the residual rule's exact "
            "figure: " + ", ".join(parts))  # fmt: skip
    if off:
        head += (f". Off the residual rule's figure in {', '.join(r.scenario for r in off)}: where the law holds, "
                 "another rule's efficiency, not a wrong law (--rule residual|sample-match judges it)")  # fmt: skip
    return head


__all__ = ["Verdict", "efficiency_line", "exit_status", "law_verdict", "policy_verdict", "summary",
           "support_verdict"]  # fmt: skip
