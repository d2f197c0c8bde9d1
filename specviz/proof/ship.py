"""Prove the verifier people ship: realistic inputs at vocabulary V, and the paired test against the reference.

# B rows, K drafts (padded width), V vocabulary, N total drafts (flat layout)

``prove`` alone calls a verifier with float64 NumPy tables at V = 4. Engines ship float32 or
bfloat16 torch tensors at V = 32k-128k in a flat layout, and the mistakes that live there (q
rounded to bfloat16 in the ratio, a float32 residual) move the law by 1e-3 in TV or less:
sampling at V = 4 never sees them. Two tools here see them.

**Realistic inputs** (:func:`realistic_tables`). Every target row and draft row is its own
context: Zipf-like logits (rank r has weight about r^-1.1) reshuffled per row by noise, a few
hot tokens, exact ties and near-ties at the top, exact zeros (a min-p cut: tokens below
e^-c times the row's largest probability are removed; c differs per row, some rows keep
every token), and a drafter whose row is the target's logits plus its own noise, temperature,
hot tokens and cut, so q has zeros where p has not and the other way round. Rows are ragged
(num_draft in [0, K], both ends present), drafts are drawn from q as given, and every table
is handed over in the asked dtype, backend, device and layout. The values the verifier gets
are the values the reference gets (rounded to the dtype first).

**The paired test** (:func:`paired_test`). The verifier and the reference run on the same
inputs with the same explicit uniforms. Given the uniforms each is a function, so the pair
(verifier's row, reference's row) is a coupling of their two laws, and the coupling
inequality bounds the distance between the laws by the chance that the coupled rows differ:
TV(verifier, reference) <= P(mismatch). With m mismatches in n independent rows the one-sided
95% upper bound on P(mismatch) is Clopper-Pearson's; with m = 0 it is 1 - 0.05^(1/n) <=
-ln(0.05)/n ~ 3/n, which we report. The reference's own distance from the target is at most
V * 2^-48 (its draw floors each weight to a multiple of 2^-48), so
TV(verifier, target) <= bound + V * 2^-48. The bound covers the laws of whole rows (accepted
drafts, replacement or bonus) on the tables exercised, averaged over their rows; it says
nothing about distributions the test did not generate. Every mismatch is saved as a
reproducer: an .npz with that one row's inputs and uniforms, replayed by :func:`replay` or
``python -m specviz prove --verifier M:F --replay FILE``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers._xp import is_torch
from ..verifiers.reference import GRID  # each weight floored to 1 / GRID: TV(reference, target) <= V / GRID

DTYPES = ("float32", "bfloat16", "float16", "float64")
BACKENDS = ("numpy", "torch")
DEVICES = ("cpu", "cuda")
LAYOUTS = ("padded", "flat")
CONFIDENCE = 0.95  # the certified bound's one-sided level
PAD_TOKEN = -1
MAX_REPRODUCERS = 5  # mismatching rows saved per run (each .npz holds a row's (2K+1, V) tables)


def reference_verify() -> Callable[..., Any]:
    """The oracle: :func:`specviz.verifiers.reference.verify`, or :func:`specviz.verify` until it exists."""
    ref: Callable[..., Any]
    try:
        from ..verifiers.reference import verify as ref
    except ImportError:  # issue 17's reference not written yet: the engine stands in
        from ..verifiers.verify import verify as ref
    return ref


def oracle_name() -> str:
    ref = reference_verify()
    return f"{ref.__module__}.{ref.__name__}"


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

    def reference(self, ref: Callable[..., Any], r: Round) -> np.ndarray:
        """(B, K+1) the reference's tokens on this round, padded layout, the same values and uniforms."""
        res = ref(self.ref_P, self.ref_Q, r.draft_tokens, self.t.num_draft, uniforms=(r.accept, r.sample),
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


def certified_bound(mismatches: int, rows: int, confidence: float = CONFIDENCE) -> float:
    """One-sided upper confidence bound on P(mismatch) from ``mismatches`` in ``rows``.

    0 mismatches: -ln(1 - confidence) / rows (3.0 / rows at 95%; the exact 1 - 0.05^(1/n) is
    a little smaller). Otherwise Clopper-Pearson's bound.
    """
    if rows <= 0:
        return 1.0
    if mismatches == 0:
        return min(1.0, -math.log(1.0 - confidence) / rows)
    if mismatches >= rows:
        return 1.0
    from scipy import stats

    return float(stats.beta.ppf(confidence, mismatches + 1, rows - mismatches))


def rows_for(tv: float, confidence: float = CONFIDENCE) -> int:
    """Rows without a mismatch that certify TV <= ``tv``."""
    return math.ceil(-math.log(1.0 - confidence) / tv)


class Paired(NamedTuple):
    """What the paired test saw and certified."""

    rows: int  # batch rows compared
    drafts: int  # drafts tested among them
    mismatches: int  # rows whose tokens or counts differ from the reference's
    bound: float  # CONFIDENCE upper bound on P(mismatch) >= TV(verifier, reference)
    reference_tv: float  # V * 2^-48 >= TV(reference, target)
    V: int
    K: int
    spec: CallSpec
    oracle: str
    seconds: float
    reproducers: tuple[str, ...]
    error: str | None  # the verifier raised, or returned a malformed result

    @property
    def tv_bound(self) -> float:
        """Certified bound on TV(verifier, target): the pair's bound plus the reference's own distance."""
        return self.bound + self.reference_tv

    @property
    def passed(self) -> bool:
        return self.error is None and self.mismatches == 0

    def lines(self) -> list[str]:
        """The result in words, each line under 100 columns."""
        head = [f"paired test vs {self.oracle}", f"  at V = {self.V:,}, K <= {self.K}, {self.spec.describe()}:"]
        if self.error:
            return [*head, f"  ERROR after {self.rows:,} rows: {self.error}"[:99]]
        out = [*head, f"  {self.rows:,} rows ({self.drafts:,} drafts), {self.mismatches:,} mismatching rows, "
                     f"{self.seconds:.1f} s"]  # fmt: skip
        if self.mismatches == 0:
            out.append(f"  certified: TV(verifier, reference) <= {self.bound:.3g} (-ln(0.05)/n, {CONFIDENCE:.0%})")
            out.append(f"  so TV(verifier, target) <= {self.tv_bound:.3g}")
        else:
            out.append(f"  mismatch rate {self.mismatches / self.rows:.3g}: TV(verifier, reference) <= "
                       f"{self.bound:.3g} ({CONFIDENCE:.0%}); a mismatch is not yet a wrong law")  # fmt: skip
        out.append(f"  reference's own distance from the target <= V * 2^-48 = {self.reference_tv:.2g}")
        out.append("  covers: the law of whole rows (drafts kept, replacement or bonus) on the generated")
        out.append("  contexts, averaged over their rows; not distributions this test did not generate")
        for path in self.reproducers:
            out.append(f"  reproducer: {path}")
        return out


def _save_reproducer(folder: str, index: int, t: Tables, r: Round, b: int, spec: CallSpec,
                     expected: np.ndarray, got: np.ndarray) -> str:  # fmt: skip
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"mismatch_{index:03d}.npz")
    np.savez_compressed(
        path, target=t.target[b : b + 1].astype(np.float32 if spec.dtype != "float64" else np.float64),
        draft=t.draft[b : b + 1].astype(np.float32 if spec.dtype != "float64" else np.float64),
        draft_tokens=r.draft_tokens[b : b + 1], num_draft=t.num_draft[b : b + 1], accept=r.accept[b : b + 1],
        sample=r.sample[b : b + 1], expected=expected, got=got, dtype=spec.dtype, backend=spec.backend,
        device=spec.device, layout=spec.layout,
    )  # fmt: skip
    return path


