"""The classic mistakes, each the reference rule with exactly one step swapped.

Every entry of :data:`BUGS` has a verifier with the signature of :func:`specviz.verify`
(except the pipeline mistakes, whose verifier is the correct one or a wrapper around it and
whose fault is in what feeds it), a one-paragraph explanation, and the check that catches it.
A verifier mistake is :func:`specviz.verifiers.reference.with_step` on the chain reference
:func:`specviz.verifiers.reference.verify`, with the swapped step (a small function of the
reference's :class:`~specviz.verifiers.reference.ChainSteps`) defined right before its entry.
The engine (:func:`specviz.verify`) runs only the rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers import reference
from ..verifiers.reference import Coins, Draw, Kept, with_step
from ..verifiers.verify import verify
from . import engine_bugs, theory
from .markov import DrafterMode


class Bug(NamedTuple):
    name: str
    title: str
    verifier: Callable[..., Any]  # same signature and result as specviz.verify
    step: tuple[str, str] | None  # (reference step swapped, the function swapped in); None: a pipeline mistake
    drafter_mode: DrafterMode | None  # the drafter's mistake, if that is where the bug lives
    explanation: str  # what it does and why the law changes (or why it does not)
    caught_by: str  # which check fails
    changes_law: bool  # False: still lossless, only slower
    needs_ragged: bool  # visible only when some rows have fewer drafts than the padded width


# --- the textbook example's figures, computed (tests/test_explanations.py checks every one) ---
_P, _Q = np.array(theory.REFERENCE_P), np.array(theory.REFERENCE_Q)
_A = theory.acceptance_rate(_P, _Q)
_K = theory.REFERENCE_K
REFERENCE = f"the textbook example (p = {list(theory.REFERENCE_P)}, q uniform, a = {_A:.2g})"


def _law(p: np.ndarray, q: np.ndarray, bug: str) -> np.ndarray:
    """:func:`specviz.proof.theory.position_law` of a mistake that has a single-position law."""
    law = theory.position_law(p, q, bug)
    if law is None:
        raise ValueError(f"{bug} has no single-position law")  # the figures below all have one
    return law


def _resample_from_p_figures() -> tuple[int, float]:
    """A token with p > q that still comes out too often, and the law's TV from p."""
    law = _law(_P, _Q, "resample_from_p")
    x = int(np.flatnonzero((_P > _Q) & (law > _P))[0])
    return x, theory.total_variation(law, _P)


_RX, _RTV = _resample_from_p_figures()
_RLAW = _law(_P, _Q, "resample_from_p")
_CLAW = _law(_P, _Q, "reused_coin")
_C0 = int(np.flatnonzero(theory.decompose(_P, _Q).residual > 0)[0])  # first token the residual can give
_GX = int(np.argmax(_Q))  # the greedy drafter's proposal (the first of the tied maxima)
_GLAW = _law(_P, _Q, "greedy_draft_sampled_q")
# q_unprocessed needs a drafter whose temperature changes q (a uniform q is the same at any temperature).
_UP, _UQ = np.array([0.1, 0.5, 0.4]), np.array([0.3, 0.2, 0.5])
_ULAW = _law(_UP, _UQ, "q_unprocessed")
_UX = int(np.argmax(_ULAW - _UP))  # the token that comes out most too often
_UR = np.asarray(engine_bugs.unprocess(_UQ, engine_bugs.DRAFTER))
_TLAW = _law(_P, _Q, "target_unprocessed")
_SLAW = _law(_P, _Q, "shared_noise_stream")
_SX = int(np.flatnonzero(_SLAW == 0)[0])  # a token the shared stream never emits
_T_REQ = engine_bugs.REQUEST.temperature
_T_DRAFT = engine_bugs.DRAFTER.temperature


# --- the swapped steps, one per verifier mistake, in the catalogue's order ---------------------------
# Each has the signature of the reference step it replaces (specviz.verifiers.reference.ChainSteps).


def _swap(name: str, **step: Callable[..., Any]) -> tuple[Callable[..., Any], tuple[str, str]]:
    """(the chain reference with ``step`` swapped, called ``name``; (step, function name) for Bug.step)."""
    ((which, fn),) = step.items()
    return with_step(reference.verify, name, **step), (which, fn.__name__)


def replacement_from_p(p: Any, q: Any, x: Any, u: Any) -> Any:
    """resample_from_p: after a rejection the token is drawn from p, not from the residual."""
    return reference.inverse_cdf(p, u)


def replacement_unclamped(p: Any, q: Any, x: Any, u: Any) -> Any:
    """unclamped_residual: inverse CDF over p - q without max(0, .), normalized by its positive mass;
    the last token when the running sum never passes u * mass."""
    w = p.astype(np.float64)  # (R, V)
    if q is None:
        w[np.arange(len(x)), x] -= 1.0
    else:
        w = w - q.astype(np.float64)
    above = np.cumsum(w, axis=1) > (u * np.maximum(w, 0).sum(axis=1))[:, None]  # (R, V)
    return np.where(above.any(axis=1), above.argmax(axis=1), w.shape[1] - 1)


