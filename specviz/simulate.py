"""End-to-end draft-and-verify rounds over Markov chains, producing token sequences.

# n sequences, L tokens each, K drafts per round (padded width), V vocabulary, A active rows

Each round, every unfinished sequence drafts ``num_draft`` tokens from the drafter (each
conditioned on the one before), the target's distributions at those contexts are laid out
as a padded batch, and one verifier call decides what is emitted. Positions past a row's
draft count hold deliberately wrong distributions and tokens (:data:`GARBAGE`), so a
verifier that reads past the count produces a visibly wrong law instead of passing by luck.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .errors import InputError
from .markov import START, Drafter, MarkovChain
from .verify import verify_greedy

Verifier = Callable[..., Any]


class Round(NamedTuple):
    """One padded verifier batch built from contexts and drafts."""

    target_probs: np.ndarray  # (A, K+1, V)
    draft_probs: np.ndarray | None  # (A, K, V)
    draft_tokens: np.ndarray  # (A, K)
    num_draft: np.ndarray  # (A,)


class Simulation(NamedTuple):
    """Sequences and per-round statistics of repeated draft-and-verify rounds."""

    sequences: np.ndarray  # (n, L) int64
    num_verifications: int  # verifier rows processed (one per sequence per round)
    tokens_per_round: float  # mean tokens emitted per verification (before truncation to L)
    tokens_per_round_se: float  # its standard error
    mean_num_draft: float  # mean drafts per verification
    accept_by_position: np.ndarray  # (K,) accepted / tested at each draft position
    tested_by_position: np.ndarray  # (K,) how many drafts were tested at each position
    expected_tokens_per_round: float  # mean of expected[ctx, num_draft] over the rounds run; NaN without it


def garbage_token(V: int) -> int:
    """The token that fills unused draft slots: the last id, a valid but wrong token."""
    return V - 1


def build_round(
    target: MarkovChain, drafter: Drafter, ctx: np.ndarray, drafts: np.ndarray, num_draft: np.ndarray
) -> Round:
    """Lay out the target and draft rows for drafts (A, K) made after contexts ctx (A,).

    Positions past ``num_draft`` get a one-hot distribution on :func:`garbage_token` in both
    the target and the draft tensors and that token as the draft: a verifier that reads them
    accepts a wrong token with certainty.
    """
    A, K = drafts.shape
    V = target.V
    g = garbage_token(V)
    pos = np.arange(K + 1)
    ctxs = np.concatenate([ctx[:, None], drafts], axis=1)  # (A, K+1) context of each position
    valid_t = pos[None, :] <= num_draft[:, None]  # (A, K+1) target rows that are read
    ctxs = np.where(valid_t, ctxs, START)  # keep garbage contexts in range
    target_probs = target.probs(ctxs)  # (A, K+1, V)
    target_probs[~valid_t] = np.eye(V)[g]
    valid = pos[None, :K] < num_draft[:, None]  # (A, K) draft slots that are read
    tokens = np.where(valid, drafts, g)
    draft_probs = None
    if drafter.reports_q:
        draft_probs = drafter.chain.probs(ctxs[:, :K])  # (A, K, V)
        draft_probs[~valid] = np.eye(V)[g]
    return Round(target_probs, draft_probs, tokens, num_draft)


def sample_rows(rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one token per row: rows (A, V) probabilities, u (A,) -> (A,)."""
    cdf = np.cumsum(rows, axis=1)
    tok = np.count_nonzero(cdf <= (u * cdf[:, -1])[:, None], axis=1)
    last = rows.shape[1] - 1 - np.argmax(rows[:, ::-1] > 0, axis=1)  # last token with mass
    return np.minimum(tok, last).astype(np.int64)


