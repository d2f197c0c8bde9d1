"""One position: the typed p/q table, its presets, and sampling the rule (or a bug) on it.

# K drafts, V vocabulary, n sampled rows

A context-free position has the same target p and draft q at every draft position, so its
rows are broadcast views of two vectors and the first emitted token follows
:func:`specviz.proof.theory.position_law` exactly. Randomness comes from an explicit seed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError, digits
from ..proof import bugs, theory
from ..verifiers.verify import Verification, verify
from .limits import MAX_POSITION_K, MAX_TABLE_V, check_text

RENORMALIZE_ATOL = 1e-9  # |sum - 1| above this is the user's doing and is reported, not rounding

# --- the p/q table -------------------------------------------------------------------------------


class ParsedDist(NamedTuple):
    probs: np.ndarray  # (V,) float64 summing to 1
    raw_sum: float  # what the typed entries summed to
    note: str | None  # the visible renormalization: "your p summed to 1.3; divided by 1.3"


def parse_distribution(values: Sequence[Any], name: str) -> ParsedDist:
    """Typed table entries (V,) -> a probability vector, or an InputError saying what is wrong.

    Entries must be finite and non-negative with at least one positive; a sum other than 1
    is divided out and reported in ``note``, never silently.
    """
    vals = list(values)
    if not vals:
        raise InputError(name, "at least one token", "an empty table")
    if len(vals) > MAX_TABLE_V:
        raise InputError(name, f"at most {MAX_TABLE_V} tokens (a readable table)", f"{len(vals)}")
    out = np.empty(len(vals), dtype=np.float64)
    for i, v in enumerate(vals):
        try:
            x = float(v) if v is not None else float("nan")
        except (TypeError, ValueError):
            raise InputError(name, "a number in every row", f"{v!r} for token {i}") from None
        if x != x:
            raise InputError(name, "a number in every row", f"an empty or NaN entry for token {i}")
        if math.isinf(x):
            raise InputError(name, "finite numbers", f"{x} for token {i}")
        if x < 0:
            raise InputError(name, "non-negative probabilities", f"{x:g} for token {i}")
        out[i] = x
    with np.errstate(over="ignore"):
        total = float(out.sum())
    if not math.isfinite(total):  # 1e308 + 1e308: each entry finite, their sum not
        raise InputError(name, "entries whose sum is a finite number", f"a sum that overflows ({total})")
    if total <= 0:
        raise InputError(name, "at least one positive entry", "all zeros: there is nothing to normalize")
    note = None
    if abs(total - 1) > RENORMALIZE_ATOL:
        note = f"your {name} summed to {digits(total)}; divided by {digits(total)}"
    return ParsedDist(out / total, total, note)


class ParsedText(NamedTuple):
    values: list[float]  # (V,) the numbers as read, before normalization
    dist: ParsedDist  # the same, validated and normalized
    message: str  # what was done: "read 4 values (1/2 → 0.5); normalized: sum was 1.02, each value divided by it"


TEXT_EXPECTED = "numbers such as 0.25, 1/4, 25% or 2.5e-1, separated by commas or spaces"


def parse_number(item: str) -> float:
    """One typed number: a decimal or scientific ``"1e-3"``, a fraction ``"1/2"``, a percent ``"50%"``.

    Raises ValueError when ``item`` is none of these (a zero denominator included).
    """
    s = item.strip()
    if s.endswith("%"):
        return float(s[:-1]) / 100
    if "/" in s:
        num, den = s.split("/", 1)
        d = float(den)
        if d == 0:
            raise ValueError(item)
        return float(num) / d
    return float(s)


def parse_text(text: str, name: str) -> ParsedText:
    """A typed list of probabilities -> the values read, the validated distribution, and a note.

    Items are separated by commas, semicolons, spaces or new lines; each is a number in any form
    :func:`parse_number` reads. The result must pass :func:`parse_distribution` (finite,
    non-negative, a positive sum, at most MAX_TABLE_V values); a sum other than 1 is divided out
    and the message says so.
    """
    items = [s for s in re.split(r"[,;\s]+", check_text(text, name)) if s]  # the length first
    if not items:
        raise InputError(name, TEXT_EXPECTED, "an empty text")
    values = []
    converted = []
    for i, item in enumerate(items):
        try:
            v = parse_number(item)
        except (ValueError, OverflowError):
            raise InputError(name, TEXT_EXPECTED, f"{item[:20]!r} (item {i + 1})") from None
        if not math.isfinite(v):
            raise InputError(name, "finite numbers", f"{item[:20]!r} (item {i + 1})")
        values.append(v)
        if not _plain_decimal(item):
            converted.append(f"{item.strip()} → {v:.6g}")
    dist = parse_distribution(values, name)
    message = f"read {len(values)} value{'s' if len(values) != 1 else ''}"
    if converted:
        message += " (" + "; ".join(converted[:6]) + ("; …" if len(converted) > 6 else "") + ")"
    if dist.note:
        message += f"; normalized: sum was {digits(dist.raw_sum)}, each value divided by it"
    else:
        message += "; they sum to 1"
    return ParsedText(values, dist, message)


class TypedTexts(NamedTuple):
    values: dict[str, list[float]]  # "p" and/or "q": the values read (a text left empty is not read)
    notes: dict[str, str]  # what was read from each ("p" or "q"), e.g. a sum divided out; echoes the typed text
    errors: list[InputError]  # one per text that could not be read (quoting what was typed)


def read_texts(texts: Mapping[str, str]) -> TypedTexts:
    """The typed p and q texts (``texts["p"]``, ``texts["q"]``; either may be empty) read with :func:`parse_text`."""
    values: dict[str, list[float]] = {}
    notes: dict[str, str] = {}
    errors: list[InputError] = []
    for name in ("p", "q"):
        text = texts.get(name, "")
        if not text.strip():
            continue
        try:
            parsed = parse_text(text, name)
        except InputError as e:
            errors.append(e)
            continue
        values[name] = parsed.values
        notes[name] = parsed.message
    return TypedTexts(values, notes, errors)


class TypedPair(NamedTuple):
    p: tuple[float, ...]  # (V,) normalized
    q: tuple[float, ...]  # (V,) normalized
    notes: list[str]  # one per text divided by its sum: "p summed to 1.2, not 1; each value was divided by it"


def parse_pair(p_text: str, q_text: str, max_v: int, why: str = "") -> TypedPair:
    """Typed p and q (as :func:`parse_text` reads them) of one length in [1, max_v], each normalized;
    ``why`` says why at most max_v.

    A sum other than 1 is divided out and said in ``notes``, as the Why-it-is-exact page does,
    rather than refused: the user typed weights, and the page shows what it used.
    """
    read = {name: parse_text(text, name) for name, text in (("p", p_text), ("q", q_text))}
    V = len(read["p"].values)
    if not 1 <= V <= max_v:
        raise InputError("p", f"1 to {max_v} probabilities" + (f" ({why})" if why else ""), f"{V} of them")
    if len(read["q"].values) != V:
        raise InputError("q", f"{V} probabilities, as many as p", f"{len(read['q'].values)}")
    notes = [
        f"{name} summed to {digits(r.dist.raw_sum)}, not 1; each value was divided by it"
        for name, r in read.items()
        if r.dist.note
    ]
    return TypedPair(tuple(read["p"].dist.probs.tolist()), tuple(read["q"].dist.probs.tolist()), notes)


def _plain_decimal(item: str) -> bool:
    return re.fullmatch(r"\s*[+]?\d*\.?\d+\s*", item) is not None


RESIDUAL_ATOL = 1e-12  # residual against p, computed in float64


class ResidualIsTarget(NamedTuple):
    """Whether the residual max(0, p − q) / (1 − a) is p itself, and whether the closed condition says so."""

    equal: bool  # the computed residual equals p within RESIDUAL_ATOL
    scaled: bool  # the condition: q = a·p wherever p > 0 (q's other 1 − a on tokens p gives 0), or a = 1
    acceptance_rate: float


def residual_is_target(target_probs: Sequence[float], draft_probs: Sequence[float]) -> ResidualIsTarget:
    """When is the residual p itself? Exactly when q = a·p on p's support (or a = 1, where it is unused).

    For a token with p(x) > 0 the residual is max(0, p(x) − q(x)) / (1 − a); it equals p(x) iff
    q(x) = a·p(x) (the case q(x) >= p(x) would need (1 − a) p(x) = 0). Summing over p's support,
    q puts a there and its remaining 1 − a on tokens with p = 0. Example: p = [.5, .5, 0],
    q = [.25, .25, .5] at a = 0.5; it is not "only a = 1".
    """
    d = theory.decompose(target_probs, draft_probs)
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    a = d.acceptance_rate
    on = p > 0
    scaled = bool(np.allclose(q[on], a * p[on], rtol=0, atol=RESIDUAL_ATOL))  # a = 1 gives q = p here too
    return ResidualIsTarget(bool(np.allclose(d.residual, p, rtol=0, atol=RESIDUAL_ATOL)), scaled, a)


REFERENCE_P = theory.REFERENCE_P  # the textbook p, one definition for the whole project
# "textbook": the 2.533-token example (prove's scenario of that name); "reference" is reserved for the Markov-chain
# scenario and the reference verifier, one name per meaning.
PRESETS = ("textbook", "p == q", "disjoint supports", "one-hot q", "random")
PRESET_HELP = {
    "textbook": "p = [0.5, 0.3, 0.15, 0.05] against uniform q: a = 0.7, 2.533 tokens per step at K = 3",
    "p == q": "the drafter is the target: every draft is accepted, the residual is never used",
    "disjoint supports": "no token both can produce: a = 0, every draft is rejected",
    "one-hot q": "a deterministic drafter always proposing token 1: accepted with probability p(1)",
    "random": "Dirichlet(1) p and q over 6 tokens, from the seed",
}
RANDOM_PRESET_V = 6


def preset(name: str, seed: int = 0) -> tuple[list[float], list[float]]:
    """(p, q) of a named preset, as short decimals that sum to exactly 1 in thousandths."""
    if name == "textbook":
        return list(REFERENCE_P), [0.25] * 4
    if name == "p == q":
        return list(REFERENCE_P), list(REFERENCE_P)
    if name == "disjoint supports":
        return [0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]
    if name == "one-hot q":
        return list(REFERENCE_P), [0.0, 1.0, 0.0, 0.0]
    if name == "random":
        rng = np.random.default_rng([seed, 4])
        p = _thousandths(rng.dirichlet(np.ones(RANDOM_PRESET_V)))
        return p, _thousandths(rng.dirichlet(np.ones(RANDOM_PRESET_V)))
    raise InputError("preset", "one of " + ", ".join(PRESETS), repr(name))


def matching_preset(target: Sequence[Any], draft: Sequence[Any], seed: int = 0) -> str | None:
    """The preset whose table equals (``target``, ``draft``) as typed, or None for a table of your own."""
    for name in PRESETS:
        p, q = preset(name, seed)
        if _same(target, p) and _same(draft, q):
            return name
    return None


def _same(typed: Sequence[Any], values: list[float]) -> bool:
    try:
        x = np.asarray(list(typed), dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return x.shape == (len(values),) and bool(np.all(np.abs(x - values) <= 1e-12))


class ShowMe(NamedTuple):
    """A setting where a bug changes the law of one position: a preset and a draft count."""

    preset: str
    K: int
    tv: float  # TV(the bug's law, p) there


SHOW_ME_SEED = 0  # the seed of the "random" preset among the candidates


def show_me(bug: str) -> ShowMe | None:
    """Where ``bug`` changes the one-position law most: the preset and K (1..MAX_POSITION_K)
    with the largest TV(law, p), the first in :data:`PRESETS` order and the smallest K on ties.

    None when no candidate shows anything: the bug has no one-position effect (its first token
    follows p, or it has no single-position law) and only the end-to-end tests can see it.
    """
    from ..proof import theory  # late: theory imports markov, which the page does not otherwise need

    bugs.get(bug)
    best: ShowMe | None = None
    for name in PRESETS:
        p, q = preset(name, SHOW_ME_SEED)
        for K in range(1, MAX_POSITION_K + 1):
            law = theory.position_law(p, q, bug, K=K)
            if law is None:
                return None
            tv = theory.total_variation(law, p)
            if tv > SHOWN_TV and (best is None or tv > best.tv + 1e-12):
                best = ShowMe(name, K, tv)
    return best


SHOWN_TV = 1e-9  # a TV below this is rounding, not an effect


def _thousandths(x: np.ndarray) -> list[float]:
    """Round a distribution to multiples of 0.001 that add up to exactly 1000 thousandths."""
    k = np.floor(x * 1000).astype(np.int64)
    k[np.argsort(k - x * 1000)[: 1000 - int(k.sum())]] += 1  # largest remainders get the rest
    return [int(v) / 1000 for v in k]


# --- sampling the rule at one position -----------------------------------------------------------


def draw_iid(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from one distribution (V,) for uniforms of any shape, as int64.

    The same rule as :func:`specviz.proof.simulate.sample_rows` (the first token whose running sum
    exceeds u * total, never past the last token with mass) with one shared CDF instead of a
    copy per row: n = 10^5 rows of K = 8 drafts over V = 64 tokens would otherwise cumsum a
    400 MB array.
    """
    cdf = np.cumsum(probs)  # (V,)
    last = int(np.flatnonzero(probs > 0)[-1])
    thr = u * cdf[-1]
    if last <= 8:  # a few comparisons per draw beat a binary search (the Tokens page: V = 2)
        tok = np.zeros(np.shape(u), dtype=np.int64)
        for v in range(last):  # count of cdf[v] <= thr below the last token with mass
            tok += cdf[v] <= thr
        return tok
    tok = np.searchsorted(cdf, thr, side="right")  # = count of cdf <= u * total
    return np.minimum(tok, last).astype(np.int64)