def one_coin_per_row(ua: Any, px: Any, qx: Any) -> Coins:
    """shared_uniform: the row's first uniform is the coin at every position."""
    return reference.accept(ua[:, :1] + 0 * ua, px, qx)


def keep_every_pass(passed: Any, valid: Any) -> Kept:
    """count_after_rejection: every draft whose coin passes is kept, not only the run before the first rejection."""
    first = reference.first_rejection(passed, valid).first
    return Kept(passed & valid, first, valid)


def rejected_coin_again(first: Any, rejected: Any, j: Any, ua: Any, us: Any) -> Draw:
    """reused_coin: the replacement is drawn with the uniform that just rejected the draft."""
    rule = reference.last_draw(first, rejected, j, ua, us)
    if not ua.shape[1]:
        return rule
    return rule._replace(u=np.where(rejected, ua[np.arange(len(us)), np.where(rejected, first, 0)], us))


def last_padded_row(first: Any, rejected: Any, j: Any, ua: Any, us: Any) -> Draw:
    """wrong_bonus_row: the bonus from target row K, the padded tensor's last."""
    return reference.last_draw(first, rejected, np.full_like(j, ua.shape[1]), ua, us)


def row_before(first: Any, rejected: Any, j: Any, ua: Any, us: Any) -> Draw:
    """bonus_row_before: the bonus from row num_draft - 1 (row 0 without drafts)."""
    return reference.last_draw(first, rejected, np.maximum(j - 1, 0), ua, us)


def no_bonus_row(first: Any, rejected: Any, j: Any, ua: Any, us: Any) -> Draw:
    """no_bonus: full rows draw nothing (row -1: no draw)."""
    return reference.last_draw(first, rejected, np.full_like(j, -1), ua, us)


def next_position(first: Any, rejected: Any, j: Any, ua: Any, us: Any) -> Draw:
    """late_rejection: the replacement from position first + 1's residual; p at row K past the last draft."""
    row = np.where(rejected, first + 1, j)
    return Draw(row, rejected & (row < ua.shape[1]), us)


