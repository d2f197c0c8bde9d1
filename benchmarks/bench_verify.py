"""Time `verify` against a read pass over the bytes it must read, measured in the same run.

    python benchmarks/bench_verify.py [--repeat 5] [--sizes 64x32000,64x128256,256x128256]
                                      [--threads 1,2] [--device cpu|cuda] [--write-doc]

K = 4 drafts per row, float32, every row with K drafts; the drafter is the target's logits
plus Gaussian noise (sigma 0.75), so a draft is accepted with probability ~0.7 as with real
drafters (the exact mean acceptance and the measured one are printed). The verifier must read,
per row, the target row it draws from and, after a rejection, the draft row of the residual:
bytes = (B + rejected rows) * V * 4; the (B, K) probed probabilities are negligible.

The bound is the fastest of the read passes measured in the same run: one sum over a contiguous
buffer of exactly that many bytes, with NumPy and with torch at each thread count. Each entry
(read passes, and verify per backend, thread count and validate) is timed "cold" (after
writing 96 MB elsewhere, which evicts the 32 MB L3 of the development machine) and "warm"
(again at once); the entries run in a shuffled order in every repeat, and the median is
reported (or the minimum, ``--stat min``; ``--clock cpu`` times CPU seconds instead of wall
seconds, steadier on a machine shared with other work, for single-threaded entries). Printed:
ratios to the bound, validate=True over validate=False, torch over NumPy (the ratio of the
medians, and the interquartile range of the per-repeat ratios: both calls in one repeat share
the machine's load), and for torch the hand-over (``numpy()`` on the inputs, ``from_numpy`` on
the outputs: a fixed cost) as a share of the NumPy call, and torch over NumPy without it.
numpy-pure is NumPy with the compiled loops switched off (SPECVIZ_BACKEND=numpy); kernels/N is
torch CPU tensors on torch's own kernels (SPECVIZ_BACKEND=torch, the code CUDA runs) instead of
the NumPy code. Before anything is timed, NumPy and torch (both ways) must return identical tokens on the inputs.

On CUDA (``--device cuda``) the entries are torch-cuda verify and a torch-cuda read pass;
the output adds the achieved bandwidth (must-read bytes / time) as a fraction of the device's
peak (from its memory clock and bus width when torch reports them).

``--write-doc`` (CPU) writes a summary per size, every entry, and the constants of the draw
(grid step, sum margin, block, the quantization bound V x step) as tables into the
bench_verify section of docs/speed.md (benchmarks/speed_doc.py), with the command, the date
and the machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import speed_doc  # benchmarks/ is on the path when this file runs
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import specviz.verifiers._sample as sample_mod  # noqa: E402
import specviz.verifiers.reference as reference  # noqa: E402
import specviz.verifiers.verify as verify_mod  # noqa: E402
from specviz import Uniforms, verify  # noqa: E402
from specviz.verifiers._fused import BACKEND_ENV  # noqa: E402
from specviz.verifiers._fused import enabled as numba_enabled  # noqa: E402

K = 4
SIGMA = 0.75  # drafter noise on the logits: acceptance ~0.7
EVICT_BYTES = 96 << 20  # three times the development machine's L3
VENDOR_PEAKS = {"H200": 4.8e12, "H100 SXM": 3.35e12, "H100 PCIe": 2.0e12, "A100-SXM4-80GB": 2.039e12}  # bytes/s


def make_inputs(B: int, V: int, seed: int = 0):
    """target (B, K+1, V), draft (B, K, V) float32, tokens drawn from the draft, num_draft = K."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((B, K + 1, V), dtype=np.float32)
    logits *= 3
    target = softmax_(logits.copy())
    noisy = logits[:, :K]
    noisy += SIGMA * rng.standard_normal((B, K, V), dtype=np.float32)
    draft = softmax_(noisy)
    del logits
    cdf = np.cumsum(draft, -1, dtype=np.float64)
    tokens = np.minimum((cdf <= rng.random((B, K, 1)) * cdf[..., -1:]).sum(-1), V - 1)
    acceptance = float(np.minimum(target[:, :K], draft).sum(-1, dtype=np.float64).mean())
    return target, draft, tokens, np.full(B, K), acceptance


