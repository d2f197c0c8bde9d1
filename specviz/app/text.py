"""Speculative sampling on real text: character n-gram models and a generation loop.

# B rows (histories), K drafts per round, V vocabulary (characters), L characters, n sequences

The corpus is the text of the Python documentation topics that every CPython installation
carries (``pydoc_data.topics``): about 465,000 characters of English prose and code, read
offline. Two models are trained on it at start-up, in well under a second:

- the **target**, a character 5-gram; the **drafter**, a character trigram (order 3), whose
  drafts the target accepts at a rate of about 0.6 at temperature 1 (averaged over contexts
  of the corpus; tested);
- both smoothed by Witten-Bell interpolation down to a uniform distribution:
  ``P_n(w | h) = (c(h, w) + T(h) P_{n-1}(w | h')) / (c(h) + T(h))``, with c the counts of
  the n-gram and of its context h, T(h) the number of distinct characters seen after h, and
  h' the context shortened by one. The base is uniform, so every character has positive
  probability under both models: the drafter can propose anything and the target never rules
  a draft out.

The models are plain callables from a batch of histories to logits, the protocol any pair of
models can follow (:data:`Model`): ``model(histories) -> (B, V)`` logits, where
``histories`` is a list of B lists of token ids. :func:`generate` runs draft-and-verify rounds
with any two such models over the same vocabulary and any verifier with the signature of
:func:`specviz.verify`, and :func:`target_law` gives the target's exact law of the next L
tokens after a prompt, so the proof machinery of :mod:`specviz.proof.stats` applies to real text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.processing import Settings, process_logits
from ..verifiers.verify import verify

Model = Callable[[Sequence[Sequence[int]]], np.ndarray]  # histories (B lists of ids) -> logits (B, V)

# Newline plus the printable ASCII characters; anything else in the corpus reads as "?".
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))
UNKNOWN = "?"
TARGET_ORDER = 5
DRAFT_ORDER = 3


def encode(text: str) -> np.ndarray:
    """Characters -> token ids (len,) int64; characters outside :data:`ALPHABET` become '?'."""
    index = {c: i for i, c in enumerate(ALPHABET)}
    unk = index[UNKNOWN]
    return np.fromiter((index.get(c, unk) for c in text), dtype=np.int64, count=len(text))


def decode(ids: Sequence[int]) -> str:
    return "".join(ALPHABET[int(i)] for i in ids)


@cache
def corpus() -> str:
    """The training text: every documentation topic of this Python, in a fixed order."""
    from pydoc_data import topics

    return "\n\n".join(topics.topics[k] for k in sorted(topics.topics))


class NGram:
    """A character n-gram model with Witten-Bell interpolation (see the module docstring).

    Counts are held as sorted arrays of n-gram codes (base V), so a batch of contexts is
    looked up with two binary searches per order, whatever the batch size.
    """

    def __init__(self, ids: np.ndarray, order: int, V: int = len(ALPHABET)) -> None:
        if order < 1:
            raise InputError("order", "an integer >= 1", str(order))
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size < order:
            raise InputError("ids", f"at least {order} tokens of training text", str(ids.size))
        self.order, self.V = int(order), int(V)
        self.codes: list[np.ndarray] = []  # per n: sorted unique n-gram codes
        self.cum: list[np.ndarray] = []  # per n: running count, with a leading 0
        for n in range(1, order + 1):
            code = np.zeros(ids.size - n + 1, dtype=np.int64)
            for k in range(n):
                code = code * V + ids[k : ids.size - n + 1 + k]
            uniq, cnt = np.unique(code, return_counts=True)
            self.codes.append(uniq)
            self.cum.append(np.concatenate([[0], np.cumsum(cnt)]))

    def probs(self, histories: Sequence[Sequence[int]]) -> np.ndarray:
        """Next-token probabilities (B, V) after each history (a list of token ids)."""
        B, m = len(histories), self.order - 1
        ctx = np.full((B, max(m, 1)), -1, dtype=np.int64)  # the last m ids, right-aligned; -1: none
        for b, h in enumerate(histories):
            tail = list(h)[-m:] if m else []
            if tail:
                ctx[b, m - len(tail) :] = tail
        # Histories share their last m ids (a round's K + 1 target calls, the sequences of one check):
        # each distinct context is computed once. Every row's arithmetic is its own, so the rows are
        # the ones a call per history gives, to the bit.
        ctx, inv = np.unique(ctx, axis=0, return_inverse=True)
        return self._context_probs(ctx)[inv.reshape(-1)]

    def _context_probs(self, ctx: np.ndarray) -> np.ndarray:
        """(U, V) next-token probabilities for (U, max(order - 1, 1)) right-aligned contexts (-1: none)."""
        B, V, m = int(ctx.shape[0]), self.V, self.order - 1
        P = np.full((B, V), 1.0 / V)  # order 0: uniform
        for n in range(1, self.order + 1):
            k = n - 1  # context length at this order
            have = np.ones(B, bool) if k == 0 else (ctx[:, m - k :] >= 0).all(1)
            hc = np.zeros(B, dtype=np.int64)
            for i in range(m - k, m):
                hc = hc * V + np.maximum(ctx[:, i], 0)
            codes, cum = self.codes[n - 1], self.cum[n - 1]
            lo = np.searchsorted(codes, hc * V)
            hi = np.searchsorted(codes, hc * V + V)
            seen = hi - lo  # T(h): distinct next tokens
            total = (cum[hi] - cum[lo]).astype(np.float64)  # c(h)
            C = np.zeros((B, V))
            rows = np.repeat(np.arange(B), seen)
            idx = np.repeat(lo - np.cumsum(np.concatenate([[0], seen[:-1]])), seen) + np.arange(int(seen.sum()))
            C[rows, codes[idx] % V] = (cum[idx + 1] - cum[idx]).astype(np.float64)
            denom = total + seen
            use = have & (denom > 0)
            new = (C + seen[:, None] * P) / np.where(denom > 0, denom, 1.0)[:, None]
            P = np.where(use[:, None], new, P)
        return P

    def __call__(self, histories: Sequence[Sequence[int]]) -> np.ndarray:
        """The :data:`Model` protocol: logits (B, V) = log of :meth:`probs` (all finite)."""
        return np.log(self.probs(histories))


class Pair(NamedTuple):
    target: NGram
    drafter: NGram


@cache
def trained_pair(target_order: int = TARGET_ORDER, draft_order: int = DRAFT_ORDER) -> Pair:
    """The target and the drafter, trained on :func:`corpus` (cached for the process)."""
    ids = encode(corpus())
    return Pair(NGram(ids, target_order), NGram(ids, draft_order))


# --- draft-and-verify on text ------------------------------------------------------------------


def _probs(model: Model, histories: list[list[int]], settings: Settings, V: int) -> np.ndarray:
    logits = np.asarray(model(histories), dtype=np.float64)
    if logits.shape != (len(histories), V):
        raise InputError("model", f"logits of shape (B, V) = ({len(histories)}, {V})", f"{logits.shape}")
    return process_logits(logits, settings)


class Step(NamedTuple):
    """One verification of one row, for display: drafts, their p and q, coins, what came out."""

    drafts: list[int]
    p_draft: list[float]  # p(x_i) at each draft position
    q_draft: list[float]  # q(x_i)
    coins: list[float]  # the acceptance uniform at each tested position (NaN: not reached)
    accepted: int  # drafts kept
    emitted: list[int]  # accepted drafts + the replacement or bonus token
    bonus: bool  # the last emitted token is the bonus (every draft survived)
    expected_tokens: float  # E[tokens | these drafts] = 1 + sum_i prod_{j<=i} min(1, p_j/q_j)


def step(
    target: Model,
    drafter: Model,
    history: Sequence[int],
    K: int,
    settings: Settings,
    rng: np.random.Generator,
    *,
    V: int = len(ALPHABET),
    verifier: Callable[..., Any] = verify,
) -> Step:
    """One draft-and-verify round after ``history``: K drafts, one verifier call."""
    if int(K) < 1:
        raise InputError("K", "at least 1 draft", str(K))
    hist = list(history)
    drafts: list[int] = []
    qrows: list[np.ndarray] = []
    for _ in range(K):
        q = _probs(drafter, [hist + drafts], settings, V)[0]
        qrows.append(q)
        drafts.append(int(np.searchsorted(np.cumsum(q), rng.random() * q.sum(), side="right").clip(0, V - 1)))
    P = _probs(target, [hist + drafts[:i] for i in range(K + 1)], settings, V)  # (K+1, V)
    Q = np.stack(qrows)  # (K, V)
    res = verifier(P[None], None if settings.greedy else Q[None], np.array([drafts]), np.array([K]), rng=rng)
    num = int(np.asarray(res.num_tokens)[0])
    acc = int(np.asarray(res.num_accepted)[0])
    px = [float(P[i, x]) for i, x in enumerate(drafts)]
    qx = [float(Q[i, x]) for i, x in enumerate(drafts)]
    ratio = [min(1.0, a / b) if b > 0 else 0.0 for a, b in zip(px, qx, strict=True)]
    return Step(
        drafts=drafts, p_draft=px, q_draft=qx, coins=[float(c) for c in np.asarray(res.accept_uniforms)[0]],
        accepted=acc, emitted=[int(t) for t in np.asarray(res.tokens)[0, :num]], bonus=bool(np.asarray(res.bonus)[0]),
        expected_tokens=1.0 + float(np.cumprod(ratio).sum()),
    )  # fmt: skip


def generate(
    target: Model,
    drafter: Model,
    prompt: Sequence[int],
    *,
    n: int,
    L: int,
    K: int,
    settings: Settings,
    rng: np.random.Generator,
    V: int = len(ALPHABET),
    verifier: Callable[..., Any] = verify,
) -> np.ndarray:
    """n independent continuations of ``prompt``, L tokens each, by draft-and-verify rounds.

    Vectorized over the n rows: each round drafts K tokens for every unfinished row, then one
    verifier call on the padded batch. Returns (n, L) int64.
    """
    for name, value, low in (("n", n, 1), ("L", L, 1), ("K", K, 1)):
        if int(value) < low:
            raise InputError(name, f"an integer >= {low}", str(value))
    prompt = [int(t) for t in prompt]
    seqs = np.full((n, L), -1, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    for _ in range(L + 1):
        active = np.flatnonzero(length < L)
        if active.size == 0:
            break
        A = active.size
        hist = [prompt + seqs[a, : length[a]].tolist() for a in active]
        drafts = np.zeros((A, K), dtype=np.int64)
        Q = np.zeros((A, K, V))
        for i in range(K):
            Q[:, i] = _probs(drafter, [h + drafts[r, :i].tolist() for r, h in enumerate(hist)], settings, V)
            cdf = np.cumsum(Q[:, i], axis=1)
            drafts[:, i] = np.minimum((cdf <= (rng.random(A) * cdf[:, -1])[:, None]).sum(1), V - 1)
        P = np.zeros((A, K + 1, V))
        for i in range(K + 1):
            P[:, i] = _probs(target, [h + drafts[r, :i].tolist() for r, h in enumerate(hist)], settings, V)
        res = verifier(P, None if settings.greedy else Q, drafts, np.full(A, K), rng=rng)
        toks, num = np.asarray(res.tokens), np.asarray(res.num_tokens)
        for t in range(K + 1):
            take = (t < num) & (length[active] + t < L)
            rows = active[take]
            seqs[rows, length[rows] + t] = toks[take, t]
        length[active] = np.minimum(length[active] + num, L)
    else:
        raise InputError("verifier", "at least one token emitted per round", "rounds that emit none")
    return seqs


def target_law(
    target: Model, prompt: Sequence[int], L: int, settings: Settings, *, V: int = len(ALPHABET)
) -> np.ndarray:
    """Exact law (V,) * L of the next L tokens that plain decoding with ``settings`` samples."""
    if not 1 <= int(L) <= 3:
        raise InputError("L", "1, 2 or 3 tokens (V**L cells)", str(L))
    prompt = [int(t) for t in prompt]
    law = np.ones(1)
    prefixes: list[list[int]] = [[]]
    for _ in range(L):
        P = _probs(target, [prompt + pre for pre in prefixes], settings, V)  # (len(prefixes), V)
        law = (law[:, None] * P).reshape(-1)
        prefixes = [pre + [x] for pre in prefixes for x in range(V)]
    return law.reshape((V,) * L)


# --- a transcript for display ------------------------------------------------------------------


def round_rng(seed: int, round_index: int) -> np.random.Generator:
    """The random source of one round: a function of (seed, round), so a transcript of R rounds
    is reproduced by its seed alone, and one more round does not change the rounds before it."""
    return np.random.default_rng([int(seed), int(round_index)])


def transcript(
    target: Model,
    drafter: Model,
    prompt: Sequence[int],
    K: int,
    settings: Settings,
    seed: int,
    *,
    rounds: int | None = None,
    until: int | None = None,
    V: int = len(ALPHABET),
) -> list[Step]:
    """Draft-and-verify rounds after ``prompt``: ``rounds`` of them, or as many as it takes to
    emit ``until`` tokens (whichever is given; both: the first reached). Round r draws from
    :func:`round_rng` (seed, r)."""
    if rounds is None and until is None:
        raise InputError("rounds", "a number of rounds or a length to reach (until)", "neither")
    history = [int(t) for t in prompt]
    steps: list[Step] = []
    emitted = 0
    while (rounds is None or len(steps) < rounds) and (until is None or emitted < until):
        s = step(target, drafter, history, K, settings, round_rng(seed, len(steps)), V=V)
        steps.append(s)
        history += s.emitted
        emitted += len(s.emitted)
    return steps


@functools.lru_cache(maxsize=64)
def page_transcript(prompt: str, K: int, T: float, seed: int, rounds: int | None, until: int | None) -> list[Step]:
    """The *Real text* page's transcript on :func:`trained_pair` (cached: a Step and a Clear come back to it)."""
    pair = trained_pair()
    return transcript(pair.target, pair.drafter, encode(prompt).tolist(), K, Settings(temperature=T), seed,
                      rounds=rounds, until=until)  # fmt: skip


