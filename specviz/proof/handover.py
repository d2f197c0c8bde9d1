"""Realistic rows at vocabulary V, handed to a verifier the way an engine calls it.

# B rows, K drafts (padded width), V vocabulary, N total drafts (flat layout)

``prove`` alone calls a verifier with float64 NumPy tables at V = 4. Engines ship float32 or
bfloat16 torch tensors at V = 32k-128k in a flat layout. The paired test
(:mod:`specviz.proof.ship`), the fault probes, the sweep and the black-box tests all call the
verifier with what this module builds.

**Realistic inputs** (:func:`realistic_tables`). Every target row and draft row is its own
context: Zipf-like logits (rank r has weight about r^-1.1) reshuffled per row by noise, a few
hot tokens, exact ties and near-ties at the top, exact zeros (a min-p cut: tokens below
e^-c times the row's largest probability are removed; c differs per row, some rows keep
every token), and a drafter whose row is the target's logits plus its own noise, temperature,
hot tokens and cut, so q has zeros where p has not and the other way round. Rows are ragged
(num_draft in [0, K], both ends present), drafts are drawn from q as given, and every table
is handed over (:class:`Handover`) in the asked dtype, backend, device and layout
(:class:`CallSpec`). The values the verifier gets are the values the reference gets (rounded
to the dtype first).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers._xp import is_torch
from ..verifiers.reference import verify as reference_verify
from ..verifiers.verify import PAD_TOKEN

DTYPES = ("float32", "bfloat16", "float16", "float64")
BACKENDS = ("numpy", "torch")
DEVICES = ("cpu", "cuda")
LAYOUTS = ("padded", "flat")
ORACLE = f"{reference_verify.__module__}.{reference_verify.__name__}"  # the oracle, as reports name it


@dataclass(frozen=True)
class CallSpec:
    """How an engine hands the verifier its tables."""

    dtype: str = "float32"
    backend: str = "torch"
    device: str = "cpu"
    layout: str = "padded"

    def __post_init__(self) -> None:
        for name, value, allowed in (("--dtype", self.dtype, DTYPES), ("--backend", self.backend, BACKENDS),
                                     ("--device", self.device, DEVICES), ("--layout", self.layout, LAYOUTS)):
            if value not in allowed:
                raise InputError(name, "one of " + ", ".join(allowed), repr(value))
        if self.backend == "numpy" and self.dtype in ("bfloat16",):
            raise InputError("--dtype", "float32, float16 or float64 with --backend numpy (NumPy has no bfloat16)",
                             repr(self.dtype))
        if self.backend == "numpy" and self.device != "cpu":
            raise InputError("--device", "cpu with --backend numpy", repr(self.device))

    def describe(self) -> str:
        return f"{self.dtype} {self.backend} on {self.device}, {self.layout} layout"


DEFAULT_SPEC = CallSpec()  # float32 torch on the CPU, padded


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class Tables(NamedTuple):
    """One batch of contexts, as float64 NumPy holding exactly the values handed over.

    ``target``: (B, K+1, V); ``draft``: (B, K, V); ``num_draft``: (B,) int64 in [0, K];
    ``cdf``: (B, K, V) running sums of ``draft`` (drafts are drawn from q as given).
    """

    target: np.ndarray
    draft: np.ndarray
    num_draft: np.ndarray
    cdf: np.ndarray


def _round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to ``dtype`` and back: exactly what a table of that dtype holds."""
    if dtype == "float64":
        return values
    if dtype in ("float32", "float16"):
        return values.astype(dtype).astype(np.float64)
    import torch

    return torch.from_numpy(values).to(torch.bfloat16).double().numpy()


def _rows(rng: np.random.Generator, logits: np.ndarray, dtype: str) -> np.ndarray:
    """(R, V) logits -> probabilities with a min-p cut per row, rounded to dtype, positive rows."""
    R, V = logits.shape
    z = logits - logits.max(axis=1, keepdims=True)  # (R, V) top logit 0
    cut = rng.choice([np.inf, np.inf, 20.0, 12.0, 6.0], size=R)  # some rows keep every token
    z[z < -cut[:, None]] = -np.inf  # exact zeros: p(x) < e^-c * max p removed
    w = np.exp(z)
    p = _round_to(w / w.sum(axis=1, keepdims=True), dtype)  # (R, V)
    return p


