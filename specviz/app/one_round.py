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

What a round shows is traced, not re-derived: :func:`trace` runs the round again through the
chain reference (or the mistake, which is the reference with one step swapped) with every step
recorded, so a mistake that reads one coin for every draft, reads a rejected coin again for the
replacement, or draws nothing, is shown doing exactly that. Step walks a round's events in order
(:func:`at_event`): one per coin the verifier tested, then the draw; Play plays whole rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..proof import stats, theory
from ..proof.bugs import BUGS
from ..verifiers import reference
from ..verifiers.verify import Uniforms, Verification, verify
from .links import plain
from .position import PRESETS as PRESETS  # the page's choice of (p, q), re-exported
from .position import draw_iid, preset
from .results import plural

ENGINE_MISTAKES = ("q_unprocessed", "target_unprocessed", "shared_noise_stream")

MAX_ROUNDS = 20_000  # rounds one page keeps: one verify call of 20,000 rows answers a click in milliseconds
MAX_K = 6  # drafts per round: the coin lines stay readable on a projector
# The mistakes of one round's own steps (coins, first rejection, residual, bonus), each the reference with
# one step swapped inside the verifier. Left out: the drafter's mistake, ragged rows, and the engine mistakes
# (un-processed rows, the drafter's noise stream reused), which are about what feeds the round.
MISTAKES: tuple[str, ...] = tuple(
    n for n, b in BUGS.items() if b.drafter_mode is None and not b.needs_ragged and n not in ENGINE_MISTAKES
)
STATES = ("accepted", "rejected", "not reached")  # each draft as the verifier's first-rejection step left it


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
    p: float  # p(draft), as the verifier's accept step read it
    q: float  # q(draft), as the verifier's accept step read it
    threshold: float  # min(1, p/q): the coin accepts below it
    u: float  # the coin the verifier's accept step read at this position
    coin: int  # which acceptance coin that was: its own (= position), another draft's read again, or -1: neither
    passed: bool  # the accept step's verdict on that coin
    state: str  # one of STATES: kept, rejected, or never tested; NOT_YET while stepping has not reached it


class Draw(NamedTuple):
    """The last token of a round as the verifier drew it (or did not)."""

    kind: str  # "replacement" (after a rejection), "bonus" (every draft kept) or "none" (nothing drawn)
    position: int  # the target row drawn at (0-based; K is the row after the last draft); -1 for none
    step: str  # the function that drew it: the reference's "replacement", "inverse_cdf" (p itself), or a mistake's
    law: np.ndarray | None  # (V,) the weights handed to the inverse CDF, normalized; None when none were
    u: float  # the uniform the draw read (nan for none)
    coin: int  # -1: its own fresh uniform; t: draft t's acceptance coin, read again; -2: neither
    token: int  # -1 for none


class RoundTrace(NamedTuple):
    """One round as a verifier ran it, read off its own steps: each coin against p/q, then the last draw."""

    steps: list[CoinStep]
    draw: Draw
    tokens: list[int]  # every token the round emitted: the kept drafts in order, then the draw
    events: int  # what Step walks through: one event per tested coin, then one for the draw (or its absence)


NOT_YET = "not yet"  # a coin Step has not reached: no u shown
END = MAX_K + 1  # the event index past any round's last event (K coins and a draw): the round is done


def _recording(steps: reference.ChainSteps, log: dict[str, list[tuple[tuple[Any, ...], Any]]]) -> reference.ChainSteps:
    """``steps`` with every call's arguments and result appended to ``log[step name]``: what the verifier read."""

    def recorded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any) -> Any:
            out = fn(*args)
            log.setdefault(name, []).append((args, out))
            return out

        return step

    return reference.ChainSteps(*(recorded(n, f) for n, f in steps._asdict().items()))


def _which(value: float, uniforms: np.ndarray) -> int:
    """The index of the uniform ``value`` is (-1 when none): uniforms are continuous, so equal means the same draw."""
    hit = np.flatnonzero(uniforms == value)
    return int(hit[0]) if hit.size else -1


