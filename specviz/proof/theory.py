"""Closed forms for one position: acceptance rate, the min/residual decomposition, tokens per step.

# V vocabulary

With target p and draft q at one position, the acceptance rate is
a = sum_x q(x) min(1, p(x)/q(x)) = sum_x min(p(x), q(x)) = 1 - TV(p, q). The output law of
the rule is min(p, q) + (1 - a) * residual with residual = max(0, p - q) / (1 - a), which is
p exactly. With a context-free acceptance rate a and K drafts, the number of accepted drafts
is min(G, K) for a geometric G, and each verification emits one more token (replacement or
bonus), so the expected tokens per verification are
sum_{i=0..K} a^i = (1 - a^(K+1)) / (1 - a); without the bonus token the all-accepted case
emits K instead of K + 1, which removes a^K: (1 - a^(K+1)) / (1 - a) - a^K.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InputError, digits
from ..verifiers.processing import output_law
from .markov import Drafter, MarkovChain
from .pipeline import DRAFTER, REQUEST, unprocess

PROB_ATOL = 1e-9  # |sum - 1| allowed for the float64 vectors of the closed forms

# The reference example every text quotes: this target against a uniform draft, 3 drafts per
# round. a = 0.7, and (1 - 0.7^4) / (1 - 0.7) = 2.533 tokens per verification (2.19 without the
# bonus); texts compute their figures from these constants rather than typing them.
REFERENCE_P = (0.5, 0.3, 0.15, 0.05)
REFERENCE_Q = (0.25, 0.25, 0.25, 0.25)
REFERENCE_K = 3


class Decomposition(NamedTuple):
    """p = accepted + replaced, term by term (all shape (V,))."""

    accepted: np.ndarray  # min(p, q): x drafted and accepted
    replaced: np.ndarray  # (1 - a) * residual: x emitted after a rejection
    residual: np.ndarray  # max(0, p - q) / (1 - a); p itself when a = 1 (unreachable)
    acceptance_rate: float  # a = sum min(p, q)
    total_variation: float  # 1 - a
    output: np.ndarray  # accepted + replaced, equal to p
    max_abs_error: float  # max |output - p|
    accept_prob: np.ndarray  # min(1, p/q) per token (1 where q = 0: never drafted)


def as_dist(x: object, name: str) -> np.ndarray:
    """A float64 probability vector (V,), validated."""
    v = np.asarray(x, dtype=np.float64)
    if v.ndim != 1 or v.size < 1:
        raise InputError(name, "a 1-D probability vector (V,)", f"shape {v.shape}")
    if not np.isfinite(v).all():
        raise InputError(name, "finite probabilities", "NaN or infinite entries")
    if (v < 0).any():
        raise InputError(name, "non-negative probabilities", f"minimum {v.min():.6g}")
    if abs(v.sum() - 1) > PROB_ATOL:
        raise InputError(name, f"probabilities summing to 1 (tolerance {PROB_ATOL:g})", f"sum {digits(v.sum())}")
    return v


def _pair(target_probs: object, draft_probs: object) -> tuple[np.ndarray, np.ndarray]:
    p, q = as_dist(target_probs, "target_probs"), as_dist(draft_probs, "draft_probs")
    if p.shape != q.shape:
        raise InputError("draft_probs", f"shape (V,) = {p.shape} like target_probs", f"{q.shape}")
    return p, q


def acceptance_rate(target_probs: object, draft_probs: object) -> float:
    """a = sum_x min(p(x), q(x)): the probability that one draft is accepted."""
    p, q = _pair(target_probs, draft_probs)
    return float(np.minimum(p, q).sum())


def decompose(target_probs: object, draft_probs: object) -> Decomposition:
    """The output law of the correct rule, built term by term, and how close it is to p."""
    p, q = _pair(target_probs, draft_probs)
    accepted = np.minimum(p, q)
    a = float(accepted.sum())
    excess = np.maximum(p - q, 0)
    mass = float(excess.sum())  # = 1 - a up to rounding
    residual = excess / mass if mass > 0 else p.copy()
    replaced = (1 - a) * residual
    output = accepted + replaced
    with np.errstate(divide="ignore", invalid="ignore"):
        accept_prob = np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1)), 1.0)
    return Decomposition(
        accepted=accepted,
        replaced=replaced,
        residual=residual,
        acceptance_rate=a,
        total_variation=1 - a,
        output=output,
        max_abs_error=float(np.abs(output - p).max()),
        accept_prob=accept_prob,
    )


def expected_tokens(acceptance: float, K: int, *, bonus: bool = True) -> float:
    """Expected tokens per verification with K drafts and context-free acceptance rate a."""
    a = float(acceptance)
    if not 0 <= a <= 1:
        raise InputError("acceptance", "a rate in [0, 1]", str(acceptance))
    if int(K) != K or K < 0:
        raise InputError("K", "a non-negative integer", str(K))
    total = float(sum(a**i for i in range(int(K) + 1)))  # (1 - a^(K+1)) / (1 - a), safe at a = 1
    return total if bonus else total - a ** int(K)  # no bonus: the all-accepted case loses one


def total_variation(a: object, b: object) -> float:
    """0.5 * sum |a - b| for two probability vectors of the same shape."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise InputError("b", f"shape {x.shape}", f"shape {y.shape}")
    return float(0.5 * np.abs(x - y).sum())


