"""Helpers behind the app's pages: what users type, settings in links, caps, demo batches.

# B rows, K drafts (padded width), V vocabulary, n sampled rows

Everything here is a pure function of its arguments (randomness from an explicit seed), so
it is tested headless; nothing imports Streamlit. Pages read widgets, call these and
:mod:`specviz.theory` / :mod:`specviz.prove` for every number, and lay out the result.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from . import theory
from .bugs import BUGS
from .errors import InputError
from .simulate import sample_rows
from .verify import Uniforms, Verification, verify

# --- caps: inputs that would take minutes or exhaust memory ------------------------------------

MAX_TABLE_V = 64  # rows of the editable p/q table: more is unreadable on a projector
MAX_POSITION_K = 8  # drafts per row on the one-position page
MAX_BATCH_ELEMENTS = 20_000_000  # B*(K+1)*V: 80 MB per float32 tensor, a few seconds to generate
MAX_PROVE_N = 1_000_000  # sequences in one Bug-lab test: ~3 s on a laptop core
MAX_TOKENS_N = 200_000  # rows per measured point on the tokens page (17 points, two verifiers)
RENORMALIZE_ATOL = 1e-9  # |sum - 1| above this is the user's doing and is reported, not rounding


class Capped(NamedTuple):
    value: int
    note: str | None  # why the value was lowered; None when it was not


def cap(value: int, limit: int, what: str, why: str) -> Capped:
    """``min(value, limit)``, with a sentence saying so when the cap applies."""
    if value <= limit:
        return Capped(int(value), None)
    return Capped(int(limit), f"{what} capped at {limit:,} (you asked for {value:,}): {why}.")


# --- settings in the link ----------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One setting of a page that lives in the link as ``?name=text``."""

    name: str
    default: Any
    parse: Callable[[str], Any]  # text -> value; raises ValueError when the text is not valid
    expected: str  # what a valid value looks like, for the note shown on a bad link
    fmt: Callable[[Any], str] = str


def int_param(name: str, default: int, low: int, high: int | None = None) -> Param:
    def parse(text: str) -> int:
        v = int(text)
        if v < low or (high is not None and v > high):
            raise ValueError(text)
        return v

    where = f"in [{low}, {high}]" if high is not None else f">= {low}"
    return Param(name, default, parse, f"an integer {where}")


def float_param(name: str, default: float, low: float, high: float) -> Param:
    def parse(text: str) -> float:
        v = float(text)
        if not low <= v <= high:  # also rejects NaN
            raise ValueError(text)
        return v

    return Param(name, default, parse, f"a number in [{low:g}, {high:g}]", lambda v: f"{v:g}")


def choice_param(name: str, default: str, choices: Sequence[str]) -> Param:
    options = tuple(choices)

    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(text)
        return text

    return Param(name, default, parse, "one of " + ", ".join(repr(c) for c in options))


def format_floats(values: Sequence[float]) -> str:
    """Comma list with enough digits to round-trip what a user typed; NaN for empty cells."""
    return ",".join("nan" if v is None or v != v else f"{float(v):.12g}" for v in values)


def parse_floats(text: str) -> list[float]:
    """A comma list of numbers (``nan`` or an empty item for an empty cell)."""
    items = [s.strip() for s in str(text).split(",")]
    if len(items) > MAX_TABLE_V:
        raise ValueError(text)
    return [float(s) if s else float("nan") for s in items]


def floats_param(name: str, default: Sequence[float]) -> Param:
    return Param(name, list(default), parse_floats, f"a comma list of at most {MAX_TABLE_V} numbers", format_floats)


def text_param(name: str, default: str, max_len: int = 2000) -> Param:
    def parse(text: str) -> str:
        if len(text) > max_len:
            raise ValueError(text)
        return text

    return Param(name, default, parse, f"text of at most {max_len} characters")


class Decoded(NamedTuple):
    values: dict[str, Any]
    notes: list[str]  # one sentence per link setting that was not valid and fell back to its default


