"""The design brief's example verifier, and user-style wrappers around it and around sample-and-match.

# B rows, K drafts (padded width), V vocabulary

``example_verify`` and ``sample_rows`` are copied unchanged from the brief's example (a vectorized
NumPy verifier with its own calling convention: ``verify(draft, q, p, num_draft, rng)``, drawing
``rng.random((B, K))`` for the coins, then ``rng.random((B, 1))`` for the final token). Its inverse
CDF counts ``cumsum < u * total``: at a coin of exactly 0.0 it returns token 0 even when p(0) = 0.
``sample_rows_leq`` is the one-line fix, ``cumsum <= u * total`` (a coin of 0 skips past the
tokens with p = 0).

The wrappers adapt the calling convention to :func:`specviz.verify`'s and nothing else:
``brief_explicit`` feeds the brief's code the explicit uniforms (a stand-in generator that hands
them out in the order the code draws), ``brief_fixed`` is the same with the fix,
``brief_rng_only`` calls it as it is, drawing from ``rng``; ``sample_match_rng_only`` is
:func:`specviz.verifiers.sample_match.verify_sample_match` behind a user's rng-only signature.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from specviz.verifiers.sample_match import verify_sample_match


class Result(NamedTuple):
    tokens: np.ndarray  # (B, K+1), -1 after num_tokens
    num_tokens: np.ndarray  # (B,)
    num_accepted: np.ndarray  # (B,)


# --- the brief's code, unchanged -----------------------------------------------------------------


def sample_rows(dist, rng):
    """One inverse-CDF sample per row of dist [B, V] (rows sum to 1)."""
    u = rng.random((dist.shape[0], 1))
    return np.minimum((np.cumsum(dist, -1) < u * dist.sum(-1, keepdims=True)).sum(-1),
                      dist.shape[1] - 1)  # fmt: skip


def example_verify(draft, q, p, num_draft, rng, sample_rows=sample_rows):
    """draft [B, K] tokens sampled from q [B, K, V]; p [B, K+1, V] target probs at
    each draft position plus the bonus position; num_draft [B] <= K valid drafts.
    Returns out [B, K+1] (padded with -1) and n_out [B] = accepted + 1."""
    B, K, V = q.shape
    out = np.full((B, K + 1), -1, dtype=np.int64)
    if B == 0:
        return out, np.zeros(0, dtype=np.int64)
    idx = draft[..., None]
    p_tok = np.take_along_axis(p[:, :K], idx, -1)[..., 0]  # [B, K]
    q_tok = np.take_along_axis(q, idx, -1)[..., 0]
    u = rng.random((B, K))
    ok = (u * q_tok < p_tok) & (np.arange(K)[None] < num_draft[:, None])
    n_acc = np.cumprod(ok, axis=1).sum(1) if K else np.zeros(B, np.int64)
    rows = np.arange(B)
    p_j = p[rows, n_acc]  # [B, V]
    rejected = n_acc < num_draft
    q_j = np.where(rejected[:, None], q[rows, np.minimum(n_acc, K - 1)] if K else 0, 0)
    resid = np.maximum(p_j - q_j, 0.0)
    mass = resid.sum(-1, keepdims=True)
    dist = np.where(rejected[:, None] & (mass > 0), resid, p_j)  # p == q: no reject
    final = sample_rows(dist, rng)
    keep = np.arange(K + 1)[None] < n_acc[:, None]
    out[:, :K][keep[:, :K]] = draft[keep[:, :K]]
    out[rows, n_acc] = final
    return out, n_acc + 1


def sample_rows_leq(dist, rng):
    """The fix: ``<=`` in place of ``<`` (a coin of exactly 0 skips past tokens with p = 0)."""
    u = rng.random((dist.shape[0], 1))
    return np.minimum((np.cumsum(dist, -1) <= u * dist.sum(-1, keepdims=True)).sum(-1),
                      dist.shape[1] - 1)  # fmt: skip


def sample_rows_fixed(dist, rng):
    """The whole fix: ``<=``, and never past the last token with mass. ``cumsum`` (summed in order) and
    ``dist.sum`` (NumPy sums pairwise) can differ in the last bit, so ``u * total`` for u just below 1
    can pass the last running sum and count a zero tail (the tile_tail probe's finding)."""
    u = rng.random((dist.shape[0], 1))
    last = dist.shape[1] - 1 - np.argmax(dist[:, ::-1] > 0, axis=-1)  # the last token with mass
    return np.minimum((np.cumsum(dist, -1) <= u * dist.sum(-1, keepdims=True)).sum(-1), last)


# --- the wrappers ----------------------------------------------------------------------------------


class Given:
    """A stand-in for a NumPy Generator that hands out given uniforms, in the order they are drawn."""

    def __init__(self, *draws: np.ndarray) -> None:
        self.draws = [np.asarray(d, dtype=np.float64) for d in draws]

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.draws.pop(0).reshape(shape)


def _args(target_probs, draft_probs, draft_tokens, num_draft) -> tuple[np.ndarray, ...]:
    p = np.asarray(target_probs, dtype=np.float64)  # (B, K+1, V)
    x = np.asarray(draft_tokens, dtype=np.int64)  # (B, K)
    if draft_probs is None:  # a deterministic drafter: q is one-hot on the draft
        q = np.zeros((x.shape[0], x.shape[1], p.shape[-1]))
        np.put_along_axis(q, np.clip(x, 0, None)[..., None], 1.0, axis=-1)
    else:
        q = np.asarray(draft_probs, dtype=np.float64)  # (B, K, V)
    return x, q, p, np.asarray(num_draft, dtype=np.int64)


def _call(sampler: Any, target_probs, draft_probs, draft_tokens, num_draft, rng, uniforms) -> Result:
    x, q, p, j = _args(target_probs, draft_probs, draft_tokens, num_draft)
    src = Given(uniforms[0], uniforms[1]) if uniforms is not None else rng or np.random.default_rng()
    out, n = example_verify(x, q, p, j, src, sample_rows=sampler)
    return Result(out, n, n - 1)


def brief_explicit(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """The brief's verifier, fed explicit uniforms when given (else it draws from ``rng``)."""
    return _call(sample_rows, target_probs, draft_probs, draft_tokens, num_draft, rng, uniforms)


def brief_leq(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """The same with the inverse CDF counting ``cumsum <= u * total`` (the fix issue 27 suggests): the coin
    0 is mended, but u just below 1 can still count a zero tail."""
    return _call(sample_rows_leq, target_probs, draft_probs, draft_tokens, num_draft, rng, uniforms)


def brief_fixed(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None):
    """The same with the whole fix: ``cumsum <= u * total``, never past the last token with mass."""
    return _call(sample_rows_fixed, target_probs, draft_probs, draft_tokens, num_draft, rng, uniforms)


def brief_rng_only(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
    """The brief's verifier as it is: it draws from ``rng`` and takes no uniforms."""
    return _call(sample_rows, target_probs, draft_probs, draft_tokens, num_draft, rng, None)


def sample_match_rng_only(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
    """Sample-and-match (lossless, fewer tokens per step) as a user's function drawing from ``rng``."""
    return verify_sample_match(target_probs, draft_probs, draft_tokens, num_draft, rng=rng)


class Coarse:
    """A generator whose uniforms are floored to multiples of 2^-8, as a bfloat16 coin is: exactly 0 once in 256."""

    def __init__(self, rng: Any) -> None:
        self.rng = rng

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.floor(self.rng.random(shape) * 256) / 256


def brief_coarse_rng(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
    """The brief's verifier drawing coarse coins from ``rng``: its inverse CDF meets a coin of 0 once in 256 draws."""
    return _call(sample_rows, target_probs, draft_probs, draft_tokens, num_draft,
                 Coarse(rng or np.random.default_rng()), None)  # fmt: skip


def brief_coarse_fixed_rng(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):
    """The same coarse coins with the fixed inverse CDF (``<=``): a coin of 0 skips the tokens with p = 0."""
    return _call(sample_rows_leq, target_probs, draft_probs, draft_tokens, num_draft,
                 Coarse(rng or np.random.default_rng()), None)  # fmt: skip