def verify_context_free(
    target_probs: np.ndarray,
    draft_probs: np.ndarray,
    draft_tokens: np.ndarray,
    rng: np.random.Generator,
    verifier: Callable[..., Verification] = verify,
) -> Verification:
    """Verify n rows of K drafts each, every position with target p and draft q.

    target_probs (V,), draft_probs (V,): validated distributions; draft_tokens (n, K).
    ``verifier`` has the signature of :func:`specviz.verify` (a bug's verifier, say); it is
    called with ``rng`` and without validation.
    """
    n, K = draft_tokens.shape
    V = target_probs.shape[0]
    target = np.broadcast_to(target_probs, (n, K + 1, V))  # (n, K+1, V) views of one row: no copy
    draft = np.broadcast_to(draft_probs, (n, K, V))  # (n, K, V)
    return verifier(target, draft, draft_tokens, np.full(n, K, dtype=np.int64), rng=rng, validate=False)


class PositionDraws(NamedTuple):
    """n context-free verifications of K drafts each, and the first token each one emitted."""

    first_tokens: np.ndarray  # (n,) int64
    verification: Verification  # NumPy arrays, (n, ...)
    draft_tokens: np.ndarray  # (n, K)


def sample_position(
    target_probs: np.ndarray, draft_probs: np.ndarray, n: int, K: int, bug: str | None, seed: Sequence[int] | int
) -> PositionDraws:
    """Run the rule (or the named bug) on n rows whose every position has target p and draft q.

    target_probs (V,), draft_probs (V,): validated distributions. Drafts are drawn from q,
    except for ``greedy_draft_sampled_q``, whose drafter always proposes argmax q while
    reporting q. The first emitted token of each row follows
    :func:`specviz.proof.theory.position_law`.
    """
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    if not 1 <= K <= MAX_POSITION_K:
        raise InputError("K", f"drafts per row in [1, {MAX_POSITION_K}]", str(K))
    if n < 1:
        raise InputError("n", "at least one row", str(n))
    rng = np.random.default_rng(seed)
    b = bugs.get(bug) if bug else None
    if b is not None and b.drafter_mode == "argmax_reports_softmax":
        drafts = np.full((n, K), int(np.argmax(q)), dtype=np.int64)
    else:
        drafts = draw_iid(q, rng.random((n, K)))  # (n, K)
    res = verify_context_free(p, q, drafts, rng, b.verifier if b is not None else verify)
    return PositionDraws(np.asarray(res.tokens)[:, 0], res, drafts)


