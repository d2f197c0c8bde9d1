"""End-to-end draft-and-verify rounds over Markov chains, producing token sequences.

# n sequences, L tokens each, K drafts per round (padded width), V vocabulary, A active rows

Each round, every unfinished sequence drafts ``num_draft`` tokens from the drafter (each
conditioned on the one before), the target's distributions at those contexts are laid out
as a padded batch, and one verifier call decides what is emitted. Positions past a row's
draft count hold deliberately wrong distributions and tokens (:func:`garbage_token`), so a
verifier that reads past the count produces a visibly wrong law instead of passing by luck.

Where the time goes: at the sizes the app and ``prove`` use (V = 4, K <= 3, up to 10^6
sequences) the verifier call is ~80% of a run once the rest is done this way: sequences run
:data:`CHUNK` at a time so a round's arrays stay in cache; the padded tensors are one
``np.take`` of precomputed table rows into buffers reused every round; drafts come from
precomputed inverse-CDF tables; statistics are integer bincounts. NumPy charges ~20-30 ns
per row for broadcast comparisons like ``pos[None, :] < j[:, None]`` and for reductions
over a short last axis, so masks here are lookup rows gathered by count
(``benchmarks/bench_sim.py`` measures all of it against the previous version).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.verify import verify_greedy
from .markov import START, Drafter, MarkovChain

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


CHUNK = 1 << 14  # sequences simulated together: a round's padded batch, (K+1)*V float64 per row, stays in cache


def garbage_token(V: int) -> int:
    """The token that fills unused draft slots: the last id, a valid but wrong token."""
    return V - 1


class _Tables:
    """What the rounds read from the chains, laid out once per run.

    Row c+1 of ``target`` and ``draft`` is the chain's distribution after token c (row 0 after
    START, as in :class:`MarkovChain`), and the extra row V+1 is one-hot on
    :func:`garbage_token`: a round's padded tensors are then a single gather of table rows by
    *code* (the context + 1, or V+1 for a slot past the row's draft count), with no per-call
    probability lookups and no masked writes.
    """

    def __init__(self, target: MarkovChain, drafter: Drafter, draft_probs: bool = True) -> None:
        V = target.V
        self.V, self.g = V, garbage_token(V)
        self.pad_row = V + 1  # the garbage row's code
        garbage = np.eye(V)[self.g][None, :]  # (1, V)
        self.target = np.concatenate([target.table, garbage])  # (V+2, V)
        reports = drafter.reports_q and draft_probs  # greedy verification reads no q
        self.draft = np.concatenate([drafter.chain.table, garbage]) if reports else None  # (V+2, V)
        self.icdf = drafter.chain.inverse_cdf() if drafter.samples else None
        self.argmax = np.argmax(drafter.chain.table, axis=1)  # (V+1,) ties to the lowest id, as np.argmax

    def drafts(self, ctx: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
        """K drafts per row (A, K), each conditioned on the previous one; one uniform per sampled draft."""
        A: int = ctx.shape[0]
        out = np.empty((A, K), dtype=np.int64)
        code = ctx + 1  # (A,) table row of the current context
        for i in range(K):  # K sequential drafting steps, vectorized over rows
            if self.icdf is not None:
                out[:, i] = self.icdf.draw(code, rng.random(A))
            else:
                out[:, i] = self.argmax.take(code)
            code = out[:, i] + 1
        return out

    def build(
        self,
        ctx: np.ndarray,
        drafts: np.ndarray,
        num_draft: np.ndarray,
        target_out: np.ndarray | None = None,
        draft_out: np.ndarray | None = None,
    ) -> Round:
        """The padded batch for drafts (A, K) after contexts ctx (A,), optionally into buffers.

        ``target_out`` (A, K+1, V) and ``draft_out`` (A, K, V), when given, are overwritten and
        returned inside the Round: a run reuses them every round instead of faulting in fresh
        pages for two large temporaries.
        """
        A, K = drafts.shape
        codes = np.empty((A, K + 1), dtype=np.int64)  # (A, K+1) table row of each position: its context + 1
        codes[:, 0] = ctx
        codes[:, 1:] = drafts
        codes += 1
        # (A, K) the draft row at position i has the same context; a contiguous copy, because NumPy
        # spends ~5 ns per element on a strided (A, K) view of an (A, K+1) array.
        draft_codes = codes[:, :K].copy() if self.draft is not None else None
        tokens = drafts
        if A and int(num_draft.min()) < K:  # ragged: slots past a row's count get the garbage row
            # np.maximum with a lookup row per count, instead of masks from the broadcast comparison
            # pos[None, :] <= num_draft[:, None], which costs NumPy ~30 ns per row at K = 3.
            np.maximum(codes, _padding(K + 1, self.pad_row).take(num_draft + 1, axis=0), out=codes)
            if draft_codes is not None:
                np.maximum(draft_codes, _padding(K, self.pad_row).take(num_draft, axis=0), out=draft_codes)
            tokens = np.maximum(drafts, _padding(K, self.g).take(num_draft, axis=0))
        # mode="clip" lets take write straight into out= (codes are in range by construction).
        target_probs = np.take(self.target, codes, axis=0, out=target_out, mode="clip")
        draft_probs = None
        if self.draft is not None and draft_codes is not None:  # both or neither
            draft_probs = np.take(self.draft, draft_codes, axis=0, out=draft_out, mode="clip")
        return Round(target_probs, draft_probs, tokens, num_draft)


@functools.cache
def _padding(width: int, value: int) -> np.ndarray:
    """(width+2, width) int64 lookup: row m is 0 before position m and ``value`` from m on.

    ``np.maximum(x, _padding(width, value)[m])`` replaces the entries of x from position m on
    by ``value`` when ``value`` is at least every entry of x: the garbage row's code V+1 is
    above every context code 0..V, and the garbage token V-1 is the largest token id.
    """
    table = np.where(_below(width), 0, value).astype(np.int64)
    table.flags.writeable = False  # shared by every caller
    return table


@functools.cache
def _below(width: int) -> np.ndarray:
    """(width+2, width) bool lookup: row m is ``arange(width) < m`` (rows past width are all True)."""
    m = np.minimum(np.arange(width + 2), width)
    table = np.arange(width)[None, :] < m[:, None]
    table.flags.writeable = False  # shared by every caller
    return table


def build_round(
    target: MarkovChain, drafter: Drafter, ctx: np.ndarray, drafts: np.ndarray, num_draft: np.ndarray
) -> Round:
    """Lay out the target and draft rows for drafts (A, K) made after contexts ctx (A,).

    Positions past ``num_draft`` get a one-hot distribution on :func:`garbage_token` in both
    the target and the draft tensors and that token as the draft: a verifier that reads them
    accepts a wrong token with certainty.
    """
    ctx = np.asarray(ctx, dtype=np.int64)
    drafts = np.asarray(drafts, dtype=np.int64)
    num_draft = np.asarray(num_draft, dtype=np.int64)
    V = target.V
    for name, x, low in (("ctx", ctx, START), ("drafts", drafts, START), ("num_draft", num_draft, 0)):
        high = drafts.shape[1] if name == "num_draft" else V - 1
        if x.size and (int(x.min()) < low or int(x.max()) > high):
            raise InputError(name, f"integers in [{low}, {high}]", f"range [{int(x.min())}, {int(x.max())}]")
    return _Tables(target, drafter).build(ctx, drafts, num_draft)


def sample_rows(rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one token per row: rows (A, V) probabilities, u (A,) -> (A,)."""
    cdf = np.cumsum(rows, axis=1)
    tok = np.count_nonzero(cdf <= (u * cdf[:, -1])[:, None], axis=1)
    last = rows.shape[1] - 1 - np.argmax(rows[:, ::-1] > 0, axis=1)  # last token with mass
    return np.minimum(tok, last).astype(np.int64)


def draft_tokens(drafter: Drafter, ctx: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """K drafts per row (A, K), each conditioned on the previous one."""
    tables = _Tables(drafter.chain, drafter)
    return tables.drafts(np.asarray(ctx, dtype=np.int64), K, rng)


def _verifier_call(verifier: Verifier) -> Verifier:
    """The verifier, told to skip its input checks when it has a ``validate`` keyword.

    Every batch is rows of validated chains and one-hot garbage rows, laid out by this
    module, so the checks could only re-confirm that; they are a fifth of the verifier's time
    at V = 4. The rule under test runs unchanged. A user's verifier without the keyword is
    called exactly as :func:`specviz.verify` documents, with ``rng=`` alone.
    """
    try:
        params = inspect.signature(verifier).parameters
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return verifier
    if "validate" in params:
        return functools.partial(verifier, validate=False)
    return verifier


class _Tally:
    """Every verification counted by (context, draft count, accepted, emitted): one bincount a round.

    ``counts[c, j, a, t]``: rows whose context code is c (ctx + 1; 0 for all when no
    expectation table is kept), with j drafts, a - 1 drafts accepted (clipped to -1..K, so a
    verifier's odd count still lands in a cell) and t tokens emitted. Every per-round statistic
    of :class:`Simulation` is a sum over these cells.
    """

    def __init__(self, V: int, K: int, with_expected: bool) -> None:
        self.K, self.with_expected = K, with_expected
        self.shape = (V + 1 if with_expected else 1, K + 1, K + 2, K + 2)
        self.counts = np.zeros(int(np.prod(self.shape)), dtype=np.int64)

    def add(self, ctx: np.ndarray, j: np.ndarray, num: np.ndarray, n_acc: np.ndarray) -> None:
        K = self.K
        code = j * (K + 2) + np.clip(n_acc, -1, K) + 1  # (A,) cell, digit by digit
        if self.with_expected:
            code += (ctx + 1) * ((K + 1) * (K + 2))
        code *= K + 2
        code += num
        self.counts += np.bincount(code, minlength=self.counts.size)

    def summary(self, expected: np.ndarray | None) -> dict[str, Any]:
        """The :class:`Simulation` fields other than the sequences."""
        K = self.K
        cnt = self.counts.reshape(self.shape)
        num = cnt.sum(axis=(0, 1, 2))  # (K+2,) rows by tokens emitted
        ja = cnt.sum(axis=(0, 3))  # (K+1, K+2) rows by draft count and accepted + 1
        calls = int(num.sum())
        t, jj, a = np.arange(K + 2), np.arange(K + 1), np.arange(K + 2) - 1
        mean = float(t @ num) / max(calls, 1)
        var = max(float((t * t) @ num) / max(calls, 1) - mean**2, 0.0)
        # Position i was accepted where n_acc > i, and tested where i <= n_acc and i < j.
        accepted = np.array([ja[:, a > i].sum() for i in range(K)], dtype=np.int64)
        tested = np.array([ja[jj > i][:, a >= i].sum() for i in range(K)], dtype=np.int64)
        expected_mean = float("nan")
        if expected is not None:
            met = cnt.sum(axis=(2, 3))  # (V+1, K+1) rows by context and draft count
            seen = met > 0  # a table may hold NaN where a (context, count) is never met
            expected_mean = float((met[seen] * expected[seen]).sum()) / max(calls, 1)
        return {
            "num_verifications": calls,
            "tokens_per_round": mean,
            "tokens_per_round_se": float(np.sqrt(var / max(calls, 1))),
            "mean_num_draft": float(jj @ ja.sum(axis=1)) / max(calls, 1),
            "accept_by_position": accepted / np.maximum(tested, 1),
            "tested_by_position": tested,
            "expected_tokens_per_round": expected_mean,
        }


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
    chunk: int = CHUNK,
) -> Simulation:
    """Generate n sequences of L tokens by repeated draft-and-verify rounds.

    ``verifier`` has the signature of :func:`specviz.verify` (it is called with ``rng=``,
    and with ``validate=False`` when it takes that keyword: see :func:`_verifier_call`);
    with ``greedy=True`` the target is decoded at temperature 0 with
    :func:`specviz.verify_greedy` and ``verifier`` is ignored. ``ragged`` draws each row's
    draft count uniformly from 0..K every round; otherwise every row drafts K.
    ``expected`` (V+1, K+1) is :func:`specviz.proof.theory.chain_expected_tokens` for the pair.

    Sequences are simulated ``chunk`` at a time, each chunk round after round until all its
    sequences are complete: the sequences are independent, so this changes which uniform
    feeds which draw but not the law, and keeps every array of a round in cache. The padded
    probability tensors live in buffers rewritten every round: a verifier that keeps them past
    its call must copy them.
    """
    for name, value, low in (("n", n, 0), ("L", L, 1), ("K", K, 0), ("chunk", chunk, 1)):
        if int(value) < low:
            raise InputError(name, f"an integer >= {low}", str(value))
    n, L, K = int(n), int(L), int(K)
    if drafter.chain.V != target.V:
        raise InputError("drafter", f"a chain over V = {target.V} tokens", f"V = {drafter.chain.V}")
    V = target.V
    if expected is not None:
        expected = np.asarray(expected, dtype=np.float64)
        if expected.shape != (V + 1, K + 1):
            raise InputError("expected", f"shape (V+1, K+1) = ({V + 1}, {K + 1})", f"shape {expected.shape}")
    call = _verifier_call(verifier)
    tables = _Tables(target, drafter, draft_probs=not greedy)
    tally = _Tally(V, K, expected is not None)
    C = max(1, min(int(chunk), n))
    target_buf = np.empty((C, K + 1, V))  # reused by every round of every chunk
    draft_buf = np.empty((C, K, V)) if tables.draft is not None else None
    W = L + K + 1  # a row's tokens so far, plus room for one more round's K+1
    steps = np.tile(np.arange(K + 1), C)  # (C*(K+1),) offsets of a round's tokens after each start
    seqs = np.empty((n, L), dtype=np.int64)
    for c0 in range(0, n, C):
        m = min(C, n - c0)
        out = np.full((m, W), -1, dtype=np.int64)  # (m, W) tokens of this chunk's sequences
        flat = out.reshape(-1)
        length = np.zeros(m, dtype=np.int64)
        active = np.arange(m)
        for _ in range(L * (K + 2) + 1):  # every round emits >= 1 token for a sound verifier
            A = active.size
            if A == 0:
                break
            ln = length[active]
            start = active * W + ln  # (A,) where each active row's next token goes
            ctx = np.where(ln > 0, flat[start - 1], START)  # (A,)
            j = rng.integers(0, K + 1, size=A) if ragged else np.full(A, K, dtype=np.int64)
            rnd = tables.build(ctx, tables.drafts(ctx, K, rng), j, target_buf[:A],
                               None if draft_buf is None else draft_buf[:A])  # fmt: skip
            if greedy:
                res = verify_greedy(rnd.target_probs, rnd.draft_tokens, j)
            else:
                res = call(rnd.target_probs, rnd.draft_probs, rnd.draft_tokens, j, rng=rng)
            toks, num = _check_result(res, A, K, V)
            n_acc = np.asarray(res.num_accepted).astype(np.int64, copy=False)
            if n_acc.shape != (A,):
                raise InputError("verifier", f"num_accepted of shape ({A},)", f"shape {n_acc.shape}")
            tally.add(ctx, j, num, n_acc)
            # All K+1 slots are written; those past num_tokens are overwritten by the next round
            # or lie past L, so only emitted tokens reach the sequences.
            flat[np.repeat(start, K + 1) + steps[: A * (K + 1)]] = toks.reshape(-1)
            length[active] = ln + num
            active = active[ln + num < L]
        else:
            raise InputError("verifier", "at least one token emitted per round", "rounds that emit none")
        seqs[c0 : c0 + m] = out[:, :L]
    return Simulation(sequences=seqs, **tally.summary(expected))


def _check_result(res: Any, A: int, K: int, V: int) -> tuple[np.ndarray, np.ndarray]:
    """A verifier's tokens (A, K+1) and num_tokens (A,), checked so a broken one fails loudly."""
    try:
        toks, num = np.asarray(res.tokens), np.asarray(res.num_tokens)
    except AttributeError as e:
        raise InputError("verifier", "a result with .tokens and .num_tokens", type(res).__name__) from e
    for name, x in (("tokens", toks), ("num_tokens", num)):  # float tokens would be truncated silently
        if x.dtype.kind not in "iu":
            raise InputError("verifier", f"integer {name} (an integer dtype)", f"{name} of dtype {x.dtype}")
    num = num.astype(np.int64, copy=False)
    if toks.shape != (A, K + 1) or num.shape != (A,):
        raise InputError("verifier", f"tokens ({A}, {K + 1}) and num_tokens ({A},)",
                         f"{toks.shape} and {num.shape}")  # fmt: skip
    if num.size and (num.min() < 0 or num.max() > K + 1):
        raise InputError("verifier", f"num_tokens in [0, {K + 1}]", f"{num.min()}..{num.max()}")
    emitted = _below(K + 1).take(num, axis=0)  # (A, K+1) slots holding emitted tokens
    if (emitted & ((toks < 0) | (toks >= V))).any():
        raise InputError("verifier", f"emitted tokens in [0, {V})", "out-of-range tokens")
    return toks, num