def paired_test(
    verifier: Callable[..., Any],
    *,
    V: int,
    K: int = 4,
    spec: CallSpec = CallSpec(),
    tv: float = 1e-3,
    rows: int | None = None,
    batch: int | None = None,
    tables: int = 4,
    seed: int = 0,
    reproducers: str | None = None,
    stop_after: int = 1000,
    progress: Callable[[str], None] | None = None,
) -> Paired:
    """Run ``verifier`` and the reference on the same realistic inputs and uniforms; certify TV.

    ``verifier`` is called as an engine calls it, ``verifier(target, draft, draft_tokens,
    counts, uniforms=(accept, sample))`` in the form ``spec`` asks: padded, counts is
    num_draft (B,) and accept (B, K), the signature of :func:`specviz.verify`; flat, counts is
    the indptr (B+1,) and accept (N,), that of :func:`specviz.verify_flat`. Its result needs
    ``tokens`` (B, K+1) and ``num_tokens`` (B,) (padded output in both layouts).

    It runs until ``rows`` rows are compared (default: enough to certify ``tv`` with no
    mismatch, :func:`rows_for`), or ``stop_after`` mismatches. A fresh table of contexts is
    drawn every ``rounds_per_table`` calls; each call draws new drafts and uniforms.
    Mismatching rows are saved under ``reproducers`` (a folder; the first
    :data:`MAX_REPRODUCERS`). Returns :class:`Paired`.
    """
    if spec.device == "cuda" and not cuda_available():
        raise InputError("--device", "cuda with a CUDA device present", "no CUDA device")
    if not 0 < tv < 1:
        raise InputError("tv", "a bound in (0, 1)", repr(tv))
    want = rows_for(tv) if rows is None else int(rows)
    B = batch or (32 if V > 32768 else 64 if V > 4096 else 256)
    ref = reference_verify()
    rng = np.random.default_rng([seed, 18])
    saved: list[str] = []  # the reproducers' paths
    t0, done, drafts, bad, calls = time.perf_counter(), 0, 0, 0, 0
    last_note = t0
    error = None
    rounds_per_table = max(1, math.ceil(want / B / tables))
    while done < want and bad < stop_after and error is None:
        t = realistic_tables(V, K, B, seed=int(rng.integers(1 << 62)), dtype=spec.dtype)
        hand = Handover(t, spec)
        for _ in range(rounds_per_table):
            if done >= want or bad >= stop_after:
                break
            r = draw_round(rng, t)
            expected = hand.reference(ref, r)
            c = hand.call(r)
            try:
                got, _ = outcome(verifier(*c.args, uniforms=c.uniforms), B, K)
            except Exception as e:  # the verifier's own failure is the finding
                error = f"{type(e).__name__}: {e}"
                break
            calls += 1
            diff = np.flatnonzero((got != expected).any(axis=1))
            for b in diff:
                if reproducers and len(saved) < MAX_REPRODUCERS:
                    saved.append(_save_reproducer(reproducers, len(saved), t, r, int(b), spec, expected[b], got[b]))
            bad += int(diff.size)
            done += B
            drafts += int(t.num_draft.sum())
            now = time.perf_counter()
            if progress is not None and now - last_note > 5:
                last_note = now
                left = (now - t0) / done * (want - done)
                progress(f"paired test: {done:,} of {want:,} rows, {bad:,} mismatches, about {left:.0f} s left")
    return Paired(done, drafts, bad, certified_bound(bad, done), V / GRID, V, K, spec, oracle_name(),
                  time.perf_counter() - t0, tuple(saved), error)  # fmt: skip