BUGS: dict[str, Bug] = {
    b.name: b
    for b in [
        Bug(
            "resample_from_p",
            "Resample from p after a rejection",
            *_swap("resample_from_p", replacement=replacement_from_p),
            None,
            "After a rejection the replacement is drawn from the target p instead of the residual "
            "r = max(0, p - q) / (1 - a). Acceptance already emits each token x with probability "
            "min(p(x), q(x)); the replacement should add only what is missing, max(0, p - q) = (1 - a) r, "
            "but adds (1 - a) p. The output is min(p, q) + (1 - a) p, whose excess over p is "
            "min(p, q) - a p: token x comes out too often exactly when min(p(x), q(x)) > a p(x), that is "
            "every token with q >= p > 0 (when a < 1) and also those q under-proposes only mildly, "
            "a p(x) < q(x) < p(x); too rarely where q(x) < a p(x). The error is TV = (1 - a) TV(p, r), at "
            "most 1 - a = TV(p, q), and zero only when r happens to equal p. In " + REFERENCE + f" token "
            f"{_RX} has p = {_P[_RX]:.2f} > q = {_Q[_RX]:.2f} and still comes out at {_RLAW[_RX]:.2f}.",
            f"the exact law of one position (TV = (1 - a) * TV(p, r): {_RTV:.3f} in the textbook example) "
            "and every chi-square test (first token, each position, joint)",
            True,
            False,
        ),
        Bug(
            "unclamped_residual",
            "Forget the clamp on p - q",
            *_swap("unclamped_residual", replacement=replacement_unclamped),
            None,
            "The replacement is drawn by inverse CDF over p - q without max(0, .): the first token whose "
            "running sum of p - q passes u * mass, with mass = sum max(0, p - q). Each token with q > p "
            "makes the running sum dip, and the tokens after it must climb back out of the dip before "
            "they can be chosen, so the draw is pushed toward later tokens (the chance of a token at or "
            "below any index never exceeds the residual's); when the running sum never gets back above "
            "u * mass the draw falls through to the last token, which the residual may give no mass. "
            "The law changes exactly when a token with q > p comes before a token with p > q other than "
            "the last one, so the textbook example, whose over-proposed tokens come last, hides it.",
            "the exact law of one position when a token with q > p comes before one with p > q other than "
            "the last (not in the textbook example) and every chi-square test (first token, each "
            "position, joint)",
            True,
            False,
        ),
        Bug(
            "shared_uniform",
            "One uniform for every position",
            *_swap("shared_uniform", accept=one_coin_per_row),
            None,
            "Each row draws one coin u and compares it with the ratio r_i = p(x_i) / q(x_i) at every "
            "position (the replacement still gets its own uniform). The first decision is still exact, "
            "but later ones are no longer independent of earlier ones: having accepted x_0 tells you "
            "u < min(1, r_0), so x_1 is accepted with probability min(1, r_1 / min(1, r_0)), never less "
            "than the min(1, r_1) of a fresh coin and more when both ratios are below 1. A run of "
            "acceptances is as likely as its least likely step (min(1, r_0, r_1, ...) against the product "
            "of the min(1, r_i) for fresh coins), so runs reach every length at least as often as the "
            "rule's, and more often once two drafts can have ratios strictly between 0 and 1. The first "
            "token's law is exactly p; the second token's is not, and neither is the joint law.",
            "the joint chi-square test and tokens per verification (more than theory); a first-token-only "
            "test passes, since the first token's law is exactly p: that is the lesson",
            True,
            False,
        ),
        Bug(
            "count_after_rejection",
            "Keep drafts after a rejection",
            *_swap("count_after_rejection", first_rejection=keep_every_pass),
            None,
            "Every draft whose coin passes is kept, not only the run before the first rejection. A "
            "draft after a rejected one was proposed in the context of the rejected token, so it is "
            "conditioned on text that is no longer there; keeping it splices tokens from a "
            "discarded continuation into the output, and rows emit more tokens than the rule does "
            "(never fewer). With one draft per round nothing follows a rejection and the law is exact.",
            "every chi-square test and tokens per verification (more than theory); needs at least 2 drafts per round",
            True,
            False,
        ),
        Bug(
            "reused_coin",
            "Reuse the acceptance coin for the replacement",
            *_swap("reused_coin", last_draw=rejected_coin_again),
            None,
            "The replacement token is drawn with the same uniform that just rejected the draft. "
            "Given that draft x was rejected, the uniform is no longer uniform on [0, 1) but on "
            "[p(x)/q(x), 1), so the inverse CDF reads only the part of the residual above p(x)/q(x): "
            "the replacement is pushed toward later tokens (the chance of a token at or below any index "
            "never exceeds the residual's), and the first token the residual can give comes out too "
            "rarely, unless the residual has a single token or every draft that can be rejected has "
            "p(x) = 0 (its coin then stays uniform). In " + REFERENCE + f" token {_C0} comes out at "
            f"{_CLAW[_C0]:.3f} instead of {_P[_C0]:g}. (Issue trackers also call it "
            "reused_accept_coin_for_residual; the catalogue keeps one name.)",
            "the exact law of one position and every chi-square test (first token, each position, joint)",
            True,
            False,
        ),
        Bug(
            "wrong_bonus_row",
            "Bonus from the last padded row",
            *_swap("wrong_bonus_row", last_draw=last_padded_row),
            None,
            "When every draft survives, the bonus token is drawn from target row K (the last row of "
            "the padded tensor) instead of row num_draft[b]. With equal draft counts the two are the "
            "same row and nothing shows; in a ragged batch the short rows sample their bonus from a "
            "padding row that belongs to no context at all.",
            "every chi-square test (first token, each position, joint) with ragged rows; invisible when "
            "every row has K drafts",
            True,
            True,
        ),
        Bug(
            "bonus_row_before",
            "Bonus from the row before",
            *_swap("bonus_row_before", last_draw=row_before),
            None,
            "When every draft survives, the bonus token is drawn from target row num_draft[b] - 1, the "
            "distribution the last draft was tested against, instead of row num_draft[b], the distribution "
            "after it. The bonus then follows the conditional of the context before the last accepted token. "
            "Only the bonus of rows whose drafts all survive is wrong, and with L = K that bonus is token "
            "K + 1, outside the window of L tokens a test judges: only scenarios with L > K can see it.",
            "the joint chi-square test in scenarios with L > K; invisible when L = K",
            True,
            False,
        ),
        Bug(
            "no_bonus",
            "No bonus token",
            *_swap("no_bonus", last_draw=no_bonus_row),
            None,
            "When every draft survives, the row stops without drawing the bonus token from p at "
            "position num_draft[b]. The emitted tokens still follow the target exactly (stopping "
            "early is always allowed), but each verification yields fewer tokens: "
            "(1 - a^(K+1)) / (1 - a) - a^K instead of (1 - a^(K+1)) / (1 - a); "
            f"{theory.expected_tokens(_A, _K, bonus=False):.2f} instead of {theory.expected_tokens(_A, _K):.3f} "
            f"with K = {_K} in " + REFERENCE + ".",
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
            "q (or draft_probs=None). In " + REFERENCE + f" the drafter always proposes token {_GX}, "
            f"p({_GX}) / q({_GX}) = {_P[_GX] / _Q[_GX]:g} >= 1 accepts it every time, and token {_GX} comes "
            f"out with probability {_GLAW[_GX]:g} instead of {_P[_GX]:g}.",
            "the exact law of one position, every chi-square test (first token, each position, joint) and "
            "tokens per verification (more than theory), on a drafter that takes its argmax",
            True,
            False,
        ),
        Bug(
            "q_unprocessed",
            "Drafts from the processed q, the raw q reported",
            engine_bugs.q_unprocessed,
            None,
            None,
            f"A pipeline mistake: the drafter samples at temperature {_T_DRAFT:g}, so each draft is drawn from "
            "its processed law q, but the verifier is handed the drafter's raw softmax r (temperature 1) as q. "
            "It accepts x with min(1, p(x)/r(x)) instead of min(1, p(x)/q(x)) and builds the residual from "
            "p - r, so the output is q(x) min(1, p(x)/r(x)) plus the rejection mass times (p - r)+ normalized: "
            "p only when r = q. The verifier can correct any q, but only the q the drafts were really drawn "
            "from, after the drafter's own settings. A uniform q is the same at every temperature, so "
            + REFERENCE
            + " hides it; with p = [0.1, 0.5, 0.4] and processed q = [0.3, 0.2, 0.5] (raw r = "
            f"[{', '.join(f'{v:.3f}' for v in _UR)}]) token {_UX} comes out at {_ULAW[_UX]:.3f} instead of "
            f"{_UP[_UX]:g}.",
            "the exact law of one position when the drafter's temperature changes q (not in the textbook "
            "example) and every chi-square test (first token, each position, joint)",
            True,
            False,
        ),
        Bug(
            "target_unprocessed",
            "p at default settings, not the request's",
            engine_bugs.target_unprocessed,
            None,
            None,
            f"The request asked for temperature {_T_REQ:g}, so plain decoding samples the processed target, but "
            "the verifier is handed the target's raw softmax as p. The rule is exact for whatever p it is "
            "given, so the output follows the raw target: decoding at the default settings, not the "
            "request's. Tokens the request's settings make rarer (or remove, with top-k or top-p) come out "
            "at their raw rates, and the error at one position is TV(raw target, processed target). In "
            + REFERENCE
            + f" read as the request's law, token 0 comes out at {_TLAW[0]:.3f} instead of "
            f"{_P[0]:g}, and token 3 comes out at {_TLAW[3]:.3f} instead of {_P[3]:g}.",
            "the exact law of one position and every chi-square test (first token, each position, joint)",
            True,
            False,
        ),
        Bug(
            "shared_noise_stream",
            "The drafter's uniform reused as the coin",
            engine_bugs.shared_noise_stream,
            None,
            None,
            "The draft sampling and the acceptance coins come from the same random numbers: the uniform u "
            "with which the drafter drew x by inverse CDF is reused as x's acceptance coin. Given x, u is not "
            "uniform on [0, 1) but on [F(x-1), F(x)), F the running sum of q, so the coin depends on the "
            "token: x is accepted with probability clip((p(x)/q(x) - F(x-1)) / q(x), 0, 1) instead of "
            "min(1, p(x)/q(x)). The first token of the vocabulary's order gets the smallest coins and passes at "
            "least as often as it should, the last token the largest and passes at most as often; a token with "
            "p(x) >= q(x) still always passes (u < 1). In "
            + REFERENCE
            + f" token {_SX} (p/q = {_P[_SX] / _Q[_SX]:g}, u in [{np.cumsum(_Q)[_SX] - _Q[_SX]:g}, "
            f"{np.cumsum(_Q)[_SX]:g})) is never accepted and never replaced, so it never comes out instead of "
            f"{_P[_SX]:g}. (The simulation rebuilds the drafter's u from x and a fresh uniform, "
            "F(x-1) + v q(x): the same joint law of draft and coin.)",
            "the exact law of one position and every chi-square test (first token, each position, joint)",
            True,
            False,
        ),
        Bug(
            "late_rejection",
            "Replacement drawn one position late",
            *_swap("late_rejection", last_draw=next_position),
            None,
            "After the rejection at position i the replacement is drawn from the residual of position i + 1 "
            "(p_(i+1) - q_(i+1), normalized), or from the target row K when i is the last draft position. "
            "Row i + 1 is the distribution after the rejected draft x_i, a context that has just been "
            "discarded, so the replacement follows the wrong conditional. With the same p and q at every "
            "position only the last position's mistake shows, and with one draft the replacement comes from "
            "p: the law is then resample_from_p's. Markov chains show it at every position.",
            "the exact law of one position with one draft (resample_from_p's) and every chi-square test "
            "(first token, each position, joint)",
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
