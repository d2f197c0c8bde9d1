"""The Batch page's demo: a ragged batch, verified on NumPy, PyTorch CPU or CUDA, and timed.

# B rows, K drafts (padded width), V vocabulary, R rows shown

The rows are random (Dirichlet or peaked) or the real model's (:mod:`specviz.app.batch_model`:
several prompts, one speculative round each). Every backend is run with the same explicit
uniforms and its tokens are compared with NumPy's before it is timed: a fast path that
disagrees with the reference is reported, not hidden. Randomness comes from an explicit seed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..proof.simulate import sample_rows
from ..verifiers.verify import Uniforms, Verification, verify
from . import batch_model, links
from .limits import MAX_BATCH_ELEMENTS, MAX_BATCH_ROWS, MAX_COUNTS_CHARS, cap, check_text

BACKENDS = ("NumPy", "PyTorch CPU", "PyTorch CUDA")
COUNT_MODES = ("random 0..K", "all K", "typed")
RANDOM_SOURCES = ("random Dirichlet", "peaked")  # make_batch's; the model's rows come from batch_model
SOURCES = (*RANDOM_SOURCES, batch_model.SOURCE)
MAX_K = 16  # the K slider's upper end; a link asking for more falls back to the default
PARAMS = [  # the page's settings, as its link carries them
    links.int_param("B", 16, 1, 10**9),
    links.int_param("K", 4, 0, MAX_K),
    links.choice_param("counts", COUNT_MODES[0], COUNT_MODES),
    links.text_param("typed", ""),
    links.int_param("V", 32, 1, 10**9),
    links.choice_param("source", SOURCES[0], SOURCES),
    links.float_param("conc", 1.0, 0.01, 100.0),
    links.choice_param("drafter", next(iter(batch_model.DRAFTERS)), list(batch_model.DRAFTERS)),
    links.int_param("seed", 0, 0, 2**32 - 1),
    links.choice_param("backend", BACKENDS[0], BACKENDS),
]
PEAKED_SHARPNESS = 4.0  # softmax(4 z) for z ~ N(0, 1): a few tokens carry most of the mass
PEAKED_DRAFT_NOISE = 0.2  # the drafter sees the target's logits plus N(0, 0.2^2) noise: a ~ 0.7-0.8

# --- what the user asks for ------------------------------------------------------------------------


class BatchSize(NamedTuple):
    B: int
    V: int
    notes: list[str]  # one sentence per cap that applied


def cap_batch(B: int, K: int, V: int, model_vocab: int | None = None) -> BatchSize:
    """Lower V, then B, so that B*(K+1)*V <= MAX_BATCH_ELEMENTS and B <= MAX_BATCH_ROWS (specviz.app.limits).

    ``model_vocab``: the real model's rows, whose V is the model's and whose B is at most
    :data:`specviz.app.batch_model.MAX_ROWS` (each row is a model round).
    """
    why = f"B·(K+1)·V is limited to {MAX_BATCH_ELEMENTS:,} elements per tensor (memory, and a click that answers fast)"
    if model_vocab is not None:
        rows = min(max(MAX_BATCH_ELEMENTS // ((K + 1) * model_vocab), 1), batch_model.MAX_ROWS)
        rows_why = why if rows < batch_model.MAX_ROWS else (
            f"B is limited to {batch_model.MAX_ROWS} rows with the real model (each row is a model round)")
        b = cap(B, rows, "B", rows_why)
        return BatchSize(b.value, model_vocab, [b.note] if b.note else [])
    v = cap(V, max(MAX_BATCH_ELEMENTS // (K + 1), 1), "V", why)
    rows = min(max(MAX_BATCH_ELEMENTS // ((K + 1) * v.value), 1), MAX_BATCH_ROWS)
    rows_why = (
        why if rows < MAX_BATCH_ROWS else f"B is limited to {MAX_BATCH_ROWS:,} rows (every timed call pays per row)"
    )
    b = cap(B, rows, "B", rows_why)
    return BatchSize(b.value, v.value, [n for n in (v.note, b.note) if n])


def parse_counts(text: str, B: int, K: int) -> np.ndarray:
    """Typed per-row draft counts: ``"4, 2, 0, 3"`` -> (B,) int64, each in [0, K]."""
    text = check_text(text, "draft counts", MAX_COUNTS_CHARS)  # before any parsing
    items = [s.strip() for s in text.replace(";", ",").split(",") if s.strip()]
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


# --- the batch -------------------------------------------------------------------------------------


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
    if B * (K + 1) * V > MAX_BATCH_ELEMENTS or B > MAX_BATCH_ROWS:
        raise InputError(
            "batch",
            f"B <= {MAX_BATCH_ROWS:,} and B·(K+1)·V <= {MAX_BATCH_ELEMENTS:,}",
            f"B = {B:,}, {B * (K + 1) * V:,}",
        )
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
        raise InputError("source", "one of " + ", ".join(RANDOM_SOURCES), repr(source))
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


# --- backends --------------------------------------------------------------------------------------


def loops_note() -> str:
    """Which code ran the verifier's hot loops on the CPU: compiled (Numba) or NumPy's, and why."""
    from ..verifiers import _fused

    trouble = _fused.note()  # a cache that could not be used, or loops that could not be loaded
    if _fused.enabled():
        import numba

        version = numba.__version__
        text = f"On the CPU the verifier's hot loops ran compiled (Numba {version}; same tokens as NumPy's code)."
        return text if trouble is None else f"{text} {trouble.removeprefix('specviz: ')}"
    if _fused.switched_off():
        return f"On the CPU the verifier ran NumPy's code only ({_fused.BACKEND_ENV}=numpy)."
    if trouble is not None:
        return f"On the CPU the verifier ran NumPy's code only: {trouble.removeprefix('specviz: ')}"
    return 'On the CPU the verifier ran NumPy\'s code only (Numba is not installed: pip install ".[fast]").'


# torch is optional (the [torch] extra): without it the page offers NumPy alone and says how to add it.
TORCH_MISSING = 'torch is not installed (pip install ".[torch]" adds the PyTorch CPU and CUDA backends)'


_TORCH_IMPORT = threading.Lock()  # one thread imports torch: the warm-up's, or a visitor's click before it ran


def torch_installed() -> bool:
    """Whether ``import torch`` works here (importing it, in one thread at a time, the first time)."""
    with _TORCH_IMPORT:
        try:
            import torch  # noqa: F401
        except ImportError:
            return False
    return True


def available_backends(cuda_ok: bool) -> list[str]:
    """The backends this machine can run: NumPy always, PyTorch CPU with torch, CUDA with a device."""
    torch_ok = torch_installed()
    return [b for b in BACKENDS if b == "NumPy" or (torch_ok and (cuda_ok or b != "PyTorch CUDA"))]


def cuda_status() -> tuple[bool, str]:
    """Whether PyTorch sees a CUDA device, and a sentence saying which or why not."""
    if not torch_installed():
        return False, TORCH_MISSING
    import torch

    if torch.cuda.is_available():
        return True, f"CUDA device: {torch.cuda.get_device_name(0)}"
    build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
    return False, f"torch.cuda.is_available() is False on this machine (torch {torch.__version__}, {build})"


def _to_backend(inputs: BatchInputs, backend: str) -> BatchInputs:
    """The same batch as arrays of ``backend``: NumPy arrays, or torch tensors on its device."""
    if backend == "NumPy":
        return inputs
    if backend not in BACKENDS:
        raise InputError("backend", "one of " + ", ".join(BACKENDS), repr(backend))
    import torch

    device = "cuda" if backend == "PyTorch CUDA" else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("backend", "a machine where torch.cuda.is_available()", "no CUDA device")

    def t(x: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)

    u = Uniforms(t(inputs.uniforms.accept), t(inputs.uniforms.sample))
    return BatchInputs(t(inputs.target_probs), t(inputs.draft_probs), t(inputs.draft_tokens), t(inputs.num_draft), u)


def _verify(b: BatchInputs, *, validate: bool) -> Verification:
    """:func:`specviz.verify` on a batch already on its backend; the result stays there."""
    return verify(b.target_probs, b.draft_probs, b.draft_tokens, b.num_draft, uniforms=b.uniforms, validate=validate)


def _to_numpy(res: Verification) -> Verification:
    return Verification(*(x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x) for x in res))


def run_backend(inputs: BatchInputs, backend: str, *, validate: bool = True) -> Verification:
    """Verify the batch on one backend with the batch's uniforms; the result as NumPy arrays."""
    return _to_numpy(_verify(_to_backend(inputs, backend), validate=validate))