def trace_table(draws: PositionDraws, target_probs: np.ndarray, draft_probs: np.ndarray, row: int = 0) -> list[dict]:
    """One traced verification, a dict per step: each tested draft, then the drawn token.

    Keys: step, token, p(x), q(x), p/q, u, outcome. ``u`` is the acceptance coin of a draft,
    or the uniform of the replacement / bonus draw; acceptance happened iff u < p/q.
    """
    res = draws.verification
    p, q = np.asarray(target_probs), np.asarray(draft_probs)

    def step(name: str, x: int, ratio: float, u: float, outcome: str) -> dict:
        return {
            "step": name,
            "token": x,
            "p(x)": float(p[x]),
            "q(x)": float(q[x]),
            "p/q": ratio,
            "u": u,
            "outcome": outcome,
        }

    n_acc, n_tok = int(res.num_accepted[row]), int(res.num_tokens[row])
    rows = []
    for i, u in enumerate(np.asarray(res.accept_uniforms)[row]):
        if np.isnan(u):  # a position after the rejection: never tested
            continue
        outcome = "accepted" if i < n_acc else "rejected"
        rows.append(step(f"draft {i}", int(draws.draft_tokens[row, i]), float(res.ratios[row, i]), float(u), outcome))
    if n_tok > n_acc:
        kind = "bonus (every draft accepted)" if bool(res.bonus[row]) else "replacement (after the rejection)"
        x = int(res.tokens[row, n_acc])
        rows.append(step(f"slot {n_acc}", x, float("nan"), float(res.sample_uniforms[row]), kind))
    return rows