def tokens_per_call(steps: Sequence[Step]) -> tuple[float, float]:
    """(tokens emitted per target call, its exact expectation given the drafts met): the mean of
    len(emitted) and the mean of :attr:`Step.expected_tokens` over the rounds (NaN for none)."""
    if not steps:
        return float("nan"), float("nan")
    return float(np.mean([len(s.emitted) for s in steps])), float(np.mean([s.expected_tokens for s in steps]))


def _char(t: int) -> str:
    c = ALPHABET[int(t)]
    return "↵\n" if c == "\n" else c


def transcript_html(prompt: Sequence[int], steps: Sequence[Any], colors: dict[str, str], show_rejected: bool = True,
                    show: Callable[[int], str] = _char, prompt_text: str | None = None) -> str:  # fmt: skip
    """The prompt and each round's tokens as escaped HTML spans with a hover title.

    ``colors`` maps "accepted", "rejected", "replaced" and "bonus" to CSS colours. Accepted
    drafts, the rejected draft (struck through: it is not part of the text), the replacement and
    the bonus each get their colour; the title gives the round, p(x), q(x) and the coin u
    (accepted iff u < min(1, p/q)). With ``show_rejected=False`` the rejected drafts are left
    out, so the spans read as the generated text alone; the replacement's title then names the
    draft it replaced. Every character of the text is escaped.

    ``steps`` are :class:`Step` or anything with its fields (the real model's
    :class:`specviz.models.Round`); ``show`` gives a token's text (a character here) and
    ``prompt_text`` the prompt's (``decode(prompt)`` by default).
    """
    import html

    def span(chars: str, kind: str, title: str) -> str:
        style = f"color:{colors[kind]}" + (";text-decoration:line-through;opacity:0.6" if kind == "rejected" else "")
        shown = html.escape(chars)
        return f'<span class="sv-{kind}" style="{style}" title="{html.escape(title)}">{shown}</span>'

    parts = [f'<span class="sv-prompt">{html.escape(decode(prompt) if prompt_text is None else prompt_text)}</span>']
    for r, s in enumerate(steps, start=1):
        for i in range(s.accepted):
            ratio = min(1.0, s.p_draft[i] / s.q_draft[i]) if s.q_draft[i] > 0 else 0.0
            parts.append(span(show(s.drafts[i]), "accepted", f"round {r}, draft {i + 1}: accepted\n"
                              f"p = {s.p_draft[i]:.4f}, q = {s.q_draft[i]:.4f}, min(1, p/q) = {ratio:.4f}\n"
                              f"coin u = {s.coins[i]:.4f} < {ratio:.4f}"))  # fmt: skip
        if s.bonus:
            parts.append(span(show(s.emitted[-1]), "bonus", f"round {r}: bonus token from p after all "
                              f"{len(s.drafts)} drafts were accepted"))  # fmt: skip
        else:
            i = s.accepted
            ratio = min(1.0, s.p_draft[i] / s.q_draft[i]) if s.q_draft[i] > 0 else 0.0
            why = (f"round {r}, draft {i + 1}: rejected\n"
                   f"p = {s.p_draft[i]:.4f}, q = {s.q_draft[i]:.4f}, min(1, p/q) = {ratio:.4f}\n"
                   f"coin u = {s.coins[i]:.4f} >= {ratio:.4f}")  # fmt: skip
            if show_rejected:
                parts.append(span(show(s.drafts[i]), "rejected", why))
            replaced = f"round {r}: replacement drawn from (p - q)+ normalized at draft position {i + 1}"
            if not show_rejected:
                was = ALPHABET[int(s.drafts[i])] if show is _char else show(s.drafts[i])
                replaced += f"\nin place of {was!r}, " + why
            parts.append(span(show(s.emitted[-1]), "replaced", replaced))
    return '<div class="sv-transcript" style="font-family:monospace;white-space:pre-wrap">' + "".join(parts) + "</div>"