def trace(target_probs: np.ndarray, draft_probs: np.ndarray, c: Coins, i: int,
          mistake: str | None = None) -> RoundTrace:  # fmt: skip
    """Round ``i`` of ``c`` run again alone through the chain reference (``mistake``: that mistake's
    verifier, the reference with one step swapped), with each of its steps recorded.

    Everything shown comes from what the verifier's own steps read and returned, never from the rule
    re-applied: the coin at each position is the output of its coins step (one coin for every
    position under shared_uniform), the verdict is its accept step's, kept and tested are its
    first-rejection step's, the draw's uniform is its sample-uniform step's (draft i's coin again
    under reused_coin), and the law is what its replacement step handed to the inverse CDF (p under
    resample_from_p; none when the step draws by its own arithmetic, as unclamped_residual does, or
    when nothing is drawn, as under no_bonus). Rows never read each other's coins, so the round alone
    emits what it emits in :func:`play`'s batch (tests check every mistake on many rounds).
    """
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    K = c.drafts.shape[1]
    rule: Any = reference.verify if mistake is None else BUGS[mistake].verifier
    steps = getattr(rule, "steps", None)
    if not isinstance(steps, reference.ChainSteps):  # a pipeline mistake: its fault is in what feeds the rule
        raise InputError("mistake", "a mistake built from the chain reference (" + ", ".join(MISTAKES) + ")",
                         repr(mistake))  # fmt: skip
    log: dict[str, list[tuple[tuple[Any, ...], Any]]] = {}
    ua, us = c.accept[i : i + 1], c.sample[i : i + 1]  # (1, K), (1,)
    out = rule.run(_recording(steps, log), np.tile(p, (1, K + 1, 1)), np.tile(q, (1, K, 1)), c.drafts[i : i + 1],
                   np.array([K]), uniforms=Uniforms(ua, us), validate=False)  # fmt: skip
    (_, px, qx), (coins_read, passed) = log["accept"][0]
    u = np.asarray(coins_read)[0]  # (K,) the coin each position read
    kept, first, tested = log["first_rejection"][0][1]
    steps_out = []
    for t in range(K):
        a, b = float(px[0, t]), float(qx[0, t])
        thr = 0.0 if b <= 0 else 1.0 if b <= a else a / b
        state = STATES[0] if kept[0, t] else STATES[1] if tested[0, t] else STATES[2]
        steps_out.append(CoinStep(t, int(c.drafts[i, t]), a, b, thr, float(u[t]), _which(u[t], ua[0]),
                                  bool(passed[0, t]), state))  # fmt: skip
    draw = _draw(log, steps.replacement.__name__, p, int(out.num_accepted[0]), out, ua[0], float(us[0]))
    tokens = [s.draft for s in steps_out if s.state == STATES[0]] + ([draw.token] if draw.kind != "none" else [])
    return RoundTrace(steps_out, draw, tokens, int(tested[0].sum()) + 1)