class Samples:
    """What a visitor sampled at one setting (``key``): counts of the first token, the last single draw traced.

    Why it is exact keeps one in session state; a new p, q, bug, K or seed starts a new one.
    """

    def __init__(self, key: Hashable, V: int) -> None:
        self.key = key
        self.counts = np.zeros(V, dtype=np.int64)
        self.clicks = 0  # each click draws with its own seed: [seed, clicks]
        self.sizes: list[int] = []  # the size of each click's draw, in order: the link replays them
        self.trace: list[dict] | None = None  # the last single verification, for its table
        self.single: int | None = None  # the token of the last single sample, marked on the chart

    def add(self, draws: PositionDraws, target_probs: np.ndarray, draft_probs: np.ndarray) -> None:
        """Count ``draws``' first tokens; one draw alone is also traced and marked."""
        n = len(draws.first_tokens)
        self.clicks += 1
        self.sizes = [*self.sizes, n]
        self.counts = self.counts + np.bincount(draws.first_tokens, minlength=len(self.counts))
        self.trace = trace_table(draws, target_probs, draft_probs) if n == 1 else self.trace
        self.single = int(draws.first_tokens[0]) if n == 1 else None

    def draw(self, target_probs: np.ndarray, draft_probs: np.ndarray, sizes: Sequence[int], K: int, bug: str | None,
             seed: int) -> InputError | None:  # fmt: skip
        """Sample each of ``sizes`` rows in turn, a click each (:func:`sample_position` with the click's own seed
        ``[seed, clicks]``), and add them; stops at the first error, which it returns."""
        for n in sizes:
            try:
                draws = sample_position(target_probs, draft_probs, n, K, bug, [seed, self.clicks])
            except InputError as e:
                return e
            self.add(draws, target_probs, draft_probs)
        return None

    def reset(self) -> None:
        self.__init__(self.key, len(self.counts))  # type: ignore[misc]

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    @property
    def freq(self) -> np.ndarray | None:
        """Sampled frequencies of each token; None before the first sample."""
        return self.counts / self.total if self.total else None