LEGEND = (("accepted", "accepted draft"), ("rejected", "rejected draft (not in the text)"), ("replaced", "replacement"),
          ("bonus", "bonus"))  # fmt: skip


def legend_html(colors: dict[str, str], show_rejected: bool) -> str:
    """The transcript's colour key (the rejected drafts' only when they are shown)."""
    return "<div>" + " ".join(
        f'<span style="color:{colors[k]}{";text-decoration:line-through" if k == "rejected" else ""}">■ {name}</span>'
        for k, name in LEGEND
        if show_rejected or k != "rejected"
    ) + "</div>"


def text_bugs() -> list[str]:
    """The bugs of :mod:`specviz.proof.bugs` this page's generation can run and whose law moves: a
    verifier swap (not a drafter mistake), visible without ragged rows (every row has K drafts)."""
    from ..proof.bugs import BUGS

    return [k for k, b in BUGS.items() if b.changes_law and b.drafter_mode is None and not b.needs_ragged]


# Sequences in one exactness check on the Real-text page: generating 20,000 sequences of 2
# characters after "The " took 0.9 s (K = 1), 1.5 s (K = 4) and 3.4 s (K = 8) of CPU time on one
# core (process_time, on the 2-core dev machine); 20,000 detects a TV shift of 0.05 after that
# default prompt (stats.needed_n of its law: 13,828).
MAX_CHECK_N = 20_000


