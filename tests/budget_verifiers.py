"""Verifiers for ``prove --budget`` and ``--vocab`` errors, loaded as ``tests.budget_verifiers:NAME``.

# B rows, K drafts (padded width), V vocabulary

``row_loop`` is the residual rule written the way slow real code is: a plain Python loop over
rows and positions, one scalar at a time, drawing its coins from ``rng`` unless ``uniforms=``
are given. It is correct; what it costs is the point (tens of microseconds per row, where
:func:`specviz.verify` costs a fraction of one).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Result(NamedTuple):
    tokens: np.ndarray  # (B, K+1) emitted tokens, -1 after num_tokens
    num_tokens: np.ndarray  # (B,)
    num_accepted: np.ndarray  # (B,)


def _draw(w: list[float], u: float) -> int:
    """Inverse CDF over weights ``w`` (positive total) with coin u in [0, 1): the first token
    whose running sum passes u * total, never a token of weight 0."""
    total = sum(w)
    run = 0.0
    last = max(i for i, x in enumerate(w) if x > 0)
    for i, x in enumerate(w):
        run += x
        if x > 0 and run > u * total:
            return i
    return last


def row_loop(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *,
             rng: np.random.Generator | None = None, uniforms: Any = None) -> Result:  # fmt: skip
    """The residual rule, one row and one position at a time in plain Python."""
    for name, a in (("target_probs", target_probs), ("draft_probs", draft_probs)):
        if a is not None and not np.isfinite(np.asarray(a, dtype=np.float64)).all():
            raise ValueError(f"{name}: expected finite probabilities, got NaN or infinity")
    P = np.asarray(target_probs, dtype=np.float64).tolist()  # (B, K+1, V)
    X = np.asarray(draft_tokens).tolist()  # (B, K)
    J = np.asarray(num_draft).tolist()  # (B,)
    Q = None if draft_probs is None else np.asarray(draft_probs, dtype=np.float64).tolist()  # (B, K, V)
    B, K = len(P), np.asarray(target_probs).shape[1] - 1
    if uniforms is None:
        rng = np.random.default_rng() if rng is None else rng
        ua, us = rng.random((B, K)).tolist(), rng.random(B).tolist()
    else:
        ua, us = np.asarray(uniforms[0]).tolist(), np.asarray(uniforms[1]).tolist()
    tokens = [[-1] * (K + 1) for _ in range(B)]
    num, acc = [0] * B, [0] * B
    for b in range(B):
        i = 0
        while i < J[b]:
            x = X[b][i]
            q = [0.0] * len(P[b][i]) if Q is None else Q[b][i]
            if Q is None:
                q[x] = 1.0
            if ua[b][i] * q[x] < P[b][i][x]:  # accept draft i
                tokens[b][i] = x
                i += 1
                continue
            res = [max(0.0, p - qq) for p, qq in zip(P[b][i], q, strict=True)]  # the residual
            tokens[b][i] = _draw(res if sum(res) > 0 else P[b][i], us[b])
            break
        else:  # every draft kept: the bonus from row J[b]
            tokens[b][i] = _draw(P[b][i], us[b])
        acc[b], num[b] = i, i + 1
    return Result(np.array(tokens, dtype=np.int64), np.array(num, dtype=np.int64), np.array(acc, dtype=np.int64))


def raises(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *,
           rng: np.random.Generator | None = None) -> Result:  # fmt: skip
    """Draws its own randomness (no ``uniforms=``) and raises on every call."""
    return _fails(np.asarray(target_probs).shape)


def _fails(shape: tuple[int, ...]) -> Result:
    raise RuntimeError(f"out of cheese at shape {shape}")