# --- the output law of one position, for the rule and for each classic mistake ------------------
#
# A context-free position: every draft position has the same target p and draft q, and the
# row has K drafts. The law is that of the *first emitted token*. Where a mistake only
# shows in later tokens (shared_uniform) or only changes speed (no_bonus), the first token
# is still p: that is the lesson, and the joint test is what catches them.

NOT_AT_ONE_POSITION = ("wrong_bonus_row",)  # needs ragged rows: no single-position law
# The mistakes position_law knows by name (tests/test_theory.py checks it against the catalogue, BUGS).
POSITION_LAWS = (
    "resample_from_p", "unclamped_residual", "shared_uniform", "count_after_rejection", "reused_coin",
    "wrong_bonus_row", "bonus_row_before", "no_bonus", "greedy_draft_sampled_q", "q_unprocessed",
    "target_unprocessed", "shared_noise_stream", "late_rejection",
)  # fmt: skip


def position_law(target_probs: object, draft_probs: object, bug: str | None = None, *, K: int = 1) -> np.ndarray | None:
    """Exact law (V,) of the first emitted token under the rule or the named mistake.

    Returns ``None`` for a mistake that has no single-position law (see
    :data:`NOT_AT_ONE_POSITION`). ``K`` (at least 1) changes the law only for
    ``count_after_rejection``.
    """
    p, q = _pair(target_probs, draft_probs)
    if int(K) != K or K < 1:  # with no draft the first token is the bonus, drawn from p by every variant
        raise InputError("K", "at least 1 draft per row", str(K))
    d = decompose(p, q)
    if bug is None or bug in ("shared_uniform", "no_bonus", "bonus_row_before"):  # the first token is right
        return d.output
    if bug in NOT_AT_ONE_POSITION:
        return None
    if bug == "resample_from_p":
        return d.accepted + d.total_variation * p
    if bug == "unclamped_residual":
        return d.accepted + d.total_variation * _unclamped_draw_law(p, q)
    if bug == "count_after_rejection":
        a = d.acceptance_rate
        if a == 0:
            return d.residual.copy()
        none_pass = (1 - a) ** K  # no draft's coin passes: the replacement comes first
        return (1 - none_pass) * d.accepted / a + none_pass * d.residual
    if bug == "reused_coin":
        return d.accepted + _reused_coin_replacement(p, q, d)
    if bug == "greedy_draft_sampled_q":
        x = int(np.argmax(q))  # drafted with certainty, but q(x) < 1 is reported
        r = min(1.0, p[x] / q[x])
        out = (1 - r) * d.residual
        out[x] += r
        return out
    if bug in ("q_unprocessed", "target_unprocessed"):  # the settings: specviz.proof.pipeline
        if bug == "target_unprocessed":  # the rule is exact for the p it is given: the raw target
            return np.asarray(unprocess(p, REQUEST))
        return output_law(p, q, unprocess(q, DRAFTER))
    if bug == "shared_noise_stream":
        return _shared_stream_law(p, q, d)
    if bug == "late_rejection":  # rows i + 1 are p and q again here, but after the last draft p itself
        return d.output if K >= 2 else d.accepted + d.total_variation * p
    raise InputError("bug", "one of " + ", ".join(POSITION_LAWS), repr(bug))