def softmax_(x: np.ndarray) -> np.ndarray:
    x -= x.max(-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(-1, keepdims=True)
    return x


_evict_buf = None


def evict() -> None:
    global _evict_buf
    if _evict_buf is None:
        _evict_buf = np.empty(EVICT_BYTES // 8)
    _evict_buf.fill(1.0)


def with_env(name: str, value: str, fn):
    """Run fn with environment variable ``name`` set to ``value`` (specviz reads its switch once per call)."""
    os.environ[name] = value
    try:
        return fn()
    finally:
        os.environ.pop(name, None)


def pure(fn):
    """Run fn with the compiled loops of specviz.verifiers._fused switched off (the NumPy code)."""
    return with_env(BACKEND_ENV, "numpy", fn)


def numba_first_call() -> str:
    """The first verify call at large V in a fresh process: with an empty Numba cache, and again."""
    import subprocess
    import tempfile

    code = ("import time, numpy as np; t0 = time.perf_counter(); import specviz; "
            "p = np.random.default_rng(0).random((2, 2, 8192), dtype=np.float32); p /= p.sum(-1, keepdims=True); "
            "u = specviz.Uniforms(np.full((2, 1), 0.999), np.full(2, 0.5)); "
            "specviz.verify(p, p[:, ::-1][:, :1].copy(), np.zeros((2, 1), int), np.ones(2, int), uniforms=u); "
            "specviz.verify(p, None, np.zeros((2, 1), int), np.ones(2, int), uniforms=u); "
            "print(time.perf_counter() - t0)")  # fmt: skip
    out = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            out.append(float(res.stdout.split()[-1]))
    return f"first call in a new process {out[0]:.1f} s with an empty Numba cache, {out[1]:.1f} s with it"


def torch_kernels(fn):
    """Run fn with torch CPU tensors on torch's own kernels (the code CUDA runs), not the NumPy code."""
    return with_env(BACKEND_ENV, "torch", fn)


CLOCK = time.perf_counter  # --clock cpu: time.process_time (CPU seconds of this process)


HANDOFF = [0.0]  # clock time spent handing torch CPU tensors to NumPy and back, in the current call


def spy_handoff() -> None:
    """Time verify's hand-over of torch CPU tensors (``_numpy_twin`` in, ``_to_torch`` out).

    With the clock that times the calls (``--clock``), so that the call minus its hand-over is
    one clock's reading; the two extra readings per call (a system call each for the CPU clock,
    under a microsecond warm) are counted in both.
    """
    for name in ("_numpy_twin", "_to_torch"):
        real = getattr(verify_mod, name)

        def wrapped(*a, _real=real):
            t0 = CLOCK()
            try:
                return _real(*a)
            finally:
                HANDOFF[0] += CLOCK() - t0

        setattr(verify_mod, name, wrapped)


def timed(fn, threads: int | None, sync) -> tuple[float, float]:
    """(time of the call, of which the torch hand-over)."""
    if threads is not None:
        torch.set_num_threads(threads)
    HANDOFF[0] = 0.0
    t0 = CLOCK()
    fn()
    sync()
    return CLOCK() - t0, HANDOFF[0]


def peak_bandwidth() -> tuple[float | None, str]:
    """Bytes per second from the device's memory clock and bus width, when torch reports them."""
    props = torch.cuda.get_device_properties(0)
    clock_khz = getattr(props, "memory_clock_rate", None)
    bus_bits = getattr(props, "memory_bus_width", None)
    if clock_khz and bus_bits:
        return 2 * clock_khz * 1e3 * bus_bits / 8, f"{props.name}: 2 x {clock_khz / 1e6:.2f} GHz x {bus_bits} bit"
    for key, peak in VENDOR_PEAKS.items():  # vendors' data-sheet figures, when torch reports no clock
        if key in props.name:
            return peak, f"{props.name}: data-sheet {peak / 1e12:.2f} TB/s"
    return None, f"{props.name}: memory clock not reported"


SUMMARY = ["B, V", "acceptance", "read GB/s", "specviz / bound", "validate=True / False", "NumPy only / bound",
           "torch / NumPy", "hand-over", "torch without it / NumPy", "torch's kernels / NumPy"]  # fmt: skip
ENTRIES = ["B, V", "entry", "validate", "cold / bound", "warm / bound", "validate cost", "/ numpy", "paired IQR",
           "hand-over", "/ numpy without it"]  # fmt: skip


class Figures:
    """The rows one size adds to the tables of docs/speed.md."""

    def __init__(self) -> None:
        self.summary: list[list[str]] = []
        self.entries: list[list[str]] = []


def bench_config(B: int, V: int, args, rng: np.random.Generator, figs: Figures | None = None) -> None:
    target, draft, tokens, num, acceptance = make_inputs(B, V)
    u = Uniforms(np.random.default_rng(1).random((B, K)), np.random.default_rng(2).random(B))
    ref = verify(target, draft, tokens, num, uniforms=u, validate=False)
    assert np.array_equal(pure(lambda: verify(target, draft, tokens, num, uniforms=u)).tokens, ref.tokens), \
        "the Numba pass and the NumPy passes disagree: nothing is timed"  # fmt: skip
    tt = [torch.from_numpy(a) for a in (target, draft, tokens, num)]
    tu = Uniforms(*(torch.from_numpy(a) for a in u))
    agree = verify(*tt, uniforms=tu, validate=False)
    assert np.array_equal(agree.tokens.numpy(), ref.tokens), "NumPy and torch disagree: nothing is timed"
    kernels = torch_kernels(lambda: verify(*tt, uniforms=tu, validate=False))
    assert np.array_equal(kernels.tokens.numpy(), ref.tokens), "NumPy and torch's kernels disagree: nothing is timed"
    rejected = int((ref.num_accepted < K).sum())
    measured_acc = float(ref.num_accepted.sum() / (ref.num_accepted + (ref.num_accepted < K)).sum())
    n_bytes = (B + rejected) * V * 4
    buf = np.random.default_rng(3).random(n_bytes // 4, dtype=np.float32)
    tbuf = torch.from_numpy(buf)
    cpu = lambda: None  # noqa: E731
    entries = []  # (name, validate or None for a read pass, fn, threads, sync)
    if args.device == "cuda":
        dev = [a.cuda() for a in tt]
        du = Uniforms(*(a.cuda() for a in tu))
        gpu = verify(*dev, uniforms=du, validate=False)
        assert torch.equal(gpu.tokens.cpu(), agree.tokens), "CUDA and CPU disagree: nothing is timed"
        dbuf = tbuf.cuda()
        sync = torch.cuda.synchronize
        entries.append(("read torch-cuda", None, dbuf.sum, None, sync))
        for validate in (False, True):
            fn = lambda v=validate: verify(*dev, uniforms=du, validate=v)  # noqa: E731
            entries.append(("torch-cuda", validate, fn, None, sync))
    else:
        entries.append(("read numpy", None, buf.sum, None, cpu))
        for th in args.threads:
            entries.append((f"read torch/{th}", None, tbuf.sum, th, cpu))
        for validate in (False, True):
            fn = lambda v=validate: verify(target, draft, tokens, num, uniforms=u, validate=v)  # noqa: E731
            entries.append(("numpy", validate, fn, None, cpu))
            if numba_enabled():
                fn = lambda v=validate: pure(lambda: verify(target, draft, tokens, num, uniforms=u, validate=v))  # noqa: E731
                entries.append(("numpy-pure", validate, fn, None, cpu))
            for th in args.threads:
                fn = lambda v=validate: verify(*tt, uniforms=tu, validate=v)  # noqa: E731
                entries.append((f"torch/{th}", validate, fn, th, cpu))
                fn = lambda v=validate: torch_kernels(lambda: verify(*tt, uniforms=tu, validate=v))  # noqa: E731
                entries.append((f"kernels/{th}", validate, fn, th, cpu))
    cold = {i: [] for i in range(len(entries))}
    warm = {i: [] for i in range(len(entries))}
    handoff = {i: [] for i in range(len(entries))}
    for _name, _v, fn, th, sync in entries:  # one untimed call each
        timed(fn, th, sync)
    for _ in range(args.repeat):
        for i in rng.permutation(len(entries)):
            _, _, fn, th, sync = entries[i]
            evict()
            sync()
            took, handed = timed(fn, th, sync)
            cold[i].append(took)
            handoff[i].append(handed)
            warm[i].append(timed(fn, th, sync)[0])
    stat = np.median if args.stat == "median" else np.min
    med_c = {i: float(stat(v)) for i, v in cold.items()}
    med_w = {i: float(stat(v)) for i, v in warm.items()}
    reads = [i for i, e in enumerate(entries) if e[1] is None]
    bound = min(med_c[i] for i in reads)
    bound_w = min(med_w[i] for i in reads)
    print(f"\nB = {B}, K = {K}, V = {V}, float32: acceptance {measured_acc:.2f} measured "
          f"({acceptance:.2f} exact mean of sum min(p, q)); {rejected}/{B} rows rejected; "
          f"must read {n_bytes / 1e6:.1f} MB")  # fmt: skip
    reads_txt = ", ".join(f"{entries[i][0][5:]} {med_c[i] / bound:.2f}x" for i in reads)
    print(f"  read bound: fastest cold read pass {bound * 1e3:.2f} ms = {n_bytes / bound / 1e9:.1f} GB/s "
          f"(read passes: {reads_txt}); warm {bound_w * 1e3:.2f} ms")  # fmt: skip
    if args.device == "cuda":
        peak, how = peak_bandwidth()
        for i, (name, validate, *_rest) in enumerate(entries):
            bw = n_bytes / med_w[i]
            frac = f"{bw / peak:.0%} of peak ({how})" if peak else how
            print(f"  {name:<16} validate={str(validate):<5} {med_w[i] * 1e3:8.3f} ms  {bw / 1e9:7.1f} GB/s  "
                  f"{frac}  x read pass {med_w[i] / bound_w:.2f}")  # fmt: skip
        return
    bv = f"{B}, {V}"
    by_name = {(e[0], e[1]): i for i, e in enumerate(entries)}
    numpy_f = next(i for i, e in enumerate(entries) if e[0] == "numpy" and e[1] is False)
    numpy_t = next(i for i, e in enumerate(entries) if e[0] == "numpy" and e[1] is True)
    print(f"  {'entry':<11} {'validate':>8} {'cold/bound':>10} {'warm/bound':>10} {'validate cost':>13} "
          f"{'/numpy':>7} {'paired IQR':>10}  {'hand-over':>9} {'/numpy without it':>17}")  # fmt: skip
    for i, (name, validate, *_rest) in enumerate(entries):
        if validate is None:
            continue
        partner = next(k for k, e in enumerate(entries) if e[0] == name and e[1] is False)
        cost = f"{med_c[i] / med_c[partner]:.2f}x" if validate else ""
        base = numpy_t if validate else numpy_f
        vs_np = med_c[i] / med_c[base]
        paired = np.array(cold[i]) / np.array(cold[base])  # same repeat: the same load on the machine
        q1, q3 = np.percentile(paired, [25, 75])
        spread = f"{q1:.2f}-{q3:.2f}" if i != base else ""
        hand = np.array(handoff[i])
        extra = ""
        if name.startswith("torch/"):  # the hand-over's share of the call, and the rest against NumPy
            rest = float(np.median((np.array(cold[i]) - hand) / np.array(cold[base])))
            extra = f"  {np.median(hand) / med_c[base]:>8.1%} {rest:>16.2f}x"
        print(f"  {name:<11} {str(validate):>8} {med_c[i] / bound:>9.2f}x {med_w[i] / bound_w:>9.2f}x "
              f"{cost:>13} {vs_np:>6.2f}x {spread:>10}{extra}")  # fmt: skip
        if figs is not None:
            hand_cells = extra.split() if extra else ["", ""]
            figs.entries.append([bv, name, str(validate), f"{med_c[i] / bound:.2f}x", f"{med_w[i] / bound_w:.2f}x",
                                 cost, f"{vs_np:.2f}x", spread, *hand_cells])  # fmt: skip
    if figs is None:
        return
    th = args.threads[0]
    torch_f = by_name[(f"torch/{th}", False)]
    hand = np.array(handoff[torch_f])
    rest = float(np.median((np.array(cold[torch_f]) - hand) / np.array(cold[numpy_f])))
    pure_f = by_name.get(("numpy-pure", False))
    figs.summary.append([
        bv, f"{measured_acc:.2f}", f"{n_bytes / bound / 1e9:.1f}", f"{med_c[numpy_f] / bound:.2f}x",
        f"{med_c[numpy_t] / med_c[numpy_f]:.2f}x", f"{med_c[pure_f] / bound:.2f}x" if pure_f is not None else "",
        f"{med_c[torch_f] / med_c[numpy_f]:.2f}x", f"{np.median(hand) / med_c[numpy_f]:.1%}", f"{rest:.2f}x",
        f"{med_c[by_name[(f'kernels/{th}', False)]] / med_c[numpy_f]:.2f}x",
    ])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="64x32000,64x128256,256x128256", help="BxV,BxV,...")
    ap.add_argument("--threads", default="1,2", help="torch CPU thread counts to time")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: process CPU seconds, steadier on a shared machine (1-thread entries)")  # fmt: skip
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="per entry over the repeats; min on a machine shared with other work")  # fmt: skip
    ap.add_argument(speed_doc.FLAG, action="store_true", help=speed_doc.FLAG_HELP + " (CPU only)")
    args = ap.parse_args()
    if args.write_doc and args.device != "cpu":
        ap.error(f"{speed_doc.FLAG} writes the CPU tables; run --device cuda without it")
    doc = speed_doc.Section("bench_verify")
    figs = Figures() if args.write_doc else None
    args.threads = [int(t) for t in args.threads.split(",")]
    global CLOCK
    if args.clock == "cpu":
        CLOCK = time.process_time
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to time")
        return
    print(f"specviz verify benchmark, {time.strftime('%Y-%m-%d %H:%M %Z')}; numpy {np.__version__}, "
          f"torch {torch.__version__}; torch CPU threads timed: {args.threads} "
          f"(torch default here: {torch.get_num_threads()}); repeats {args.repeat}, "
          f"{args.stat} of {args.clock} time")  # fmt: skip
    if numba_enabled():
        import numba

        first = numba_first_call()
        print(f"numpy: the hot loops run compiled (numba {numba.__version__}; "
              f"{first}); numpy-pure: {BACKEND_ENV}=numpy, the NumPy code only")  # fmt: skip
        doc.note(f"compiled loops (Numba) on: the {first}")
    else:
        print("numpy: Numba is not installed (or switched off): the NumPy passes")
    spy_handoff()
    rng = np.random.default_rng(0)
    for size in args.sizes.split(","):
        B, V = (int(s) for s in size.split("x"))
        bench_config(B, V, args, rng, figs)
    if figs is not None:
        write_doc(doc, args, figs)


def write_doc(doc: speed_doc.Section, args, figs: Figures) -> None:
    """The bench_verify section of docs/speed.md: the summary, every entry, the draw's constants."""
    th = args.threads[0]
    doc.note(f"{args.stat} of {args.repeat} cold calls, {args.clock} time; torch at {th} thread(s) in the summary")
    summary = [h.replace("torch /", f"torch/{th} /") if h.startswith("torch /") else h for h in SUMMARY]
    doc.table(f"Summary, K = {K}, float32, validate=False unless named: ratios to the read bound or to NumPy "
              "in the same run", summary, figs.summary)  # fmt: skip
    doc.table("Every entry: cold and warm medians over the read bound, validate=True over False, over NumPy "
              "(and the interquartile range of the per-repeat ratios), torch's hand-over", ENTRIES, figs.entries)
    step = 1 / reference.GRID
    Vs = sorted({int(r[0].split(", ")[1]) for r in figs.summary})
    doc.table("The draw's constants (specviz.verifiers._sample) and the quantization bound V x grid step in "
              "total variation", ["V", "grid step", "sum margin", "block", "TV bound"],
              [[str(V), f"2^-{int(np.log2(reference.GRID))}", f"{sample_mod.SUM_MARGIN:g}", str(sample_mod.BLOCK),
                f"{V * step:.1e}"] for V in Vs])  # fmt: skip
    doc.write()


if __name__ == "__main__":
    main()