def cell_labels(L: int) -> list[str]:
    """Names (V**L,) of the L-character continuations in base-V order, space as "␣", newline as "↵"."""
    shown = [{" ": "␣", "\n": "↵"}.get(c, c) for c in ALPHABET]
    labels = [""]
    for _ in range(int(L)):
        labels = [a + c for a in labels for c in shown]
    return labels


# --- the Real-text page's check and last round, computed here (the page lays them out) ---------------

CHECK_L = 2  # characters after the prompt whose joint law the check tests (V**2 = 9,216 cells)


class Check(NamedTuple):
    law: np.ndarray  # (V**CHECK_L,) the target's exact law of the continuation
    counts: np.ndarray  # (V**CHECK_L,) continuations seen
    joint: Any  # stats.ChiSquare of the counts against the law
    needed: int  # sequences the test needs to see a TV shift of stats.MIN_TV


def check(pair: Pair, prompt: str, K: int, settings: Settings, seed: int, n: int,
          verifier: Callable[..., Any] | None = None) -> Check:  # fmt: skip
    """The joint test of ``n`` continuations generated by draft-and-verify rounds (``verifier``: a bug's, or the
    correct rule when None) against the target's exact law of the next :data:`CHECK_L` characters."""
    from ..proof import stats

    ids = encode(prompt).tolist()
    law = target_law(pair.target, ids, CHECK_L, settings)
    seqs = generate(pair.target, pair.drafter, ids, n=n, L=CHECK_L, K=K, settings=settings,
                    rng=np.random.default_rng(seed), verifier=verify if verifier is None else verifier)  # fmt: skip
    return Check(law, stats.counts(seqs, len(ALPHABET), CHECK_L), stats.joint_test(seqs, law), stats.needed_n(law))