# --- timing ----------------------------------------------------------------------------------------


class Timing(NamedTuple):
    backend: str
    seconds: float  # median over the repeats, inputs already on the device, validation off
    repeats: int
    rows_per_second: float | None  # None when the median time is below the timer's resolution
    agrees: bool  # same tokens as NumPy on the same uniforms (checked before timing)
    rows_differing: int  # rows whose tokens differ from NumPy's (0 when agrees)
    threads: int | None  # torch.get_num_threads() for PyTorch CPU; None where it does not apply


def time_backends(
    inputs: BatchInputs, backends: Sequence[str], *, budget_s: float = 0.3, max_repeats: int = 25
) -> list[Timing]:
    """Time each backend on the same inputs, after checking it returns NumPy's tokens."""
    return _time_backends(inputs, backends, budget_s=budget_s, max_repeats=max_repeats)[0]


def _time_backends(
    inputs: BatchInputs, backends: Sequence[str], *, budget_s: float = 0.3, max_repeats: int = 25, keep_rows: int = 0
) -> tuple[list[Timing], dict[str, Verification]]:
    """:func:`time_backends`, and the first ``keep_rows`` rows of each backend's result (its warm-up call)."""
    reference = run_backend(inputs, "NumPy")
    B = int(inputs.num_draft.shape[0])
    out, heads = [], {}
    for backend in backends:
        batch = _to_backend(inputs, backend)
        first = _to_numpy(_verify(batch, validate=False))  # also the warm-up
        heads[backend] = Verification(*(np.asarray(x)[:keep_rows] for x in first))
        differing = int((first.tokens != reference.tokens).any(axis=1).sum())
        del first
        sync = _synchronizer(backend)
        threads = _threads(backend)
        times: list[float] = []
        while len(times) < max_repeats and (len(times) < 3 or sum(times) < budget_s):
            t0 = time.perf_counter()
            _verify(batch, validate=False)
            sync()
            times.append(time.perf_counter() - t0)
        med = float(np.median(times))
        out.append(Timing(backend, med, len(times), B / med if med > 0 else None, differing == 0, differing, threads))
    return out, heads


