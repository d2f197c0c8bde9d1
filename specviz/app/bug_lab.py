"""The Bug lab's lesson: where each bug starts, the visitor's prediction judged, what each test saw.

The page (app_pages/bug_lab.py) lays these sentences and tiles out; everything here is computed
from a :class:`specviz.proof.prove.CaseResult` and its :class:`specviz.app.results.Verdict`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import stats
from ..proof.scenarios import HOME
from . import limits, results
from .presenter import Metric
from .results import Download

NONE = "none (correct verifier)"  # the bug selector's first choice: the correct verifier
PREDICTIONS = ("the test will pass", "the test will fail")
PREDICT_WORDS = ("pass", "fail")  # ?predict=pass|fail: the prediction travels with the link


def home_scenario(bug: str) -> str:
    """The scenario where ``bug`` shows (the reference scenario for the correct verifier)."""
    return "reference" if bug == NONE else HOME.get(bug, ("reference",))[0]


def prediction_from_link(word: str) -> str | None:
    """The prediction a link's ``predict`` word stands for; None for "none"."""
    return PREDICTIONS[PREDICT_WORDS.index(word)] if word in PREDICT_WORDS else None


def link_word(prediction: str | None) -> str | None:
    """The ``predict`` word a link carries for ``prediction``; None when there is none."""
    return None if prediction is None else PREDICT_WORDS[PREDICTIONS.index(prediction)]


class Judged(NamedTuple):
    text: str
    judged: bool  # the prediction was compared with the outcome (False: inconclusive, or no prediction)


def judge_prediction(prediction: str | None, verdict_word: str, presenting: bool) -> Judged:
    """The sentence under the verdict about the visitor's prediction.

    An inconclusive verdict judges no prediction; a pass or a miss is "the test will pass".
    ``presenting``: presenter mode puts the inputs (and the explanation) below the results.
    """
    if prediction is not None and prediction not in PREDICTIONS:
        raise InputError("prediction", "one of " + ", ".join(PREDICTIONS), repr(prediction))
    if verdict_word == "inconclusive":
        return Judged("Your prediction is not judged: at this N the test could not tell either way.", False)
    if prediction is None:
        return Judged("You did not predict this time: next time decide first, then run.", False)
    passed = verdict_word in ("pass", "missed")
    outcome = PREDICTIONS[0] if passed else PREDICTIONS[1]
    where = "below" if presenting else "above"
    right_or_wrong = "You were right." if prediction == outcome else f"You were wrong: read the explanation {where}."
    return Judged(f"You predicted *{prediction}*; it {'passed' if passed else 'failed'}. {right_or_wrong}", True)


def tokens_caption(tok: stats.MeanTest, alpha: float) -> str:
    """What the tokens-per-step test says, and the rule that turns the two tests into a verdict."""
    says = results.tokens_says(tok)
    z = f" (|z| = {abs(tok.z):.2f} against {results.z_critical(alpha):.2f})" if says != "inconclusive" else ""
    return (
        f"The tokens-per-step test says {says}{z}. The verdict fails when a test rejects at level α = {alpha:g}, "
        f"whatever its power; it passes only when both tests could see a shift of TV {stats.MIN_TV:g} in the law "
        f"(or {stats.MIN_TOKENS:g} tokens per step, after {stats.MIN_ROUNDS} rounds) and neither rejects; otherwise "
        "it is inconclusive. Low power voids a pass, not a rejection."
    )


SHARED_UNIFORM_WHY = (
    "One coin per row keeps the first token exact: the first-token test cannot see this bug. After an accepted "
    "draft the shared coin is known to be small, so the next draft is accepted too often: that shifts the later "
    "tokens and raises the tokens per step above what a lossless rule gives."
)


class TestsLesson(NamedTuple):
    tiles: list[Metric]  # the first token, each later token, the joint law, tokens per step: each test's verdict
    seen: str  # which tests saw the bug in this run and which missed it