def decode_params(query: Mapping[str, Any], params: Sequence[Param]) -> Decoded:
    """Settings from a link's query parameters; bad or missing ones take their defaults."""
    values, notes = {}, []
    for p in params:
        raw = query.get(p.name)
        if isinstance(raw, list):  # a repeated key: the last one wins, as in st.query_params
            raw = raw[-1] if raw else None
        if raw is None:
            values[p.name] = p.default
            continue
        try:
            values[p.name] = p.parse(str(raw))
        except (ValueError, TypeError, OverflowError):
            values[p.name] = p.default
            shown = str(raw) if len(str(raw)) <= 40 else str(raw)[:40] + "…"
            notes.append(
                f"The link's setting {p.name}={shown!r} is not valid (expected {p.expected}); "
                f"using the default {p.fmt(p.default)}."
            )
    return Decoded(values, notes)


def encode_params(values: Mapping[str, Any], params: Sequence[Param]) -> dict[str, str]:
    """Query parameters that reproduce ``values`` (every setting, so defaults may change safely)."""
    return {p.name: p.fmt(values[p.name]) for p in params if p.name in values}


def init_state(
    query: Mapping[str, Any], state: MutableMapping[str, Any], params: Sequence[Param], prefix: str
) -> list[str]:
    """Seed ``state[prefix + name]`` from the link for settings the session does not hold yet.

    Returns the notes about bad link values that were used. Settings already in ``state``
    (the user has been on the page this session) are left alone.
    """
    notes = []
    for p in params:
        if prefix + p.name in state:
            continue
        decoded = decode_params(query, [p])
        state[prefix + p.name] = decoded.values[p.name]
        notes += decoded.notes
    return notes


# --- one position: the p/q table ---------------------------------------------------------------


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
    total = float(out.sum())
    if total <= 0:
        raise InputError(name, "at least one positive entry", "all zeros: there is nothing to normalize")
    note = None
    if abs(total - 1) > RENORMALIZE_ATOL:
        note = f"your {name} summed to {total:.6g}; divided by {total:.6g}"
    return ParsedDist(out / total, total, note)


REFERENCE_P = (0.5, 0.3, 0.15, 0.05)
PRESETS = ("reference", "p == q", "disjoint supports", "one-hot q", "random")
PRESET_HELP = {
    "reference": "p = [0.5, 0.3, 0.15, 0.05] against uniform q: a = 0.7, the textbook example",
    "p == q": "the drafter is the target: every draft is accepted, the residual is never used",
    "disjoint supports": "no token both can produce: a = 0, every draft is rejected",
    "one-hot q": "a deterministic drafter always proposing token 1: accepted with probability p(1)",
    "random": "Dirichlet(1) p and q over 6 tokens, from the seed",
}
RANDOM_PRESET_V = 6


def preset(name: str, seed: int = 0) -> tuple[list[float], list[float]]:
    """(p, q) of a named preset, as short decimals that sum to exactly 1 in thousandths."""
    if name == "reference":
        return list(REFERENCE_P), [0.25] * 4
    if name == "p == q":
        return list(REFERENCE_P), list(REFERENCE_P)
    if name == "disjoint supports":
        return [0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]
    if name == "one-hot q":
        return list(REFERENCE_P), [0.0, 1.0, 0.0, 0.0]
    if name == "random":
        rng = np.random.default_rng([seed, 4])
        return _thousandths(rng.dirichlet(np.ones(RANDOM_PRESET_V))), _thousandths(
            rng.dirichlet(np.ones(RANDOM_PRESET_V))
        )
    raise InputError("preset", "one of " + ", ".join(PRESETS), repr(name))


def _thousandths(x: np.ndarray) -> list[float]:
    """Round a distribution to multiples of 0.001 that add up to exactly 1000 thousandths."""
    k = np.floor(x * 1000).astype(np.int64)
    k[np.argsort(k - x * 1000)[: 1000 - int(k.sum())]] += 1  # largest remainders get the rest
    return [int(v) / 1000 for v in k]