def _context_logits(rng: np.random.Generator, R: int, V: int, base: np.ndarray) -> np.ndarray:
    """(R, V) logits of R contexts: the shared Zipf ranks reshuffled by noise, hot tokens, ties."""
    z = base[None, :] + 1.5 * rng.standard_normal((R, V), dtype=np.float32).astype(np.float64)  # (R, V)
    top = z.max(axis=1)
    for h in range(4):  # a few hot tokens per row, some rows one dominant token
        cols = rng.integers(0, V, size=R)
        boost = rng.choice([0.0, 1.0, 3.0, 6.0], size=R) if h else rng.choice([2.0, 4.0, 9.0], size=R)
        z[np.arange(R), cols] = top + boost - h
    hot = z.argmax(axis=1)
    tie = rng.integers(0, V, size=R)
    ties = rng.random(R) < 0.3  # an exact tie with the hottest token
    z[np.arange(R)[ties], tie[ties]] = z[np.arange(R)[ties], hot[ties]]
    near = rng.random(R) < 0.3  # a near-tie: the next float below
    other = rng.integers(0, V, size=R)
    z[np.arange(R)[near], other[near]] = np.nextafter(z[np.arange(R)[near], hot[near]], -np.inf)
    sharp = rng.choice([0.15, 1.0, 1.0, 1.5], size=R)  # some contexts nearly flat, others peaked
    return z * sharp[:, None]


# Where a run's tables come from: (K, B, *, seed, dtype) -> Tables at a fixed V. Default: realistic_tables
# at V; ``prove --model`` passes the real model's rows (specviz.proof.model_rows.ModelSource).
TableSource = Callable[..., Tables]
SYNTHETIC = "synthetic realistic rows"  # how a report names the default source


def tables_at(V: int, source: TableSource | None) -> TableSource:
    """The table source of a run at vocabulary V: ``source``, or realistic rows at V."""
    return source if source is not None else functools.partial(realistic_tables, V)


def realistic_tables(V: int, K: int, B: int, *, seed: int = 0, dtype: str = "float32") -> Tables:
    """A batch of B context-dependent rows shaped like real models (see the module docstring).

    ``V`` >= 2, ``K`` in [1, 8] drafts per row at most, ``B`` >= 2 rows (one row has no draft,
    one has K). The values are those of ``dtype``: every table of the returned float64 arrays
    converts to it exactly.
    """
    for name, value, lo, hi in (("V", V, 2, 1 << 20), ("K", K, 1, 8), ("B", B, 2, 1 << 16)):
        if not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
            raise InputError(name, f"an integer in [{lo}, {hi}]", repr(value))
    if dtype not in DTYPES:
        raise InputError("dtype", "one of " + ", ".join(DTYPES), repr(dtype))
    rng = np.random.default_rng(seed)
    base = -1.1 * np.log1p(rng.permutation(V).astype(np.float64))  # (V,) Zipf ranks, shared "language"
    zp = _context_logits(rng, B * (K + 1), V, base)  # (B(K+1), V)
    target = _rows(rng, zp, dtype).reshape(B, K + 1, V)
    zq = zp.reshape(B, K + 1, V)[:, :K].reshape(B * K, V)  # the drafter sees the same contexts
    temp = rng.choice([0.7, 1.0, 1.3], size=B * K)[:, None]
    zq = (zq + 0.8 * rng.standard_normal((B * K, V), dtype=np.float32)) / temp
    wrong = rng.integers(0, V, size=B * K)  # the drafter's own favourite, often one p rules out
    zq[np.arange(B * K), wrong] = zq.max(axis=1) + rng.choice([0.0, 2.0], size=B * K)
    draft = _rows(rng, zq, dtype).reshape(B, K, V)
    num_draft = rng.integers(0, K + 1, size=B)
    num_draft[rng.random(B) < 0.5] = K  # most rows full, the rest ragged
    num_draft[0], num_draft[-1] = 0, K
    return Tables(target, draft, num_draft.astype(np.int64), np.cumsum(draft, axis=-1))


class Round(NamedTuple):
    """One call's randomness: drafts drawn from q, and the verifier's explicit uniforms.

    ``draft_tokens`` (B, K) int64, -1 past num_draft; ``accept`` (B, K) and ``sample`` (B,) in [0, 1).
    """

    draft_tokens: np.ndarray
    accept: np.ndarray
    sample: np.ndarray


