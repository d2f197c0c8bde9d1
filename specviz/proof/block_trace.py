"""Block verification one step at a time, its exact tokens per step, and its classic mistakes.

# B rows, K drafts (padded width), V vocabulary

- :func:`block_trace`: one row of :func:`specviz.verifiers.block.verify_block` laid out for a drawing:
  per draft the weight w_i, the threshold h_i and the uniform eta_i compared with it, the
  kept count tau, and the distribution the last token came from. The thresholds are
  :func:`specviz.verifiers.block.block_thresholds`' and tau and the tokens are ``verify_block``'s own
  (same uniforms), so the drawing shows the package's numbers, not a re-derivation.
- :func:`block_expected_tokens`: exact expected tokens of one block verification by context
  and draft count on Markov chains, (V+1, K+1) as :func:`specviz.proof.theory.chain_expected_tokens`.
  From step (1) of the proof in :mod:`specviz.verifiers.block`, Pr[tau >= i | x^i] = w_i, so
  E[tokens | c, j] = 1 + sum_{i=1..j} E_q[w_i], the expectation over the drafts.
- :func:`verify_block_variant`: block verification with one step swapped, for the negative
  controls of ``python -m specviz prove --kind block``: the block reference
  (:func:`specviz.verifiers.reference.verify_block`) with one step swapped by
  :func:`~specviz.verifiers.reference.with_step`, the step defined here beside its explanation.
  With ``mistake=None`` it is the reference itself and returns
  :func:`~specviz.verifiers.block.verify_block`'s tokens for the same uniforms
  (tests/test_block_trace.py and tests/test_reference_parity.py check that).

The mistakes (:data:`MISTAKES`):

- ``"residual_from_p"``: after stopping at tau < j the extra token is drawn from p_tau instead
  of (w_tau p_tau - q_tau)^+ normalized. Step (2) of the proof needs the residual: the stop
  at tau with prefix x^tau has probability Q(x^tau) m_tau, and only the residual row spreads
  that mass as max(0, w p - q); p_tau gives tokens that acceptance already covers too often.
- ``"h_without_one_minus_w"``: h_i = m_i / m_i instead of m_i / (m_i + 1 - w_i), i.e. the
  chance 1 - w_i that the block fails after x^i is left out of the denominator. Every
  threshold before the last becomes 1 (0/0 is taken as 1, like the rule's), so tau >= j - 1
  always: the block keeps all but possibly the last draft whatever p says.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers import reference
from ..verifiers.block import block_thresholds, verify_block
from ..verifiers.verify import Uniforms, Verification
from .markov import Drafter, MarkovChain

Mistake = Literal["residual_from_p", "h_without_one_minus_w"]
MISTAKES: tuple[str, ...] = ("residual_from_p", "h_without_one_minus_w")
MAX_SEQUENCES = 200_000  # draft sequences V**K enumerated per context by block_expected_tokens


class BlockTrace(NamedTuple):
    """One block verification, step by step (one row; i counts drafts from 1).

    ``draft_tokens`` (j,): x_1 .. x_j. ``weights`` (j+1,): w_0 .. w_j. ``residual_mass`` (j,):
    m_0 .. m_{j-1}. ``thresholds`` (j,): h_1 .. h_j (h_j = w_j). ``uniforms`` (j,): eta_1 ..
    eta_j. ``passed`` (j,): eta_i < h_i. ``source_row`` (V,): the normalized distribution the
    last token was drawn from: p_j for the bonus, else (w_tau p_tau - q_tau)^+ / m_tau (p_tau
    when m_tau = 0, which only rounding reaches).
    """

    draft_tokens: np.ndarray
    weights: np.ndarray
    residual_mass: np.ndarray
    thresholds: np.ndarray
    uniforms: np.ndarray
    passed: np.ndarray
    tau: int  # drafts kept: the largest i with eta_i < h_i, 0 if none
    bonus: bool  # tau == j: the last token is the bonus, from p_j
    source: str  # in words: where the last token came from
    source_row: np.ndarray
    sample_uniform: float
    token: int  # the last token
    tokens: list[int]  # everything emitted: x_1 .. x_tau, then token


def block_trace(
    target_probs: Any, draft_probs: Any | None, draft_tokens: Any, uniforms: Uniforms | tuple[Any, Any]
) -> BlockTrace:
    """One row of block verification with explicit uniforms, step by step.

    target_probs (j+1, V), draft_probs (j, V) or None (a deterministic drafter), draft_tokens
    (j,), uniforms: ``accept`` (j,) eta_1 .. eta_j and ``sample`` (a number) for the last token.
    """
    T = np.asarray(target_probs, dtype=np.float64)
    x = np.asarray(draft_tokens)
    if x.ndim != 1:
        raise InputError("draft_tokens", "one row of draft tokens, shape (j,)", f"shape {x.shape}")
    j = int(x.shape[0])
    D = None if draft_probs is None else np.asarray(draft_probs, dtype=np.float64)[None]
    if not isinstance(uniforms, tuple) or len(uniforms) != 2:
        raise InputError("uniforms", "a Uniforms(accept, sample) pair", type(uniforms).__name__)
    eta = np.asarray(uniforms[0], dtype=np.float64).reshape(-1)
    if eta.shape != (j,):
        raise InputError("uniforms.accept", f"one uniform per draft, shape ({j},)", f"shape {eta.shape}")
    us = float(np.asarray(uniforms[1], dtype=np.float64).reshape(-1)[0])
    args = (T[None], D, x[None], np.array([j]))
    thr = block_thresholds(*args)
    res = verify_block(*args, uniforms=Uniforms(eta[None], np.array([us])))
    tau, bonus = int(res.num_accepted[0]), bool(res.bonus[0])
    w, m, h = thr.weights[0, : j + 1], thr.residual_mass[0, :j], thr.thresholds[0, :j]
    if bonus:
        row, source = T[tau], f"the bonus: target row p_{tau} (every draft kept)"
    else:
        q = np.eye(T.shape[1])[int(x[tau])] if D is None else D[0, tau]
        r = np.maximum(w[tau] * T[tau] - q, 0.0)  # (V,)
        if m[tau] > 0:
            row, source = r / r.sum(), f"the residual (w_{tau} p_{tau} - q_{tau})+ normalized"
        else:
            row, source = T[tau], f"p_{tau} (the residual has no mass: only rounding gets here)"
    n = int(res.num_tokens[0])
    return BlockTrace(draft_tokens=x.astype(np.int64), weights=w, residual_mass=m, thresholds=h, uniforms=eta,
                      passed=eta < h, tau=tau, bonus=bonus, source=source, source_row=row, sample_uniform=us,
                      token=int(res.tokens[0, tau]), tokens=[int(t) for t in res.tokens[0, :n]])  # fmt: skip


def block_expected_tokens(target: MarkovChain, drafter: Drafter, K: int) -> np.ndarray:
    """Exact expected tokens of one block verification: (V+1, K+1), row c the context (0 = start,
    t + 1 = after token t), column j the draft count; E = 1 + sum_{i<=j} E_q[w_i].

    ``drafter.mode``: "sample" enumerates the V**K draft sequences by their probability;
    "argmax" follows the drafter's single argmax path with no q reported.
    """
    V, K = target.V, int(K)
    if drafter.mode not in ("sample", "argmax"):
        raise InputError("drafter", "a 'sample' or 'argmax' drafter", repr(drafter.mode))
    if drafter.mode == "sample" and V**K > MAX_SEQUENCES:
        raise InputError("K", f"at most {MAX_SEQUENCES:,} draft sequences V**K", f"{V}**{K}")
    out = np.ones((V + 1, K + 1))
    for c in range(-1, V):
        if drafter.mode == "sample":
            x = np.array(list(itertools.product(range(V), repeat=K)), dtype=np.int64).reshape(-1, K)  # (A, K)
        else:
            path, tok = [], c
            for _ in range(K):
                tok = int(np.argmax(drafter.chain.probs(tok)))
                path.append(tok)
            x = np.array([path], dtype=np.int64).reshape(1, K)
        A = x.shape[0]
        prev = np.concatenate([np.full((A, 1), c), x], axis=1)  # (A, K+1) the context of each row
        T = target.probs(prev)  # (A, K+1, V)
        if drafter.mode == "sample":
            Q = drafter.chain.probs(prev[:, :K])  # (A, K, V)
            prob = np.prod(np.take_along_axis(Q, x[:, :, None], axis=2)[:, :, 0], axis=1) if K else np.ones(A)
            keep = prob > 0
            x, T, Q, prob = x[keep], T[keep], Q[keep], prob[keep]
        else:
            Q, prob = None, np.ones(1)
        w = block_thresholds(T, Q, x, np.full(x.shape[0], K)).weights  # (A, K+1)
        out[c + 1, 1:] = 1.0 + np.cumsum(prob @ w[:, 1:])
    return out


def extra_from_p(p: np.ndarray, res: np.ndarray, m: np.ndarray) -> np.ndarray:
    """residual_from_p: the token after a stop at tau < j comes from p_tau, not the residual."""
    return p


def threshold_without_one_minus_w(m: np.ndarray, w: np.ndarray) -> np.ndarray:
    """h_without_one_minus_w: h_i = m_i / m_i, 1 (0/0 taken as 1, like the rule's) for every draft
    before the last."""
    return np.ones_like(m)


# Each mistake is the block reference (specviz.verifiers.reference.verify_block) with one step swapped.
VARIANTS = {
    "residual_from_p": reference.with_step(reference.verify_block, "block_residual_from_p", extra=extra_from_p),
    "h_without_one_minus_w": reference.with_step(reference.verify_block, "block_h_no_1_minus_w",
                                                 threshold=threshold_without_one_minus_w),
}  # fmt: skip


def verify_block_variant(
    target_probs: Any,
    draft_probs: Any | None,
    draft_tokens: Any,
    num_draft: Any,
    *,
    rng: np.random.Generator | None = None,
    uniforms: Uniforms | tuple[Any, Any] | None = None,
    validate: bool = True,
    mistake: Mistake | None = None,
) -> Verification:
    """Block verification with one step swapped by ``mistake`` (:data:`VARIANTS`; see the module docstring).

    Shapes and result as :func:`specviz.verifiers.block.verify_block`. ``mistake=None`` is the block
    reference, :func:`specviz.verifiers.reference.verify_block`, which gives ``verify_block``'s tokens.
    """
    if mistake is not None and mistake not in MISTAKES:
        raise InputError("mistake", "None or one of " + ", ".join(MISTAKES), repr(mistake))
    fn = reference.verify_block if mistake is None else VARIANTS[mistake]
    return fn(target_probs, draft_probs, draft_tokens, num_draft, rng=rng, uniforms=uniforms, validate=validate)


def seeded_block_trace(target_probs: Any, draft_probs: Any, K: int, seed: int) -> BlockTrace:
    """:func:`block_trace` of one block on a context-free pair: K drafts drawn i.i.d. from
    ``draft_probs`` (V,), then eta_1 .. eta_K and the sample uniform, all from
    ``numpy.random.default_rng([seed, 2])``; target rows p (V,) at every position."""
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    if p.ndim != 1 or q.shape != p.shape:
        raise InputError("draft_probs", f"a row of the target's length {p.shape[-1] if p.ndim else 0}", str(q.shape))
    if int(K) < 1:
        raise InputError("K", "at least 1 draft", str(K))
    rng = np.random.default_rng([int(seed), 2])
    x = rng.choice(p.shape[0], size=int(K), p=q / q.sum())
    eta, us = rng.random(int(K)), float(rng.random())
    return block_trace(np.tile(p, (int(K) + 1, 1)), np.tile(q, (int(K), 1)), x, Uniforms(eta, us))


def trace_rows(trace: BlockTrace) -> list[dict[str, Any]]:
    """The trace as table rows, one per draft i = 1 .. j: token, w_i, h_i, eta_i, passed, kept."""
    return [{"draft i": i + 1, "token x_i": int(trace.draft_tokens[i]), "weight w_i": float(trace.weights[i + 1]),
             "threshold h_i": float(trace.thresholds[i]), "uniform eta_i": float(trace.uniforms[i]),
             "eta_i < h_i": bool(trace.passed[i]), "kept": i < trace.tau}
            for i in range(len(trace.thresholds))]  # fmt: skip