def _threads(backend: str) -> int | None:
    """The intra-op threads torch uses on the CPU: its CPU times scale with them and with the machine's load."""
    if backend != "PyTorch CPU":
        return None
    import torch

    return int(torch.get_num_threads())


def _synchronizer(backend: str) -> Callable[[], None]:
    """What waits for a backend's queued work, so a timing covers the work and not its launch."""
    if backend == "PyTorch CUDA":
        import torch

        return torch.cuda.synchronize
    return lambda: None


# --- the page's run --------------------------------------------------------------------------------


class BatchReport(NamedTuple):
    """What the Batch page shows of one run: the first rows in full, counts for every row."""

    head: Verification  # the first max_rows rows of the chosen backend's result
    head_draft_tokens: np.ndarray  # (R, K)
    num_draft: np.ndarray  # (B,)
    num_accepted: np.ndarray  # (B,)
    num_tokens: np.ndarray  # (B,)
    acceptance_rate: float  # accepted / tested drafts over the batch; NaN when no draft was tested
    timings: list[Timing]
    generate_seconds: float  # building the random batch (not part of any timing)
    heads: dict[str, Verification]  # the first max_rows rows of every backend that ran
    accepted: int  # drafts accepted over the batch
    tested: int  # drafts whose coin counted (the acceptance rate's denominator; 0 when K = 0)
    texts: list[dict[str, Any]] = []  # the real model's rows shown, as text (batch_model.row_table); [] otherwise