def draw_round(rng: np.random.Generator, t: Tables) -> Round:
    B, K, V = t.draft.shape
    u = rng.random((B, K))
    tokens = np.full((B, K), PAD_TOKEN, dtype=np.int64)
    for b in range(B):
        for i in range(int(t.num_draft[b])):
            c = t.cdf[b, i]
            tokens[b, i] = min(int(np.searchsorted(c, u[b, i] * c[-1], side="right")), V - 1)
            while t.draft[b, i, tokens[b, i]] == 0:  # float rounding at a zero's edge: step back
                tokens[b, i] -= 1
    return Round(tokens, rng.random((B, K)), rng.random((B,)))


class Call(NamedTuple):
    """The positional arguments and uniforms of one verifier call, in the engine's form."""

    args: tuple
    uniforms: tuple


def flat_index(num_draft: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Masks (B, K) of real drafts and (B, K+1) of real target rows, in row-major (flat) order."""
    return (np.arange(K)[None, :] < num_draft[:, None], np.arange(K + 1)[None, :] <= num_draft[:, None])


class Handover:
    """Converts tables to the engine's form once, and each round's tokens and uniforms per call."""

    def __init__(self, t: Tables, spec: CallSpec) -> None:
        self.spec, self.t = spec, t
        K = t.draft.shape[1]
        self.valid, self.valid_t = flat_index(t.num_draft, K)
        if spec.layout == "flat":
            P, Q = t.target[self.valid_t], t.draft[self.valid]  # (N+B, V), (N, V)
            self.counts = np.concatenate([[0], np.cumsum(t.num_draft)]).astype(np.int64)  # (B+1,) indptr
        else:
            P, Q, self.counts = t.target, t.draft, t.num_draft
        self.P, self.Q = self.tables(P), self.tables(Q)
        # The reference reads the same values in the type the engine computes them in (half -> float32).
        ref_type = np.float64 if spec.dtype == "float64" else np.float32
        self.ref_P, self.ref_Q = t.target.astype(ref_type), t.draft.astype(ref_type)

    def tables(self, a: np.ndarray) -> Any:
        s = self.spec
        if s.backend == "numpy":
            return np.ascontiguousarray(a.astype(s.dtype))
        import torch

        table = torch.from_numpy(np.require(a, requirements=["C", "W"]))
        return table.to(device=s.device, dtype=getattr(torch, s.dtype))

    def small(self, a: np.ndarray) -> Any:
        if self.spec.backend == "numpy":
            return a
        import torch

        return torch.from_numpy(np.require(a, requirements=["C", "W"])).to(self.spec.device)

    def reference(self, r: Round) -> np.ndarray:
        """(B, K+1) the reference's tokens on this round, padded layout, the same values and uniforms."""
        res = reference_verify(self.ref_P, self.ref_Q, r.draft_tokens, self.t.num_draft, uniforms=(r.accept, r.sample),
                  validate=False)  # fmt: skip
        return outcome(res, *r.draft_tokens.shape)[0]

    def call(self, r: Round) -> Call:
        if self.spec.layout == "flat":
            x, ua = r.draft_tokens[self.valid], r.accept[self.valid]  # (N,), (N,)
        else:
            x, ua = r.draft_tokens, r.accept
        args = (self.P, self.Q, self.small(x), self.small(self.counts))
        return Call(args, (self.small(ua), self.small(r.sample)))


def as_numpy(a: Any) -> np.ndarray:
    if is_torch(a):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def outcome(res: Any, B: int, K: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens (B, K+1) int64 with -1 past num_tokens, num_tokens (B,)) of a result, checked."""
    tokens = as_numpy(res.tokens).astype(np.int64)
    n = as_numpy(res.num_tokens).astype(np.int64).reshape(-1)
    if tokens.shape != (B, K + 1) or n.shape != (B,):
        raise InputError("result", f"tokens (B, K+1) = ({B}, {K + 1}) and num_tokens ({B},)",
                         f"{tokens.shape} and {n.shape}")  # fmt: skip
    tokens = np.where(np.arange(K + 1)[None, :] < n[:, None], tokens, PAD_TOKEN)
    return tokens, n