def _residual_or_p(p: np.ndarray, q: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    w = reference.residual(p, q, x)
    return np.where((reference.mass(w) <= 0)[:, None], p, w)


# The weights each replacement step hands to the inverse CDF, by the step's name: the rule's residual
# (p where it has no mass), resample_from_p's p. A step that draws by its own arithmetic
# (unclamped_residual) has no such weights: its law is not drawn.
_DRAW_WEIGHTS: dict[str, Callable[[np.ndarray, np.ndarray | None, np.ndarray], np.ndarray]] = {
    "replacement": _residual_or_p,
    "replacement_from_p": lambda p, q, x: p,
}


def _draw(log: dict[str, list[tuple[tuple[Any, ...], Any]]], replacement: str, p: np.ndarray, n: int,
          out: Verification, ua: np.ndarray, us: float) -> Draw:  # fmt: skip
    """The last draw read off the recorded steps: which row, which step, which weights, which uniform."""
    row, from_residual, u_last = log["last_draw"][0][1]
    if int(row[0]) < 0:
        return Draw("none", -1, "", None, float("nan"), -1, -1)
    u = float(np.asarray(u_last)[0])
    coin = -1 if u == us else _which(u, ua) if _which(u, ua) >= 0 else -2
    position, token = int(row[0]), int(out.tokens[0, n])
    if bool(from_residual[0]):
        (pr, qr, xr, _), _ = log["replacement"][0]
        weights = _DRAW_WEIGHTS.get(replacement)
        w = None if weights is None else np.asarray(weights(pr, qr, xr), dtype=np.float64)[0]
        return Draw("replacement", position, replacement, None if w is None else w / w.sum(), u, coin, token)
    w = p  # (V,) the bonus: p (every row of the round is the same p), drawn by the inverse CDF
    return Draw("bonus", position, "inverse_cdf", w / w.sum(), u, coin, token)


class View(NamedTuple):
    """A round as Step has shown it so far: ``event`` coins tested, then the draw."""

    steps: list[CoinStep]  # coins not yet reached in state NOT_YET
    done: bool  # every event shown: the draw (or its absence) included
    tokens: list[int]  # what the round has emitted so far: the kept drafts shown, then the draw once done


def at_event(tr: RoundTrace, event: int) -> View:
    """Round ``tr`` after its first ``event`` events (0: before the first coin; >= tr.events: done)."""
    done = event >= tr.events
    order = [s.position for s in tr.steps if s.state != STATES[2]]  # the positions tested, in order
    shown = set(order[: max(0, int(event))])
    steps = [s if s.position in shown or done else s._replace(state=NOT_YET) for s in tr.steps]
    kept = [s.draft for s in steps if s.state == STATES[0]]
    return View(steps, done, kept + ([tr.draw.token] if done and tr.draw.kind != "none" else []))


def click(button: str, rounds: int, event: int, events: int, playing: bool) -> tuple[int, int, bool]:
    """(rounds, event, playing) after a click on ``button``: "step" (the next event of this round; once it is
    done, the next round's first coin), "play" (Play or Pause) or "reset"."""
    if button == "step":
        if event < events:
            return rounds, event + 1, False
        return (rounds, event, False) if rounds >= MAX_ROUNDS else (rounds + 1, 1, False)
    if button == "play":
        return rounds, event, not playing
    if button == "reset":
        return 1, 0, False
    raise InputError("button", "step, play or reset", repr(button))


def play_tick(rounds: int, event: int, events: int) -> tuple[int, int]:
    """Play: the rest of this round if it is not done, else whole rounds (:func:`next_rounds`)."""
    return (rounds if event < events else next_rounds(rounds)), END


def rounds_done(rounds: int, event: int, events: int) -> int:
    """Rounds whose tokens have all been emitted: those before the current one, and it once done."""
    return int(rounds) - 1 + int(event >= events)


def _draft_list(positions: list[int]) -> str:
    return ", ".join(str(t + 1) for t in positions) if positions else "none"


def describe_draw(d: Draw) -> str:
    """The last draw in words, from what the verifier's steps read."""
    if d.kind == "none":
        return "no token drawn (every draft kept, no bonus)"
    where = f"at position {d.position + 1}"
    source = {"replacement": "from the residual max(0, p − q)", "inverse_cdf": "from p"}.get(
        d.step, f"by its step {d.step}"
    )
    coin = "its own uniform" if d.coin == -1 else f"draft {d.coin + 1}'s coin again" if d.coin >= 0 else "other"
    return f"a {d.kind} {where} {source}, with {coin} (u = {d.u:.2f})"


def differences(rule: RoundTrace, bad: RoundTrace) -> list[str]:
    """How the mistake's round differs from the rule's in what it read and drew: each sentence read off
    the two traces (an empty list when the mistake read the same coins and drew the same way)."""
    out = []
    reread: dict[int, list[int]] = {}
    for s in bad.steps:
        if s.state != STATES[2] and s.coin != s.position:
            reread.setdefault(s.coin, []).append(s.position)
    for coin, at in reread.items():
        out.append(f"at draft {_draft_list(at)} it read draft {coin + 1}'s coin again (u = {bad.steps[coin].u:.2f}), "
                   "not a fresh one")  # fmt: skip
    tested = [[s.position for s in t.steps if s.state != STATES[2]] for t in (rule, bad)]
    if tested[0] != tested[1]:
        out.append(f"it tested drafts {_draft_list(tested[1])}, the rule drafts {_draft_list(tested[0])}")
    kept = [[s.position for s in t.steps if s.state == STATES[0]] for t in (rule, bad)]
    if kept[0] != kept[1]:
        out.append(f"it kept drafts {_draft_list(kept[1])}, the rule drafts {_draft_list(kept[0])}")
    a, b = rule.draw, bad.draw
    laws = [list(d.law) if d.law is not None else None for d in (a, b)]
    same_law = laws[0] == laws[1]
    if (a.kind, a.position, a.step, a.coin, a.u) != (b.kind, b.position, b.step, b.coin, b.u) or not same_law:
        out.append(f"its last token: {describe_draw(b)}; the rule's: {describe_draw(a)}")
    return out


def draw_title(d: Draw, done: bool) -> str:
    """The title of the last draw's chart, short enough for half a projector; :func:`status` says the rest
    (from what, at which position, with whose uniform)."""
    if not done:
        return "Last token: not drawn yet"
    if d.kind == "none":
        return "No last token: no bonus drawn"
    return f"{d.kind.capitalize()}: u = {d.u:.2f} → token {d.token}"


def status(tr: RoundTrace, view: View, rounds: int) -> str:
    """One line under the controls: where Step is in the round, and what the round emitted so far."""
    tested = [s for s in view.steps if s.state not in (NOT_YET, STATES[2])]
    if view.done:
        return f"Round {rounds:,} done: emitted {len(view.tokens)} token(s): " \
               f"{', '.join(str(t) for t in view.tokens)}; last, {describe_draw(tr.draw)}."  # fmt: skip
    if not tested:
        return f"Round {rounds:,}: no coin tested yet. Step tests draft 1's coin."
    s = tested[-1]
    so_far = "tokens " + ", ".join(str(t) for t in view.tokens) if view.tokens else "no token"
    return f"Round {rounds:,}: draft {s.position + 1} of {len(view.steps)} tested ({s.state}); kept so far: {so_far}."


def mistake_caption(mistake: str, rule: Side, bad: Side, rounds: int) -> str:
    """The caption under the two sides: what the mistake swapped, and what differed in this round as
    read off both traces (said once both sides have shown the whole round)."""
    bug = BUGS[mistake]
    swapped = f" (the reference's step {bug.step[0]} swapped for {bug.step[1]})" if bug.step else ""
    head = (f"{mistake}: {bug.title}{swapped}. Both sides get the same drafts and the same uniforms; each shows "
            "the coins and the draw its own verifier read, and emits its kept drafts, then that draw.")
    if not (rule.view.done and bad.view.done):
        return head + f" What differs in round {rounds:,} is listed once both sides have finished it."
    diffs = differences(rule.trace, bad.trace)
    if not diffs:
        return head + (f" In round {rounds:,} the mistake read the same coins, kept the same drafts and drew its "
                       "last token the same way as the rule.")  # fmt: skip
    return head + f" Round {rounds:,}: " + "; ".join(diffs) + "."


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


ROLLBACK_CONTEXT = 100  # any context length L: what a cache keeps is counted from it


def rollback_sentence(tr: RoundTrace) -> str:
    """What a real model's KV caches do after this round (interview_topics.kv_rollback), for a done round."""
    from .interview_topics import kv_rollback

    K = len(tr.steps)
    j = sum(s.state == STATES[0] for s in tr.steps)  # drafts kept
    L = ROLLBACK_CONTEXT
    r = kv_rollback(L, K, j, page=1)
    drop = (f"drops the other {r.target_dropped} (the rejected draft and every draft after it)" if r.target_dropped
            else "drops none: every draft was kept")  # fmt: skip
    return (f"In a real model's KV cache (a context of L tokens): the target's verification pass wrote L + "
            f"{r.target_written - L} positions and keeps L + {r.target_kept - L}, the context and the {j} kept "
            f"draft{'' if j == 1 else 's'}, and {drop}. The token this round emitted has no cache entry yet: it was "
            f"drawn from the output at the last kept position, and the next pass feeds it first "
            f"({r.next_target_feed} token before the new drafts); the drafter re-feeds {r.next_drafter_feed} "
            f"token{'' if r.next_drafter_feed == 1 else 's'}" + (" (its last draft, which it never fed, and the bonus)"
            if r.next_drafter_feed == 2 else " (the emitted one)") + ".")  # fmt: skip


def tally_caption(t: Tally) -> str:
    """What the histogram's chi-square says, or that there is nothing to test yet (no cell to compare with p)."""
    from .find_bug import p_value_text

    if t.test is None or t.test.dof < 1:  # one pooled cell: the counts cannot differ from p
        return (f"Chi-square against p: nothing to test yet. {plural(t.tokens, 'token')} fill one cell once the "
                "rare tokens are pooled, so there is no comparison with p: keep playing.")  # fmt: skip
    return (f"Chi-square against p: statistic {t.test.statistic:.2f} on {plural(t.test.dof, 'degree')} of freedom, "
            f"p-value {p_value_text(t.test)} (the critical value at α = {t.test.alpha:g} is "
            f"{t.test.critical_value:.2f}).")  # fmt: skip


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


def residual_text(target_probs: np.ndarray, draft_probs: np.ndarray) -> str:
    """The residual step in numbers: max(0, p − q), its mass 1 − a, and the law it normalizes to."""
    excess = np.maximum(np.asarray(target_probs, dtype=np.float64) - draft_probs, 0.0)  # (V,) what acceptance leaves
    law = theory.decompose(target_probs, draft_probs).residual  # excess normalized; p when it has no mass
    return (f"max(0, p − q) = {plain(np.round(excess, 4).tolist())}, mass 1 − a = {float(excess.sum()):.4f}; "
            f"normalized: {plain(np.round(law, 4).tolist())}.")  # fmt: skip


class Side(NamedTuple):
    """One verifier's side of the page: the last round as traced and as Step has shown it, the tokens so far."""

    trace: RoundTrace
    view: View
    tally: Tally  # every token of the rounds done
    name: str  # "the rule", or the mistake's name


class Stage(NamedTuple):
    """What the page shows on this run: the rounds so far through the rule and, beside it, the mistake."""

    p: np.ndarray  # (V,)
    q: np.ndarray  # (V,)
    rounds: int  # the round shown (after a tick of Play: the new count)
    event: int  # how far Step has walked into it
    events: int  # what Step walks through in it: the longer side's events
    sides: list[Side]  # the rule's, then the mistake's
    parting: Parting | None  # where the two first differ in the rounds done; None without a mistake


def stage(preset: str, K: int, seed: int, rounds: int, event: int, mistake: str | None = None,
          playing: bool = False) -> Stage:  # fmt: skip
    """Rounds 1..``rounds`` of ``preset``'s p and q with ``K`` drafts, on the seed's coins, Step at ``event``
    of the last; ``playing``: one tick of Play first (:func:`play_tick`)."""
    p, q = pair(preset, seed)
    shown = (None, mistake) if mistake else (None,)
    if playing:  # Play finishes the round Step is in (the longer side's events), then adds whole rounds
        c = coins(q, K, rounds, seed)
        rounds, event = play_tick(rounds, event, max(trace(p, q, c, rounds - 1, m).events for m in shown))
    c = coins(q, K, rounds, seed)
    runs = [play(p, q, c, m) for m in shown]  # every round through the rule, then through the mistake
    sides = []
    for m, res in zip(shown, runs, strict=True):
        tr = trace(p, q, c, rounds - 1, m)
        sides.append(Side(tr, at_event(tr, event), tally(p, q, res, rounds_done(rounds, event, tr.events)),
                          m or "the rule"))  # fmt: skip
    events = max(s.trace.events for s in sides)
    part = parting(runs[0], runs[1], rounds_done(rounds, event, events)) if mistake else None
    return Stage(p, q, rounds, event, events, sides, part)


def parting_note(sg: Stage, mistake: str) -> tuple[bool, str]:
    """(whether they differ, the sentence): where the rule and ``mistake`` first emit different tokens."""
    done, part = rounds_done(sg.rounds, sg.event, sg.events), sg.parting
    if part is None or part.round is None or part.position is None:
        these = "this round" if done == 1 else f"these {plural(done, 'round')}"
        return False, f"On {these} the rule and {mistake} emitted the same tokens: keep playing."
    return True, (f"The rule and {mistake} first differ in round {part.round + 1}, at emitted token "
                  f"{part.position + 1}; {part.rounds_differing:,} of {plural(done, 'round')} "
                  f"differ{'s' if part.rounds_differing == 1 else ''}.")  # fmt: skip


def side_caption(t: Tally) -> str | None:
    """Under one side's histogram: tokens per step and its chi-square against p (None before any token)."""
    from .find_bug import p_value_text

    if t.test is not None and t.test.dof >= 1:
        return (f"{t.tokens_per_step:.3f} tokens per step; chi-square against p: p-value {p_value_text(t.test)} "
                f"(fails below α = {t.test.alpha:g}).")  # fmt: skip
    if t.tokens:
        return f"{t.tokens_per_step:.3f} tokens per step; chi-square against p: nothing to test yet (every token in " \
               "one pooled cell)."  # fmt: skip
    return None