def draft_tokens(drafter: Drafter, ctx: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """K drafts per row (A, K), each conditioned on the previous one."""
    A = ctx.shape[0]
    out = np.empty((A, K), dtype=np.int64)
    prev = ctx
    for i in range(K):  # K sequential drafting steps, vectorized over rows
        rows = drafter.chain.probs(prev)  # (A, V)
        prev = sample_rows(rows, rng.random(A)) if drafter.samples else np.argmax(rows, axis=1)
        out[:, i] = prev
    return out


def generate(
    verifier: Verifier,
    target: MarkovChain,
    drafter: Drafter,
    *,
    n: int,
    L: int,
    K: int,
    rng: np.random.Generator,
    ragged: bool = False,
    greedy: bool = False,
    expected: np.ndarray | None = None,
) -> Simulation:
    """Generate n sequences of L tokens by repeated draft-and-verify rounds.

    ``verifier`` has the signature of :func:`specviz.verify` (it is called with ``rng=``);
    with ``greedy=True`` the target is decoded at temperature 0 with
    :func:`specviz.verify_greedy` and ``verifier`` is ignored. ``ragged`` draws each row's
    draft count uniformly from 0..K every round; otherwise every row drafts K.
    """
    for name, value, low in (("n", n, 0), ("L", L, 1), ("K", K, 0)):
        if int(value) < low:
            raise InputError(name, f"an integer >= {low}", str(value))
    if drafter.chain.V != target.V:
        raise InputError("drafter", f"a chain over V = {target.V} tokens", f"V = {drafter.chain.V}")
    V = target.V
    seqs = np.full((n, L), -1, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    tok_sum = tok_sq = 0.0
    draft_sum = 0
    expected_sum = 0.0
    calls = 0
    accepted = np.zeros(K, dtype=np.int64)
    tested = np.zeros(K, dtype=np.int64)
    for _ in range(L * (K + 2) + 1):  # every round emits >= 1 token for a sound verifier
        active = np.flatnonzero(length < L)
        if active.size == 0:
            break
        A = active.size
        last = seqs[active, np.maximum(length[active] - 1, 0)]
        ctx = np.where(length[active] > 0, last, START)  # (A,)
        j = rng.integers(0, K + 1, size=A) if ragged else np.full(A, K, dtype=np.int64)
        rnd = build_round(target, drafter, ctx, draft_tokens(drafter, ctx, K, rng), j)
        if greedy:
            res = verify_greedy(rnd.target_probs, rnd.draft_tokens, j)
        else:
            res = verifier(rnd.target_probs, rnd.draft_probs, rnd.draft_tokens, j, rng=rng)
        toks, num = _check_result(res, A, K, V)
        calls += A
        tok_sum += float(num.sum())
        tok_sq += float((num.astype(np.float64) ** 2).sum())
        draft_sum += int(j.sum())
        if expected is not None:
            expected_sum += float(expected[ctx + 1, j].sum())
        n_acc = np.asarray(res.num_accepted)
        pos = np.arange(K)
        tested += ((pos[None, :] <= n_acc[:, None]) & (pos[None, :] < j[:, None])).sum(0)
        accepted += (pos[None, :] < n_acc[:, None]).sum(0)
        for t in range(K + 1):  # append emitted tokens, truncating at L
            take = (t < num) & (length[active] + t < L)
            rows = active[take]
            seqs[rows, length[rows] + t] = toks[take, t]
        length[active] = np.minimum(length[active] + num, L)
    else:
        raise InputError("verifier", "at least one token emitted per round", "rounds that emit none")
    mean = tok_sum / max(calls, 1)
    var = max(tok_sq / max(calls, 1) - mean**2, 0.0)
    return Simulation(
        sequences=seqs,
        num_verifications=calls,
        tokens_per_round=mean,
        tokens_per_round_se=float(np.sqrt(var / max(calls, 1))),
        mean_num_draft=draft_sum / max(calls, 1),
        accept_by_position=accepted / np.maximum(tested, 1),
        tested_by_position=tested,
        expected_tokens_per_round=expected_sum / max(calls, 1) if expected is not None else float("nan"),
    )


def _check_result(res: Any, A: int, K: int, V: int) -> tuple[np.ndarray, np.ndarray]:
    """A verifier's tokens (A, K+1) and num_tokens (A,), checked so a broken one fails loudly."""
    try:
        toks = np.asarray(res.tokens)
        num = np.asarray(res.num_tokens).astype(np.int64)
    except AttributeError as e:
        raise InputError("verifier", "a result with .tokens and .num_tokens", type(res).__name__) from e
    if toks.shape != (A, K + 1) or num.shape != (A,):
        raise InputError("verifier", f"tokens ({A}, {K + 1}) and num_tokens ({A},)",
                         f"{toks.shape} and {num.shape}")  # fmt: skip
    if num.size and (num.min() < 0 or num.max() > K + 1):
        raise InputError("verifier", f"num_tokens in [0, {K + 1}]", f"{num.min()}..{num.max()}")
    emitted = np.arange(K + 1)[None, :] < num[:, None]
    if emitted.any() and ((toks[emitted] < 0) | (toks[emitted] >= V)).any():
        raise InputError("verifier", f"emitted tokens in [0, {V})", "out-of-range tokens")
    return toks, num