class Replay(NamedTuple):
    path: str
    expected: np.ndarray  # (K+1,) the reference's tokens when the file was saved
    reference: np.ndarray  # (K+1,) the reference's tokens now
    got: np.ndarray  # (K+1,) the verifier's tokens now

    @property
    def reproduced(self) -> bool:
        """The verifier still differs from the reference on this row."""
        return bool((self.got != self.reference).any())


def replay(path: str, verifier: Callable[..., Any]) -> Replay:
    """Run one saved mismatching row through ``verifier`` and the reference again."""
    try:
        f = np.load(path)
    except (OSError, ValueError) as e:
        raise InputError("--replay", "an .npz reproducer saved by the paired test", f"{type(e).__name__}: {e}") from e
    with f:
        spec = CallSpec(str(f["dtype"]), str(f["backend"]), str(f["device"]), str(f["layout"]))
        target = _round_to(f["target"].astype(np.float64), spec.dtype)
        draft = _round_to(f["draft"].astype(np.float64), spec.dtype)
        t = Tables(target, draft, f["num_draft"], np.cumsum(draft, axis=-1))
        r = Round(f["draft_tokens"], f["accept"], f["sample"])
        expected = f["expected"]
    K = t.draft.shape[1]
    hand = Handover(t, spec)
    ref = hand.reference(reference_verify(), r)
    c = hand.call(r)
    got, _ = outcome(verifier(*c.args, uniforms=c.uniforms), 1, K)
    return Replay(path, expected, ref[0], got[0])
