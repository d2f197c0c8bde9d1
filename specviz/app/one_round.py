"""One round, step by step: the coins of each verification laid out, and the same coins under a mistake.

# R rounds, K drafts, V vocabulary

Every position has target p and draft q (a context-free pair), so every emitted token follows
p exactly under the rule, and the histogram of all tokens of R rounds converges to p: by the
renewal-reward theorem its limit is E[count of x per round] / E[tokens per round], and
E[count of x per round] = sum_t P(position t is emitted) p(x), because whether position t is
reached depends only on the tokens before it. The counts are those of an i.i.d. p stream stopped
at the end of a round (a stopping time), so by the martingale central limit theorem Pearson's
statistic on them is asymptotically chi-square with V - 1 degrees of freedom, as for a fixed N.

Rounds are reproducible from the seed alone: round i reads row i of one array of uniforms,
``(R, 2K + 1)``, drawn in a single call (row-major, so the first r rows are the same for any
R >= r): K coins for the drafts (inverse CDF of q), K acceptance coins, one coin for the
replacement or bonus draw. The mistake runs on the very same :class:`Coins`: same drafts, same
:class:`~specviz.verifiers.verify.Uniforms`, one step swapped.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import stats, theory
from ..proof.bugs import BUGS
from ..verifiers.verify import Uniforms, Verification, verify
from .position import PRESETS as PRESETS  # the page's choice of (p, q), re-exported
from .position import draw_iid, preset

ENGINE_MISTAKES = ("q_unprocessed", "target_unprocessed", "shared_noise_stream")

MAX_ROUNDS = 20_000  # rounds one page keeps: one verify call of 20,000 rows answers a click in milliseconds
MAX_K = 6  # drafts per round: the coin lines stay readable on a projector
# The mistakes of one round's own steps (coins, first rejection, residual, bonus), each the reference with
# one step swapped inside the verifier. Left out: the drafter's mistake, ragged rows, and the engine mistakes
# (un-processed rows, the drafter's noise stream reused), which are about what feeds the round.
MISTAKES: tuple[str, ...] = tuple(
    n for n, b in BUGS.items() if b.drafter_mode is None and not b.needs_ragged and n not in ENGINE_MISTAKES
)
STATES = ("accepted", "rejected", "not reached")  # the rule's own account of each draft
COIN_STATES = ("passes", "fails")  # a mistake's trace: each coin's own verdict, u·q(x) < p(x) or not


class Coins(NamedTuple):
    """The randomness of R rounds: what the drafter drew and every coin the verifier may read."""

    drafts: np.ndarray  # (R, K) int64, drawn from q by inverse CDF
    accept: np.ndarray  # (R, K) float64, one acceptance coin per draft position
    sample: np.ndarray  # (R,) float64, the coin of the replacement or bonus draw


def pair(name: str = PRESETS[0], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) of a preset of the one-position page, as float64 arrays (V,)."""
    p, q = preset(name, seed)
    return np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)


def coins(draft_probs: np.ndarray, K: int, rounds: int, seed: int) -> Coins:
    """Coins of rounds 0..rounds-1; round i's coins do not depend on ``rounds``."""
    if not 1 <= int(K) <= MAX_K:
        raise InputError("K", f"drafts per round in [1, {MAX_K}]", str(K))
    if not 0 <= int(rounds) <= MAX_ROUNDS:
        raise InputError("rounds", f"a round count in [0, {MAX_ROUNDS}]", str(rounds))
    u = np.random.default_rng(int(seed)).random((int(rounds), 2 * K + 1))  # (R, 2K+1)
    return Coins(draw_iid(np.asarray(draft_probs, dtype=np.float64), u[:, :K]), u[:, K : 2 * K], u[:, 2 * K])


def play(target_probs: np.ndarray, draft_probs: np.ndarray, c: Coins, mistake: str | None = None) -> Verification:
    """Every round of ``c`` through the rule (or the named mistake's verifier), on the same coins."""
    R, K = c.drafts.shape
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    V = p.shape[0]
    fn = verify if mistake is None else BUGS[mistake].verifier
    target = np.broadcast_to(p, (R, K + 1, V))  # (R, K+1, V)
    draft = np.broadcast_to(q, (R, K, V))  # (R, K, V)
    res = fn(target, draft, c.drafts, np.full(R, K, dtype=np.int64), uniforms=Uniforms(c.accept, c.sample),
             validate=False)  # fmt: skip
    return Verification(*(np.asarray(x) for x in res))


class CoinStep(NamedTuple):
    position: int
    draft: int  # the token the drafter proposed
    p: float  # p(draft)
    q: float  # q(draft)
    threshold: float  # min(1, p/q): the coin accepts below it
    u: float  # the coin
    state: str  # one of STATES under the rule; one of COIN_STATES for a mistake