CHECK_BOXES = {  # how the page shows each answer of the check: Streamlit's box and its icon
    "pass": ("success", ":material/check_circle:"),
    "fail": ("error", ":material/cancel:"),
    "inconclusive": ("warning", ":material/help:"),
}


def prompt_note(prompt: str) -> str | None:
    """What the page says of a prompt with characters outside :data:`ALPHABET` (None: nothing to say)."""
    if decode(encode(prompt).tolist()) == prompt:
        return None
    return f"Characters outside printable ASCII and newline are read as '{UNKNOWN}'."


def caption(pair: Pair) -> str:
    """What the page says about the two n-gram models."""
    return (
        f"Two character models trained when the app starts on the Python documentation topics that ship with every "
        f"Python ({len(corpus()):,} characters): the target a {pair.target.order}-gram, the drafter a "
        f"{pair.drafter.order}-gram, both smoothed so that every character has positive probability. Each round the "
        "drafter proposes K characters and one target call verifies them with specviz.verifiers.verify."
    )


def metrics(steps: Sequence[Step]) -> list[tuple[str, str, str]]:
    """(label, value, help) of the transcript's numbers."""
    measured, expected = tokens_per_call(steps)
    return [
        ("target calls (rounds)", f"{len(steps)}", ""),
        ("characters generated", f"{sum(len(s.emitted) for s in steps)}", ""),
        ("tokens per target call", "–" if not steps else f"{measured:.3f}", ""),
        ("exact expectation, contexts met", "–" if not steps else f"{expected:.3f}",
         "mean over the rounds of 1 + Σ_i Π_(j≤i) min(1, p_j/q_j) for the drafts each round proposed"),
    ]  # fmt: skip


