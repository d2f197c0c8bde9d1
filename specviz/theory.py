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

from .errors import InputError

PROB_ATOL = 1e-9  # |sum - 1| allowed for the float64 vectors of the closed forms


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
        raise InputError(name, f"probabilities summing to 1 (tolerance {PROB_ATOL:g})", f"sum {v.sum():.6g}")
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