def draw_iid(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from one distribution (V,) for uniforms of any shape, as int64.

    The same rule as :func:`specviz.simulate.sample_rows` (the first token whose running sum
    exceeds u * total, never past the last token with mass) with one shared CDF instead of a
    copy per row.
    """
    cdf = np.cumsum(probs)  # (V,)
    tok = np.searchsorted(cdf, u * cdf[-1], side="right")  # = count of cdf <= u * total
    last = int(np.flatnonzero(probs > 0)[-1])
    return np.minimum(tok, last).astype(np.int64)


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
    :func:`specviz.theory.position_law`.
    """
    p, q = np.asarray(target_probs, dtype=np.float64), np.asarray(draft_probs, dtype=np.float64)
    if not 1 <= K <= MAX_POSITION_K:
        raise InputError("K", f"drafts per row in [1, {MAX_POSITION_K}]", str(K))
    if n < 1:
        raise InputError("n", "at least one row", str(n))
    V = p.shape[0]
    rng = np.random.default_rng(seed)
    b = BUGS.get(bug) if bug else None
    if bug and b is None:
        raise InputError("bug", "one of " + ", ".join(BUGS), repr(bug))
    if b is not None and b.drafter_mode == "argmax_reports_softmax":
        drafts = np.full((n, K), int(np.argmax(q)), dtype=np.int64)
    else:
        drafts = draw_iid(q, rng.random((n, K)))  # (n, K)
    target = np.broadcast_to(p, (n, K + 1, V))  # (n, K+1, V) views of one row: no copy
    draft = np.broadcast_to(q, (n, K, V))  # (n, K, V)
    fn = b.verifier if b is not None else verify
    res = fn(target, draft, drafts, np.full(n, K, dtype=np.int64), rng=rng, validate=False)
    return PositionDraws(np.asarray(res.tokens)[:, 0], res, drafts)


def trace_table(draws: PositionDraws, target_probs: np.ndarray, draft_probs: np.ndarray, row: int = 0) -> list[dict]:
    """One traced verification, a dict per step: each tested draft, then the drawn token.

    Keys: step, token, p(x), q(x), p/q, u, outcome. ``u`` is the acceptance coin of a draft,
    or the uniform of the replacement / bonus draw; acceptance happened iff u < p/q.
    """
    res = draws.verification
    p, q = np.asarray(target_probs), np.asarray(draft_probs)
    n_acc, n_tok = int(res.num_accepted[row]), int(res.num_tokens[row])
    rows = []
    for i, u in enumerate(np.asarray(res.accept_uniforms)[row]):
        if np.isnan(u):
            continue
        x = int(draws.draft_tokens[row, i])
        rows.append(
            {
                "step": f"draft {i}",
                "token": x,
                "p(x)": float(p[x]),
                "q(x)": float(q[x]),
                "p/q": float(res.ratios[row, i]),
                "u": float(u),
                "outcome": "accepted" if i < n_acc else "rejected",
            }
        )
    if n_tok > n_acc:
        kind = "bonus (every draft accepted)" if bool(res.bonus[row]) else "replacement (after the rejection)"
        x = int(res.tokens[row, n_acc])
        rows.append(
            {
                "step": f"slot {n_acc}",
                "token": x,
                "p(x)": float(p[x]),
                "q(x)": float(q[x]),
                "p/q": float("nan"),
                "u": float(res.sample_uniforms[row]),
                "outcome": kind,
            }
        )
    return rows


# --- batches: ragged rows, backends, timing ----------------------------------------------------

BACKENDS = ("NumPy", "PyTorch CPU", "PyTorch CUDA")
COUNT_MODES = ("random 0..K", "all K", "typed")
SOURCES = ("random Dirichlet", "peaked")
PEAKED_SHARPNESS = 4.0  # softmax(4 z) for z ~ N(0, 1): a few tokens carry most of the mass
PEAKED_DRAFT_NOISE = 0.2  # the drafter sees the target's logits plus N(0, 0.2^2) noise: a ~ 0.7-0.8


class BatchSize(NamedTuple):
    B: int
    V: int
    notes: list[str]  # one sentence per cap that applied


def cap_batch(B: int, K: int, V: int) -> BatchSize:
    """Lower V, then B, so that B*(K+1)*V stays within :data:`MAX_BATCH_ELEMENTS`."""
    why = f"B·(K+1)·V is limited to {MAX_BATCH_ELEMENTS:,} elements per tensor (memory, and a click that answers fast)"
    v = cap(V, max(MAX_BATCH_ELEMENTS // (K + 1), 1), "V", why)
    b = cap(B, max(MAX_BATCH_ELEMENTS // ((K + 1) * v.value), 1), "B", why)
    return BatchSize(b.value, v.value, [n for n in (v.note, b.note) if n])


def parse_counts(text: str, B: int, K: int) -> np.ndarray:
    """Typed per-row draft counts: ``"4, 2, 0, 3"`` -> (B,) int64, each in [0, K]."""
    items = [s.strip() for s in str(text).replace(";", ",").split(",") if s.strip()]
    if len(items) != B:
        raise InputError("draft counts", f"B = {B} comma-separated counts, one per row", f"{len(items)}")
    out = np.empty(B, dtype=np.int64)
    for i, s in enumerate(items):
        try:
            v = int(s)
        except ValueError:
            raise InputError("draft counts", "whole numbers", f"{s!r} for row {i}") from None
        if not 0 <= v <= K:
            raise InputError("draft counts", f"counts in [0, K = {K}]", f"{v} for row {i}")
        out[i] = v
    return out


def draft_counts(mode: str, B: int, K: int, seed: int, typed: str = "") -> np.ndarray:
    """(B,) draft counts: uniform in 0..K, all K, or typed (see :func:`parse_counts`)."""
    if mode == "random 0..K":
        return np.random.default_rng([seed, 1]).integers(0, K + 1, size=B)
    if mode == "all K":
        return np.full(B, K, dtype=np.int64)
    if mode == "typed":
        return parse_counts(typed, B, K)
    raise InputError("draft count mode", "one of " + ", ".join(COUNT_MODES), repr(mode))


class BatchInputs(NamedTuple):
    """One padded batch and the uniforms every backend is run with."""

    target_probs: np.ndarray  # (B, K+1, V) float32
    draft_probs: np.ndarray  # (B, K, V) float32
    draft_tokens: np.ndarray  # (B, K) int64, -1 past num_draft
    num_draft: np.ndarray  # (B,) int64
    uniforms: Uniforms  # accept (B, K), sample (B,) float64


def make_batch(
    B: int, K: int, V: int, num_draft: np.ndarray, source: str, concentration: float, seed: int
) -> BatchInputs:
    """Random target and draft rows, drafts drawn from q, and explicit uniforms.

    ``source``: ``"random Dirichlet"`` draws every row of p and of q independently from
    Dirichlet(concentration) (small concentration: spiky rows, low acceptance); ``"peaked"``
    makes p = softmax(4 z) and q = softmax(4 (z + 0.2 noise)) from shared logits z, like a drafter
    that mostly agrees with its target.
    """
    if B < 1 or K < 0 or V < 1:
        raise InputError("batch", "B >= 1, K >= 0, V >= 1", f"B = {B}, K = {K}, V = {V}")
    if B * (K + 1) * V > MAX_BATCH_ELEMENTS:
        raise InputError("batch", f"B·(K+1)·V <= {MAX_BATCH_ELEMENTS:,}", f"{B * (K + 1) * V:,}")
    j = np.asarray(num_draft, dtype=np.int64)
    if j.shape != (B,) or (j.size and (j.min() < 0 or j.max() > K)):
        raise InputError("num_draft", f"(B,) = ({B},) counts in [0, {K}]", f"{j.tolist()[:8]}")
    rng = np.random.default_rng([seed, 2])
    if source == "random Dirichlet":
        if not concentration > 0:
            raise InputError("concentration", "a positive number", str(concentration))
        target = _dirichlet_rows(rng, concentration, (B, K + 1, V))
        draft = _dirichlet_rows(rng, concentration, (B, K, V))
    elif source == "peaked":
        z = rng.standard_normal((B, K + 1, V), dtype=np.float32)  # (B, K+1, V) shared logits
        target = _softmax(PEAKED_SHARPNESS * z)
        noise = rng.standard_normal((B, K, V), dtype=np.float32)
        draft = _softmax(PEAKED_SHARPNESS * (z[:, :K] + np.float32(PEAKED_DRAFT_NOISE) * noise))
        del z, noise
    else:
        raise InputError("source", "one of " + ", ".join(SOURCES), repr(source))
    u = rng.random(B * K)
    tokens = sample_rows(draft.reshape(B * K, V), u).reshape(B, K) if B * K else np.zeros((B, K), np.int64)
    tokens = np.where(np.arange(K)[None, :] < j[:, None], tokens, -1)  # (B, K), padding ignored
    uniforms = Uniforms(rng.random((B, K)), rng.random(B))
    return BatchInputs(target, draft, tokens, j, uniforms)


def _dirichlet_rows(rng: np.random.Generator, concentration: float, shape: tuple[int, ...]) -> np.ndarray:
    x = rng.standard_gamma(concentration, size=shape, dtype=np.float32)
    x[..., 0] += x.sum(-1) == 0  # a tiny concentration can underflow a whole row to 0
    x /= x.sum(-1, keepdims=True)
    return x


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(-1, keepdims=True)
    return z


def cuda_status() -> tuple[bool, str]:
    """Whether PyTorch sees a CUDA device, and a sentence saying which or why not."""
    import torch

    if torch.cuda.is_available():
        return True, f"CUDA device: {torch.cuda.get_device_name(0)}"
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return False, f"torch.cuda.is_available() is False on this machine (torch {torch.__version__}, {build})"


def _to_backend(inputs: BatchInputs, backend: str) -> tuple[Any, ...]:
    if backend == "NumPy":
        return inputs.target_probs, inputs.draft_probs, inputs.draft_tokens, inputs.num_draft, inputs.uniforms
    if backend not in BACKENDS:
        raise InputError("backend", "one of " + ", ".join(BACKENDS), repr(backend))
    import torch

    device = "cuda" if backend == "PyTorch CUDA" else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("backend", "a machine where torch.cuda.is_available()", "no CUDA device")

    def t(x: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)

    u = Uniforms(t(inputs.uniforms.accept), t(inputs.uniforms.sample))
    return t(inputs.target_probs), t(inputs.draft_probs), t(inputs.draft_tokens), t(inputs.num_draft), u


def _to_numpy(res: Verification) -> Verification:
    return Verification(*(x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x) for x in res))


def run_backend(inputs: BatchInputs, backend: str, *, validate: bool = True) -> Verification:
    """Verify the batch on one backend with the batch's uniforms; the result as NumPy arrays."""
    T, D, x, j, u = _to_backend(inputs, backend)
    return _to_numpy(verify(T, D, x, j, uniforms=u, validate=validate))


class Timing(NamedTuple):
    backend: str
    seconds: float  # median over the repeats, inputs already on the device, validation off
    repeats: int
    rows_per_second: float
    agrees: bool  # same tokens as NumPy on the same uniforms (checked before timing)
    rows_differing: int  # rows whose tokens differ from NumPy's (0 when agrees)


def time_backends(
    inputs: BatchInputs, backends: Sequence[str], *, budget_s: float = 0.3, max_repeats: int = 25
) -> list[Timing]:
    """Time each backend on the same inputs, after checking it returns NumPy's tokens."""
    reference = run_backend(inputs, "NumPy")
    out = []
    for backend in backends:
        args = _to_backend(inputs, backend)
        first = _to_numpy(verify(*args[:4], uniforms=args[4], validate=False))  # also the warm-up
        differing = int((first.tokens != reference.tokens).any(axis=1).sum())
        sync = _synchronizer(backend)
        times: list[float] = []
        while len(times) < max_repeats and (len(times) < 3 or sum(times) < budget_s):
            t0 = time.perf_counter()
            verify(*args[:4], uniforms=args[4], validate=False)
            sync()
            times.append(time.perf_counter() - t0)
        med = float(np.median(times))
        B = int(inputs.num_draft.shape[0])
        out.append(Timing(backend, med, len(times), B / med if med > 0 else float("inf"), differing == 0, differing))
    return out


def _synchronizer(backend: str) -> Callable[[], None]:
    if backend == "PyTorch CUDA":
        return sys.modules["torch"].cuda.synchronize
    return lambda: None


class BatchReport(NamedTuple):
    """What the Batch page shows of one run: the first rows in full, counts for every row."""

    head: Verification  # the first max_rows rows of the chosen backend's result
    head_draft_tokens: np.ndarray  # (R, K)
    num_draft: np.ndarray  # (B,)
    num_accepted: np.ndarray  # (B,)
    num_tokens: np.ndarray  # (B,)
    acceptance_rate: float  # accepted / tested drafts over the batch
    timings: list[Timing]
    generate_seconds: float  # building the random batch (not part of any timing)


def run_batch_demo(
    B: int,
    K: int,
    V: int,
    num_draft: np.ndarray,
    source: str,
    concentration: float,
    seed: int,
    backend: str,
    time_on: Sequence[str],
    *,
    max_rows: int = 32,
) -> BatchReport:
    """Build a batch, verify it on ``backend`` (validated), and time it on every backend in ``time_on``."""
    t0 = time.perf_counter()
    inputs = make_batch(B, K, V, num_draft, source, concentration, seed)
    gen = time.perf_counter() - t0
    res = run_backend(inputs, backend)
    tested = int(np.minimum(res.num_accepted + 1, inputs.num_draft).sum())  # draft positions whose coin counted
    timings = time_backends(inputs, time_on) if time_on else []
    head = Verification(*(np.asarray(x)[:max_rows] for x in res))
    return BatchReport(
        head=head,
        head_draft_tokens=inputs.draft_tokens[:max_rows],
        num_draft=inputs.num_draft,
        num_accepted=np.asarray(res.num_accepted),
        num_tokens=np.asarray(res.num_tokens),
        acceptance_rate=float(res.num_accepted.sum() / tested) if tested else float("nan"),
        timings=timings,
        generate_seconds=gen,
    )


# --- tokens per step ---------------------------------------------------------------------------


def two_token_pair(acceptance: float) -> tuple[np.ndarray, np.ndarray]:
    """p = [a, 1 - a] and q one-hot on token 0: ``theory.acceptance_rate(p, q) == a``.

    The drafter always proposes token 0 and the target accepts it with probability p(0) = a,
    independently at every position: the context-free setting of the closed form.
    """
    a = float(acceptance)
    if not 0 <= a <= 1:
        raise InputError("acceptance", "a rate in [0, 1]", str(acceptance))
    return np.array([a, 1 - a]), np.array([1.0, 0.0])


class Measured(NamedTuple):
    K: np.ndarray  # (M,) draft counts
    mean: np.ndarray  # (M,) mean tokens per verification
    se: np.ndarray  # (M,) standard error of the mean
    n: int  # rows per point


def measure_tokens(
    target_probs: np.ndarray, draft_probs: np.ndarray, Ks: Sequence[int], n: int, seed: int, *, bonus: bool = True
) -> Measured:
    """Mean tokens per verification for each K, by running the verifier on n context-free rows.

    ``bonus=False`` runs :data:`specviz.bugs.BUGS` ``["no_bonus"]``: the rule exactly, minus
    the bonus token.
    """
    p, q = theory.as_dist(target_probs, "target_probs"), theory.as_dist(draft_probs, "draft_probs")
    if n < 2:
        raise InputError("n", "at least 2 rows per point", str(n))
    fn = verify if bonus else BUGS["no_bonus"].verifier
    V = p.shape[0]
    means, ses = [], []
    for K in Ks:
        rng = np.random.default_rng([seed, int(K), int(bonus)])
        drafts = draw_iid(q, rng.random((n, K)))  # (n, K)
        res = fn(
            np.broadcast_to(p, (n, K + 1, V)),
            np.broadcast_to(q, (n, K, V)),
            drafts,
            np.full(n, K, dtype=np.int64),
            rng=rng,
            validate=False,
        )
        num = np.asarray(res.num_tokens, dtype=np.float64)
        means.append(num.mean())
        ses.append(num.std(ddof=1) / math.sqrt(n))
    return Measured(np.asarray(list(Ks), dtype=np.int64), np.asarray(means), np.asarray(ses), int(n))


def speedup(expected_tokens: float, K: int, draft_cost: float) -> float:
    """Tokens per unit of target time: E[tokens] / (1 + K c).

    One verification costs one target forward pass (scoring K + 1 positions costs about what
    scoring one does while decoding is memory-bound) plus K sequential drafter steps of
    relative cost c each; plain decoding emits 1 token per target pass.
    """
    if draft_cost < 0:
        raise InputError("draft_cost", "a relative cost c >= 0", str(draft_cost))
    return float(expected_tokens) / (1 + int(K) * float(draft_cost))


class SpeedupTable(NamedTuple):
    K: np.ndarray  # (M,)
    tokens: np.ndarray  # (M,) expected tokens per verification, with the bonus
    speedup: np.ndarray  # (M,)
    best_K: int  # the K with the largest modelled speedup (the smallest on ties)


def speedup_table(acceptance: float, Ks: Sequence[int], draft_cost: float) -> SpeedupTable:
    """:func:`speedup` over K for a context-free acceptance rate a."""
    k = np.asarray(list(Ks), dtype=np.int64)
    tokens = np.array([theory.expected_tokens(acceptance, int(K)) for K in k])
    s = np.array([speedup(t, int(K), draft_cost) for t, K in zip(tokens, k, strict=True)])
    return SpeedupTable(k, tokens, s, int(k[int(np.argmax(s))]))