@functools.lru_cache(maxsize=256)
def needed_after(prompt: str, T: float) -> int:
    """Sequences the page's check needs after ``prompt`` at temperature T to see a TV shift of stats.MIN_TV."""
    from ..proof import stats

    law = target_law(trained_pair().target, encode(prompt).tolist(), CHECK_L, Settings(temperature=T))
    return stats.needed_n(law)


def check_caption() -> str:
    from ..proof import stats

    return (
        f"Generate N continuations of the prompt by draft-and-verify rounds with the settings above and test the "
        f"joint law of the next {CHECK_L} characters against the target's exact law (chi-square over "
        f"{len(ALPHABET) ** CHECK_L:,} cells, small ones pooled, α = {stats.ALPHA:g}). N is capped at "
        f"{MAX_CHECK_N:,} so that a click answers in a few seconds."
    )


def needed_caption(need: int) -> str:
    from ..proof import stats

    return (
        f"After this prompt the test sees a TV shift of {stats.MIN_TV:g} with {stats.POWER:.0%} probability from "
        f"N = {need:,}" + (": beyond the cap, so expect an inconclusive verdict." if need > MAX_CHECK_N
                           else "; below that, expect an inconclusive verdict.")
    )  # fmt: skip


def check_metrics(j: Any) -> list[tuple[str, str, str]]:
    """(label, value, help) of a check's chi-square (a :class:`specviz.proof.stats.ChiSquare`)."""
    return [
        (f"chi-square ({j.dof} dof)", f"{j.statistic:,.1f}", f"{j.cells} cells after pooling"),
        (f"critical value (α = {j.alpha:g})", f"{j.critical_value:,.1f}", ""),
        ("TV(observed, exact)", f"{j.tv:.4f}", ""),
        (f"detectable TV ({j.power:.0%} power)", f"{j.detectable_tv:.4f}", ""),
    ]


