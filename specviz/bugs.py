"""The classic mistakes, each the correct verifier with exactly one step swapped.

Every entry of :data:`BUGS` has a verifier with the signature of :func:`specviz.verify`
(except the pipeline mistake, whose verifier is the correct one and whose fault is in the
drafter that feeds it), a one-paragraph explanation, and the check that catches it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from .errors import InputError
from .verify import Rule, verify, verify_with_rule


class Bug(NamedTuple):
    name: str
    title: str
    verifier: Callable[..., Any]  # same signature and result as specviz.verify
    rule: Rule | None  # the swapped step; None for the pipeline mistake
    drafter_mode: str | None  # the drafter's mistake, if that is where the bug lives
    explanation: str  # what it does and why the law changes (or why it does not)
    caught_by: str  # which check fails
    changes_law: bool  # False: still lossless, only slower
    needs_ragged: bool  # visible only when some rows have fewer drafts than the padded width


def _with(rule: Rule, name: str) -> Callable[..., Any]:
    fn = functools.partial(verify_with_rule, rule=rule)
    fn.__name__ = name  # type: ignore[attr-defined]
    return fn


BUGS: dict[str, Bug] = {
    b.name: b
    for b in [
        Bug(
            "resample_from_p",
            "Resample from p after a rejection",
            _with(Rule(replacement="target"), "resample_from_p"),
            Rule(replacement="target"),
            None,
            "After a rejection the replacement is drawn from the target p instead of the residual "
            "max(0, p - q). Tokens that q over-proposes were already emitted through acceptance at "
            "rate min(p, q); drawing them again from p gives them extra mass, so the output is "
            "min(p, q) + (1 - a) p, not p. Tokens where q > p come out too often, the others too rarely.",
            "exact law of one position (TV = (1 - a) * TV(p, q) > 0) and every chi-square test",
            True,
            False,
        ),
        Bug(
            "unclamped_residual",
            "Forget the clamp on p - q",
            _with(Rule(replacement="unclamped"), "unclamped_residual"),
            Rule(replacement="unclamped"),
            None,
            "The replacement is drawn by inverse CDF over p - q without max(0, .). The negative "
            "entries (where q > p) make the running sum dip, so the first index whose running sum "
            "passes u * mass lands on tokens after the dip too early or too late, and may even be a "
            "token the residual gives no mass. The rule only works with the clamped residual.",
            "exact law of one position and the joint chi-square test",
            True,
            False,
        ),
        Bug(
            "shared_uniform",
            "One uniform for every position",
            _with(Rule(accept_coins="shared"), "shared_uniform"),
            Rule(accept_coins="shared"),
            None,
            "Each row draws one coin and compares it with p/q at every position. The first position "
            "is still exact, but later decisions are no longer independent of earlier ones: having "
            "accepted position 0 tells you the coin was small, which makes position 1 more likely to "
            "accept than min(1, p/q). The marginal of the first token is right; the joint law of "
            "the sequence is not.",
            "the joint chi-square test (a first-token-only test passes: that is the lesson)",
            True,
            False,
        ),
        Bug(
            "count_after_rejection",
            "Keep drafts after a rejection",
            _with(Rule(count="all"), "count_after_rejection"),
            Rule(count="all"),
            None,
            "Every draft whose coin passes is kept, not only the run before the first rejection. A "
            "draft after a rejected one was proposed in the context of the rejected token, so it is "
            "conditioned on text that is no longer there; keeping it splices tokens from a "
            "discarded continuation into the output.",
            "the joint chi-square test (needs at least 2 drafts per round)",
            True,
            False,
        ),
        Bug(
            "reused_coin",
            "Reuse the acceptance coin for the replacement",
            _with(Rule(sample_coin="reused"), "reused_coin"),
            Rule(sample_coin="reused"),
            None,
            "The replacement token is drawn with the same uniform that just rejected the draft. "
            "Given a rejection that uniform is not uniform any more: it lies in [p/q, 1), so the "
            "inverse CDF only reaches the upper part of the residual and the first tokens of the "
            "vocabulary are starved.",
            "exact law of one position and every chi-square test",
            True,
            False,
        ),
        Bug(
            "wrong_bonus_row",
            "Bonus from the last padded row",
            _with(Rule(bonus="last"), "wrong_bonus_row"),
            Rule(bonus="last"),
            None,
            "When every draft survives, the bonus token is drawn from target row K (the last row of "
            "the padded tensor) instead of row num_draft[b]. With equal draft counts the two are the "
            "same row and nothing shows; in a ragged batch the short rows sample their bonus from a "
            "padding row that belongs to no context at all.",
            "the joint chi-square test with ragged rows (invisible when every row has K drafts)",
            True,
            True,
        ),
        Bug(
            "no_bonus",
            "No bonus token",
            _with(Rule(bonus="none"), "no_bonus"),
            Rule(bonus="none"),
            None,
            "When every draft survives, the row stops without drawing the bonus token from p at "
            "position num_draft[b]. The emitted tokens still follow the target exactly (stopping "
            "early is always allowed), but each verification yields fewer tokens: "
            "(1 - a^(K+1)) / (1 - a) - a^K instead of (1 - a^(K+1)) / (1 - a); 2.19 instead of "
            "2.533 in the reference example.",
            "tokens per verification against theory (every distribution test passes)",
            False,
            False,
        ),
        Bug(
            "greedy_draft_sampled_q",
            "Greedy drafter that reports its softmax as q",
            verify,
            None,
            "argmax_reports_softmax",
            "A pipeline mistake, not a verifier one: the drafter picks its argmax (temperature 0) but "
            "passes its full softmax as draft_probs. The verifier then believes x was drawn with "
            "probability q(x) < 1 when it was certain, accepts it with min(1, p/q) instead of p(x), "
            "and builds the residual from the wrong q. A deterministic drafter must report a one-hot "
            "q (or draft_probs=None).",
            "exact law and the joint chi-square test on a drafter that takes its argmax",
            True,
            False,
        ),
    ]
}


def get(name: str) -> Bug:
    """The bug called ``name``; an InputError listing the names otherwise."""
    try:
        return BUGS[name]
    except KeyError:
        raise InputError("bug", "one of " + ", ".join(BUGS), repr(name)) from None
