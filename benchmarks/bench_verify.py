"""Time `verify` against one read pass over the bytes it must read, in the same run.

    python benchmarks/bench_verify.py [--repeat 20]

B = 64 rows, K = 4 drafts, V in {32000, 128256}, float32, every row with K drafts. The
verifier must read, per row, the one target row it samples from and, after a rejection, the
one draft row of the residual: bytes = (B + rejected rows) * V * 4 (the (B, K) gathered
probabilities are negligible). The bound is the time of one sum over a contiguous buffer of
exactly that many bytes with the same library. The printed figure is time(verify) / time(read):
how many read passes the verifier costs. The machine is shared and noisy, so both are the
median of the same number of repeats, interleaved.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import verify  # noqa: E402

B, K = 64, 4


def make_inputs(V: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((B, K + 1, V), dtype=np.float32) * 3
    target = np.exp(logits - logits.max(-1, keepdims=True))
    target /= target.sum(-1, keepdims=True)
    noisy = logits[:, :K] + rng.standard_normal((B, K, V), dtype=np.float32)
    draft = np.exp(noisy - noisy.max(-1, keepdims=True))
    draft /= draft.sum(-1, keepdims=True)
    cdf = np.cumsum(draft, -1, dtype=np.float64)
    tokens = np.minimum((cdf <= rng.random((B, K, 1)) * cdf[..., -1:]).sum(-1), V - 1)
    return target.astype(np.float32), draft.astype(np.float32), tokens, np.full(B, K)


def median_time(fn, repeat: int, sync=lambda: None) -> float:
    fn()  # warm-up
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    print(f"torch threads: {torch.get_num_threads()}; B = {B}, K = {K}, float32")
    print(f"{'V':>7} {'backend':>10} {'validate':>8} {'verify ms':>10} {'read ms':>8} {'ratio':>6}  must-read MB")
    for V in (32000, 128256):
        target, draft, tokens, num = make_inputs(V)
        u = (np.random.default_rng(1).random((B, K)), np.random.default_rng(2).random(B))
        rejected = int((verify(target, draft, tokens, num, uniforms=u).num_accepted < K).sum())
        n_bytes = (B + rejected) * V * 4
        buf = np.random.default_rng(3).random((B + rejected) * V, dtype=np.float32)
        tbuf = torch.from_numpy(buf)
        tt = [torch.from_numpy(a) for a in (target, draft, tokens, num)]
        tu = tuple(torch.from_numpy(a) for a in u)
        runs = [("numpy", (target, draft, tokens, num), u, buf.sum, lambda: None),
                ("torch-cpu", tt, tu, tbuf.sum, lambda: None)]  # fmt: skip
        if torch.cuda.is_available():  # same inputs on the GPU; timings synchronize the device
            runs.append(("torch-cuda", [a.cuda() for a in tt], tuple(a.cuda() for a in tu), tbuf.cuda().sum,
                         torch.cuda.synchronize))  # fmt: skip
        for backend, args_v, uni, read, sync in runs:
            t_read = median_time(read, args.repeat, sync)
            for validate in (False, True):
                t_ver = median_time(lambda a=args_v, v=validate, w=uni: verify(*a, uniforms=w, validate=v),
                                    args.repeat, sync)  # fmt: skip
                print(
                    f"{V:>7} {backend:>10} {str(validate):>8} {t_ver * 1e3:>10.2f} {t_read * 1e3:>8.2f} "
                    f"{t_ver / t_read:>6.1f}  {n_bytes / 1e6:.1f} ({rejected}/{B} rows rejected)"
                )


if __name__ == "__main__":
    main()