def shared_uniform_lesson(res: Any, jp: results.JointP, tok: stats.MeanTest, L: int) -> TestsLesson:
    """Each test of one run side by side: the first-token test misses ``shared_uniform``, later ones see it.

    ``res``: the run's CaseResult; ``jp``: its joint p-value (the tile of the joint law uses it);
    ``tok``: its tokens-per-step test (the verdict's); ``L``: tokens per sequence.
    """
    j = res.joint
    tests = [("first token only", res.first_token)]
    tests += [(f"token {t + 1} on its own", c) for t, c in enumerate(res.positions[1:], start=1)]
    tests += [(f"joint law of {L} tokens", j)]
    tiles = [
        Metric(name, results.joint_says(t, jp if t is j else None),
               f"chi-square {t.statistic:,.1f} vs {t.critical_value:,.1f}")
        for name, t in tests
    ]  # fmt: skip
    says = results.tokens_says(tok)
    tiles.append(Metric("tokens per step", says, f"z = {tok.z:+.1f}" if says != "inconclusive" else "too few rounds"))
    seen = [t.label for t in tiles if t.value == "fail"]
    missed = [t.label for t in tiles if t.value == "pass"]
    text = (
        f"In this run, tests that see it: {', '.join(seen) if seen else 'none'}; tests that miss it: "
        f"{', '.join(missed) if missed else 'none'}."
    )
    if says != "inconclusive":
        more = "more" if res.tokens.measured > res.tokens.expected else "fewer"
        text += (
            f" Tokens per step: measured {res.tokens.measured:.4f} against {res.tokens.expected:.4f} for a "
            f"lossless rule ({more})."
        )
    return TestsLesson(tiles, text)


def retry_n(verdict: results.Verdict) -> int | None:
    """The N an inconclusive verdict offers to run again with (the N it needs, with a margin); None: no offer."""
    if verdict.word != "inconclusive" or verdict.needed_n is None:
        return None
    n = results.suggested_n(verdict.needed_n)
    return n if n <= limits.MAX_PROVE_N else None


def case_metrics(res: Any, verdict: results.Verdict) -> list[list[Metric]]:
    """The two rows of numbers under the verdict: the joint test, then TV, its power and tokens per step.

    ``res``: the run's CaseResult; ``verdict``: :func:`specviz.app.results.case_verdict` of it (not an error).
    """
    j, jp, tok = res.joint, verdict.joint_p, verdict.tokens  # verdict.tokens is res.tokens, its test
    if jp is None or tok is None:
        raise InputError("verdict", "the verdict of a run that did not raise", verdict.word)
    enough = tok.rounds >= stats.MIN_ROUNDS
    return [
        [
            Metric(f"chi-square ({j.dof} dof)", f"{j.statistic:,.1f}", help=f"{j.cells} cells after pooling"),
            Metric(f"critical value (α = {j.alpha:g})", f"{jp.critical_value:,.1f}",
                   help=f"the statistic's (1 − α) quantile, by {jp.method}"),
            Metric("p-value" if jp.method == "chi-square" else f"p-value ({jp.method})", results.p_text(jp),
                   help=results.P_HELP[jp.method].format(draws=jp.draws)),
            Metric("joint test", results.joint_says(j, jp)),
        ],
        [
            Metric("TV(observed, exact)", f"{j.tv:.4f}"),
            Metric(f"detectable TV ({j.power:.0%} power)",
                   f"{j.detectable_tv:.4f}" if np.isfinite(j.detectable_tv) else "∞ (no power)",
                   help="any shift of the law at least this large in total variation fails the test with this power"),
            Metric("tokens per step, measured", f"{tok.measured:.4f}",
                   f"± {tok.se:.4f} (1 SE)" if enough else "too few rounds for an SE"),
            Metric("tokens per step, theory", f"{tok.expected:.4f}",
                   f"z = {tok.z:+.2f}" if enough else f"needs ≥ {tok.needed_rounds:,} rounds",
                   help="exact expectation over the contexts the run met"),
        ],
    ]  # fmt: skip


def downloads(res: Any, bug: str, scenario: str, n: int, seed: int, V: int, L: int) -> list[Download]:
    """The run as JSON (the fields of ``specviz prove --json``, the verdict, the counts) and its counts as CSV."""
    record = results.case_record(res, bug=None if bug == NONE else bug, n=n, seed=seed, V=V, L=L)
    return [
        Download("Download this run (JSON)", results.to_json(record),
                 f"specviz-bug-lab-{scenario}-{'correct' if bug == NONE else bug}.json", "application/json",
                 "download_json", "the fields of `specviz prove --json`, the verdict with its power, and the counts "
                 "against the exact law"),
        Download("Download the counts (CSV)", results.to_csv(record["cells"]), f"specviz-bug-lab-{scenario}-counts.csv",
                 "text/csv", "download_csv", "one row per sequence of tokens: observed count, exact probability, "
                 "expected count"),
    ]  # fmt: skip