class RoundTrace(NamedTuple):
    """One round laid out for the page: each coin against p/q, then the last token's draw."""

    steps: list[CoinStep]
    accepted: int
    kind: str  # "replacement" (after a rejection) or "bonus" (every draft accepted)
    dist: np.ndarray | None  # (V,) the law the last token was drawn from under the rule; None for a mistake
    u: float  # the coin of that draw
    last: int  # the last emitted token
    tokens: list[int]  # every token the round emitted


def trace(target_probs: np.ndarray, draft_probs: np.ndarray, c: Coins, result: Verification, i: int,
          *, rule: bool = True) -> RoundTrace:  # fmt: skip
    """Round ``i`` of ``result`` (computed by :func:`play` on ``c``).

    With ``rule`` the states are the rule's (accepted below ``num_accepted``, the next one
    rejected unless the row ended with the bonus, the rest not reached) and the law of the last
    token is added: the residual max(0, p - q) normalized (p when it has no mass), or p for the
    bonus. A mistake may use the coins in its own way (count_after_rejection keeps a passing
    draft after a failing one), so its trace gives only each coin's verdict; what it kept is in
    the tokens it emitted.
    """
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    K = c.drafts.shape[1]
    j, bonus = int(result.num_accepted[i]), bool(result.bonus[i])
    steps = []
    for t in range(K):
        x = int(c.drafts[i, t])
        thr = 1.0 if q[x] <= p[x] else float(p[x] / q[x])
        if rule:
            state = "accepted" if t < j else "rejected" if t == j and not bonus else "not reached"
        else:
            state = "passes" if c.accept[i, t] * q[x] < p[x] else "fails"
        steps.append(CoinStep(t, x, float(p[x]), float(q[x]), thr, float(c.accept[i, t]), state))
    toks = [int(t) for t in result.tokens[i] if t >= 0]
    dist = None
    if rule:
        d = theory.decompose(p, q)
        dist = p.copy() if bonus or d.total_variation <= 0 else d.residual
    return RoundTrace(steps, j, "bonus" if bonus else "replacement", dist, float(c.sample[i]), toks[-1], toks)


class Tally(NamedTuple):
    rounds: int
    tokens: int
    counts: np.ndarray  # (V,) every token emitted in the rounds so far
    tokens_per_step: float  # tokens / rounds (nan before the first round)
    expected_tokens_per_step: float  # (1 - a^(K+1)) / (1 - a) under the rule
    test: stats.ChiSquare | None  # the counts against p (None before the first token)


def tally(target_probs: np.ndarray, draft_probs: np.ndarray, result: Verification, rounds: int) -> Tally:
    """Counts of all tokens of the first ``rounds`` rounds, tested against p (Pearson, pooled cells)."""
    p = np.asarray(target_probs, dtype=np.float64)
    K = np.asarray(result.tokens).shape[1] - 1
    toks = np.asarray(result.tokens)[:rounds]
    counts = np.bincount(toks[toks >= 0], minlength=p.size)[: p.size]
    n = int(counts.sum())
    a = theory.acceptance_rate(p, draft_probs)
    return Tally(
        rounds,
        n,
        counts,
        n / rounds if rounds else float("nan"),
        theory.expected_tokens(a, K),
        stats.chi_square(counts, p) if n else None,
    )


class Parting(NamedTuple):
    """Where the rule and a mistake, on the same coins, first emit something different."""

    round: int | None  # the first round whose tokens differ; None if none in the rounds played
    position: int | None  # the first emitted position that differs in that round
    rounds_differing: int  # rounds (of those played) whose tokens differ


def parting(rule: Verification, mistake: Verification, rounds: int) -> Parting:
    a, b = np.asarray(rule.tokens)[:rounds], np.asarray(mistake.tokens)[:rounds]
    differ = (a != b).any(axis=1)
    if not differ.any():
        return Parting(None, None, 0)
    r = int(np.flatnonzero(differ)[0])
    return Parting(r, int(np.flatnonzero(a[r] != b[r])[0]), int(differ.sum()))




PLAY_GROWTH = 5  # Play adds max(1, rounds / PLAY_GROWTH) rounds per tick: one at a time first, then faster


def next_rounds(rounds: int) -> int:
    """The round count after one tick of Play: single rounds while the class can follow them, then
    geometric growth so that the histogram's convergence to p shows within a minute."""
    return min(MAX_ROUNDS, int(rounds) + max(1, int(rounds) // PLAY_GROWTH))


class Residual(NamedTuple):
    """The residual step laid out: what is left of p after the accepted mass min(p, q)."""

    excess: np.ndarray  # (V,) max(0, p - q): the mass acceptance leaves missing
    mass: float  # its sum, 1 - a = TV(p, q)
    law: np.ndarray  # (V,) excess / mass; p itself when the mass is 0 (the unreachable branch)


def residual(target_probs: np.ndarray, draft_probs: np.ndarray) -> Residual:
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    excess = np.maximum(p - q, 0.0)
    mass = float(excess.sum())
    return Residual(excess, mass, excess / mass if mass > 0 else p.copy())