def _shared_stream_law(p: np.ndarray, q: np.ndarray, d: Decomposition) -> np.ndarray:
    """First-token law when the drafter's inverse-CDF uniform u is reused as the acceptance coin.

    Draft x comes from u in [F(x-1), F(x)), F the running sum of q, and is accepted iff
    u * q(x) < p(x), i.e. u < p(x) / q(x): the mass of (x, accepted) is the length of
    [F(x-1), F(x)) below that ratio, clip(p(x)/q(x) - F(x-1), 0, q(x)). A rejection draws
    from the residual with a fresh uniform.
    """
    below = np.cumsum(q) - q  # (V,) F(x - 1)
    ratio = np.where(q > 0, p / np.where(q > 0, q, 1.0), 0.0)
    accepted = np.where(q > 0, np.clip(ratio - below, 0.0, q), 0.0)
    return accepted + (1.0 - accepted.sum()) * d.residual


def _unclamped_draw_law(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Law of "first index whose running sum of p - q exceeds u * mass", last index if none."""
    diff = p - q
    mass = np.maximum(diff, 0).sum()
    out = np.zeros_like(p)
    if mass <= 0:
        out[:] = p
        return out
    running_max = np.maximum.accumulate(np.cumsum(diff))  # first i with cdf_i > t <=> M_i > t
    reach = np.clip(running_max, 0, mass)  # t = u * mass ranges over [0, mass)
    out[:] = np.diff(np.concatenate([[0.0], reach])) / mass
    out[-1] += (mass - reach[-1]) / mass  # never exceeded: the last token
    return out


def _reused_coin_replacement(p: np.ndarray, q: np.ndarray, d: Decomposition) -> np.ndarray:
    """Mass of each replacement token when the rejecting coin u in [r, 1) is reused."""
    out = np.zeros_like(p)
    if d.total_variation <= 0:
        return out
    cdf = np.cumsum(d.residual)
    lo = np.concatenate([[0.0], cdf[:-1]])
    for x in np.flatnonzero(q > p):  # only drafts with p/q < 1 can be rejected
        r = p[x] / q[x]
        overlap = np.clip(np.minimum(cdf, 1.0) - np.maximum(lo, r), 0, None)  # |[lo, cdf) ∩ [r, 1)|
        out += q[x] * overlap  # P(draft x) * P(u in that piece), u uniform on [0, 1)
    return out


RULES = ("residual", "sample-match")  # the rules whose tokens per step prove can hold a verifier to (--rule)


def chain_expected_tokens(target: MarkovChain, drafter: Drafter, K: int, *, bonus: bool = True,
                          rule: str = "residual") -> np.ndarray:  # fmt: skip
    """Exact expected tokens of one verification, by context and draft count: (V+1, K+1).

    ``rule`` "residual" (the contract's chain) or "sample-match" (the target draws y ~ p and a
    draft survives iff it equals y: m(c, x) = q_c(x) p_c(x) for a sampling drafter, p_c(x*) for
    a deterministic one).

    Row c is the context (0 = start, t+1 = after token t), column j the number of drafts.
    alpha_i(c), the probability that the first i drafts are all accepted, obeys
    alpha_i(c) = sum_x m(c, x) alpha_{i-1}(x) with m(c, x) = P(x drafted and accepted | c)
    = min(p_c(x), q_c(x)) for a sampling drafter; then E[tokens | c, j] = sum_{i<=j} alpha_i(c)
    (the replacement or bonus adds the one token beyond the accepted ones), minus alpha_j(c)
    without the bonus. Comparing the measured mean with the mean of this table over the
    contexts actually met is an exact test of tokens per step, even for context-dependent
    chains.
    """
    if rule not in RULES:
        raise InputError("rule", "one of " + ", ".join(RULES), repr(rule))
    P, Q = target.table, drafter.chain.table  # (V+1, V)
    if drafter.mode == "sample":
        m = P * Q if rule == "sample-match" else np.minimum(P, Q)
    elif rule == "sample-match":  # the drafted x* survives iff the target's own draw is x*
        x = np.argmax(Q, axis=1)
        m = np.zeros_like(P)
        m[np.arange(len(x)), x] = P[np.arange(len(x)), x]
    else:  # the argmax x* is drafted with certainty; accepted w.p. p(x*) or min(1, p/q) if q is reported
        x = np.argmax(Q, axis=1)
        r = np.arange(len(x))
        m = np.zeros_like(P)
        px, qx = P[r, x], Q[r, x]
        m[r, x] = px if drafter.mode == "argmax" else np.minimum(1.0, px / np.where(qx > 0, qx, 1.0))
    alpha = np.ones((K + 1, P.shape[0]))  # alpha[i, c]
    for i in range(1, K + 1):
        alpha[i] = m @ alpha[i - 1, 1:]  # next context after drafting token x is row x + 1
    table = np.cumsum(alpha, axis=0).T  # (V+1, K+1)
    return table if bonus else table - alpha.T