class Shown(NamedTuple):
    """One verdict as a page lays it out: its box, the sentence, metrics (label, value, help), a chart, a note."""

    says: str  # pass, fail or inconclusive: the key of CHECK_BOXES
    sentence: str
    metrics: list[tuple[str, str, str]]
    figure: Any  # a plotly figure
    key: str  # the chart's widget key, after the page's prefix
    note: str | None


def shown_check(res: Check, bug: str | None, n: int) -> list[Shown]:
    """The page's check of the n-grams (``bug`` None: the correct verifier) as it is laid out."""
    from .figures import continuation_comparison

    says, sentence = check_verdict(res.joint, "the correct verifier" if bug is None else f"the bug {bug}", n,
                                   res.needed, correct=bug is None)  # fmt: skip
    fig = continuation_comparison(res.law, res.counts, cell_labels(CHECK_L))
    return [Shown(says, sentence, check_metrics(res.joint), fig, "law", None)]


def check_verdict(joint: Any, who: str, n: int, needed: int, correct: bool) -> tuple[str, str]:
    """(pass, fail or inconclusive; the sentence the page shows) for a check of ``who`` at ``n`` sequences.

    ``correct``: the correct verifier was checked (a failure is then a false alarm or a real fault).
    """
    from ..proof import stats
    from .results import joint_says

    says = joint_says(joint)
    if says == "inconclusive":
        return says, (
            f"**Inconclusive** for {who}: at N = {n:,} the test detects only a TV shift of "
            f"{joint.detectable_tv:.3f} (needs ≤ {stats.MIN_TV:g}); this law needs N ≥ {needed:,}."
        )
    if says == "pass":
        return says, (
            f"**Pass** for {who}: the chi-square stays below its critical value, and the test would have "
            f"caught any shift of TV ≥ {joint.detectable_tv:.3f} with {joint.power:.0%} probability."
        )
    if joint.impossible:
        why = f"{joint.impossible:,} sequences the target cannot produce were seen: the law is certainly wrong."
    elif correct:
        why = (f"the chi-square passed its critical value: a false alarm (it happens in {joint.alpha:g} of "
               "honest runs) or a real fault; rerun with another seed.")  # fmt: skip
    else:
        why = "the chi-square passed its critical value: the test catches this bug here."
    return says, f"**Fail** for {who}: {why}"


def last_round_caption(steps: Sequence[Step]) -> str:
    """What the last round emitted (steered by the prompt: shown as plain text)."""
    from .links import plain

    last = steps[-1]
    return f"Round {len(steps)}: emitted {plain(repr(decode(last.emitted)))}" + (" (bonus)" if last.bonus else "")


def round_rows(last: Step) -> list[dict[str, Any]]:
    """One round's drafts as table rows: each draft, p and q, its acceptance chance, its coin, what happened."""
    rows = []
    for i, x in enumerate(last.drafts):
        reached = i <= last.accepted and i < len(last.drafts)
        rows.append({
            "draft": repr(ALPHABET[x]), "p(x)": round(last.p_draft[i], 5), "q(x)": round(last.q_draft[i], 5),
            "min(1, p/q)": round(min(1.0, last.p_draft[i] / last.q_draft[i]), 5),
            "coin u": round(last.coins[i], 5) if reached else None,
            "result": "accepted" if i < last.accepted else "rejected" if i == last.accepted else "not reached",
        })  # fmt: skip
    return rows