def rate_text(num: float, den: float, digits: int = 3) -> str:
    """num / den as text; a dash when the denominator is 0, so no page ever shows "nan"."""
    if not den:
        return "—"
    return f"{num / den:.{digits}f}"


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
    drafter: str = "early",
) -> BatchReport:
    """Build a batch, verify it on ``backend`` (validated), and time it on every backend in ``time_on``.

    ``heads`` holds the first ``max_rows`` rows of every backend that ran, so a page can switch
    the backend it shows without running the batch again. The real model's rows
    (``source`` = :data:`specviz.app.batch_model.SOURCE`) are drafted by ``drafter``.
    """
    t0 = time.perf_counter()
    rows = None
    if source == batch_model.SOURCE:
        rows = batch_model.make_rows(B, K, num_draft, drafter, seed)
        u = np.random.default_rng([seed, 4])
        inputs = BatchInputs(rows.target_probs, rows.draft_probs, rows.draft_tokens, rows.num_draft,
                             Uniforms(u.random((B, K)), u.random(B)))  # fmt: skip
    else:
        inputs = make_batch(B, K, V, num_draft, source, concentration, seed)
    gen = time.perf_counter() - t0
    res = run_backend(inputs, backend)
    tested = int(np.minimum(res.num_accepted + 1, inputs.num_draft).sum())  # draft positions whose coin counted
    accepted = int(res.num_accepted.sum())
    timings, heads = _time_backends(inputs, time_on, keep_rows=max_rows) if time_on else ([], {})
    head = Verification(*(np.asarray(x)[:max_rows] for x in res))
    heads[backend] = head  # the validated run is the one shown for its backend
    ref = heads.get("NumPy")  # per shown row: each other backend's tokens against NumPy's
    agrees = {} if ref is None else {b: (np.asarray(h.tokens) == np.asarray(ref.tokens)).all(axis=1)
                                     for b, h in heads.items() if b != "NumPy"}  # fmt: skip
    texts = [] if rows is None else batch_model.row_table(rows, head, agrees)
    return BatchReport(
        head=head,
        head_draft_tokens=inputs.draft_tokens[:max_rows],
        num_draft=inputs.num_draft,
        num_accepted=np.asarray(res.num_accepted),
        num_tokens=np.asarray(res.num_tokens),
        acceptance_rate=accepted / tested if tested else float("nan"),
        timings=timings,
        generate_seconds=gen,
        heads=heads,
        accepted=accepted,
        tested=tested,
        texts=texts,
    )


def timing_rows(report: BatchReport) -> list[dict[str, Any]]:
    """The Batch page's timing table: each backend's median time, repeats, rate, torch threads, and its agreement."""
    B = len(report.num_draft)
    return [
        {
            "backend": x.backend,
            "median time (ms)": 1000 * x.seconds,
            "repeats": x.repeats,
            "rows per second": x.rows_per_second,
            "torch threads": "" if x.threads is None else str(x.threads),
            "agrees": "yes" if x.agrees else f"{x.rows_differing} of {B:,} rows differ",
        }
        for x in report.timings
    ]


def timing_caption(report: BatchReport) -> str:
    """How the timings were taken, and what each torch backend's figure depends on."""
    text = (
        "Every backend verified the same inputs with the same explicit uniforms; its tokens were compared with "
        "NumPy's before timing. Times: median of the repeats (time.perf_counter) after a warm-up call, inputs "
        "already on the device, validation off as on a serving hot path. Building the batch took "
        f"{report.generate_seconds:.2f} s and is not included. {loops_note()}"
    )
    for x in report.timings:
        if x.threads is None:
            continue
        text += f" {x.backend} ran with torch.get_num_threads() = {x.threads}; its times also depend on the machine's "
        text += "load."
        if x.backend == "PyTorch CPU":
            text += (
                " On the CPU, float32 and float64 tensors run the same NumPy code as the NumPy backend, on zero-copy "
                "views of the tensors (torch's own kernels were slower there); handing them over and the results "
                "back (numpy() and from_numpy) is all that differs."
            )
    return text


# --- what the page prints ----------------------------------------------------------------------------


def metrics(report: BatchReport) -> list[tuple[str, str, str | None]]:
    """The page's four figures: (label, value, help)."""
    return [
        ("rows verified", f"{len(report.num_draft):,}", None),
        ("mean drafts per row", f"{report.num_draft.mean():.2f}", None),
        ("acceptance rate (accepted / tested)", rate_text(report.accepted, report.tested),
         f"{report.accepted:,} accepted of {report.tested:,} drafts whose coin counted"),
        ("mean tokens per row", f"{report.num_tokens.mean():.3f}", None),
    ]  # fmt: skip


def strips_caption(B: int, shown: int, backend: str) -> str:
    return (
        (f"Showing the first {shown} of {B:,} rows. " if B > shown else "")
        + "Cells show the emitted token; a draft in parentheses was never reached (after a rejection its coin does "
        "not count). Hover a cell for its coin u and p/q. Backend shown: " + backend + "."
    )


MODEL_CAPTION = (
    "Each row is one speculative round of SmolLM2-135M after its own prompt: the drafter proposed the row's drafts "
    "and their q rows, the target gave its processed rows p (temperature 1, top-p 0.95) in one pass, and the padded "
    "batch was verified in one call. The last columns say whether each backend emitted NumPy's tokens for the row."
)
