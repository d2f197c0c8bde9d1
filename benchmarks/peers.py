"""specviz's verifier next to the ways others write it, on the same inputs, in the same run.

    python benchmarks/peers.py [--repeat 3] [--sizes 64x32000,64x128256] [--threads 1] [--write-doc]

Reference styles, written here from their published descriptions (no code copied):

- ``numpy-loop``: one row at a time in NumPy, the rule as a textbook states it: accept while
  u < p(x)/q(x), then the residual max(0, p - q) normalized and drawn by inverse CDF.
- ``hf-style``: the Hugging Face assisted-generation shape, one sequence at a time in torch:
  gather p(x)/q(x) for all drafts, count leading acceptances, build the residual of the
  rejected position over the whole vocabulary, normalize it, draw with ``torch.multinomial``.
- ``vllm-v0-style``: batched torch that builds and normalizes the residual at every position
  (B, K, V), draws a recovered token at every position (exponential race), then picks per row.

Installed peer packages (``economize``, ``flashspec``) are listed with their status; no adapter
is written for a package whose API could not be read on this machine, and absent ones are
skipped. Inputs are those of ``bench_verify.py`` (K = 4, float32, acceptance ~0.7). The
numpy-loop and specviz take the same explicit uniforms, and their tokens are compared before
anything is timed (they may differ only where a uniform falls within float rounding of a CDF
step: specviz floors weights to 2^-48). Every entry is timed cold (caches evicted) in a
shuffled order; the table prints each one's median as a ratio to specviz (NumPy), to specviz
(torch) and to the same-run read bound of ``bench_verify.py``; ``--write-doc`` writes that table
into the peers section of docs/speed.md (benchmarks/speed_doc.py) with the command, the date
and the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import speed_doc  # benchmarks/ is on the path when this file runs
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_verify import K, evict, make_inputs  # noqa: E402

from specviz import Uniforms, verify  # noqa: E402

PEER_PACKAGES = ["economize", "flashspec"]


def numpy_loop(target, draft, tokens, num, ua, us):
    """(B, K+1) tokens, one row at a time."""
    B = target.shape[0]
    out = np.full((B, target.shape[1]), -1, dtype=np.int64)
    for b in range(B):
        n = 0
        while n < num[b]:
            x = tokens[b, n]
            px, qx = float(target[b, n, x]), float(draft[b, n, x])
            if not (qx > 0 and ua[b, n] * qx < px):
                break
            out[b, n] = x
            n += 1
        if n < num[b]:
            w = np.maximum(target[b, n].astype(np.float64) - draft[b, n], 0)
        else:
            w = target[b, n].astype(np.float64)
        if w.sum() <= 0:
            w = target[b, n].astype(np.float64)
        cdf = np.cumsum(w)
        out[b, n] = min(int(np.searchsorted(cdf, us[b] * cdf[-1], side="right")), len(w) - 1)
    return out


def hf_style(target, draft, tokens, num, gen):
    """One sequence at a time, full-vocabulary residual, torch.multinomial."""
    B = target.shape[0]
    out = torch.full((B, target.shape[1]), -1, dtype=torch.int64)
    for b in range(B):
        j = int(num[b])
        x = tokens[b, :j]
        p_x = target[b, torch.arange(j), x]
        q_x = draft[b, torch.arange(j), x]
        r = torch.rand(j, generator=gen)
        accepted = r <= p_x / q_x
        n = int((~accepted).cumsum(-1).lt(1).sum())
        out[b, :n] = x[:n]
        if n < j:
            p_prime = (target[b, n] - draft[b, n]).clamp(min=0)
            p_prime = p_prime / p_prime.sum()
        else:
            p_prime = target[b, n]
        out[b, n] = torch.multinomial(p_prime, 1, generator=gen)[0]
    return out


def vllm_v0_style(target, draft, tokens, num, gen):
    """Batched: a normalized residual and a recovered token at every position."""
    B, K1, V = target.shape
    Kd = K1 - 1
    ar = torch.arange(B)[:, None]
    pos = torch.arange(Kd)[None, :]
    p_x = target[ar, pos, tokens.clamp(min=0)]
    q_x = draft[ar, pos, tokens.clamp(min=0)]
    u = torch.rand(B, Kd, generator=gen)
    accepted = (u < (p_x / q_x).clamp(max=1)) & (pos < num[:, None])
    diff = (target[:, :Kd] - draft).clamp_(min=0)  # (B, K, V): every residual
    diff /= diff.sum(-1, keepdim=True)
    expo = torch.empty_like(diff).exponential_(generator=gen)
    recovered = diff.div_(expo).argmax(-1)  # (B, K) one recovered token per position
    n = (~accepted).int().cumsum(-1).eq(0).sum(-1)  # (B,) leading acceptances
    bonus = torch.multinomial(target[torch.arange(B), num], 1, generator=gen)[:, 0]
    out = torch.full((B, K1), -1, dtype=torch.int64)
    out[:, :Kd] = torch.where(pos < n[:, None], tokens, -1)
    last = torch.where(n < num, recovered[torch.arange(B), n.clamp(max=Kd - 1)], bonus)
    out[torch.arange(B), n] = last
    return out


def peer_status() -> list[str]:
    lines = []
    for name in PEER_PACKAGES:
        if importlib.util.find_spec(name) is None:
            lines.append(f"{name}: not installed, skipped")
        else:
            lines.append(f"{name}: installed, but no adapter is written here (its API was not available to read)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="64x32000,64x128256", help="BxV,BxV,...")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--stat", choices=["median", "min"], default="median")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: process CPU seconds")
    ap.add_argument(speed_doc.FLAG, action="store_true", help=speed_doc.FLAG_HELP)
    args = ap.parse_args()
    doc = speed_doc.Section("peers")
    rows: list[list[str]] = []
    torch.set_num_threads(args.threads)
    stat = np.median if args.stat == "median" else np.min
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"peers of specviz.verify, {time.strftime('%Y-%m-%d %H:%M %Z')}; torch threads {args.threads}; "
          f"repeats {args.repeat}, {args.stat} of cold calls, {args.clock} time")  # fmt: skip
    for line in peer_status():
        print("  " + line)
        doc.note(line)
    rng = np.random.default_rng(0)
    for size in args.sizes.split(","):
        B, V = (int(s) for s in size.split("x"))
        target, draft, tokens, num, _ = make_inputs(B, V)
        ua, us = np.random.default_rng(1).random((B, K)), np.random.default_rng(2).random(B)
        u = Uniforms(ua, us)
        tt = [torch.from_numpy(a) for a in (target, draft, tokens, num)]
        tu = Uniforms(torch.from_numpy(ua), torch.from_numpy(us))
        ref = verify(target, draft, tokens, num, uniforms=u, validate=False)
        loop = numpy_loop(target, draft, tokens, num, ua, us)
        same = float((loop == ref.tokens).all(1).mean())
        rejected = int((ref.num_accepted < K).sum())
        n_bytes = (B + rejected) * V * 4
        buf = np.random.default_rng(3).random(n_bytes // 4, dtype=np.float32)
        tbuf = torch.from_numpy(buf)
        gen = torch.Generator().manual_seed(0)
        entries = {
            "read pass (numpy)": buf.sum,
            "read pass (torch)": tbuf.sum,
            "specviz numpy": lambda: verify(target, draft, tokens, num, uniforms=u, validate=False),  # noqa: B023
            "specviz torch": lambda: verify(*tt, uniforms=tu, validate=False),  # noqa: B023
            "specviz numpy, validate": lambda: verify(target, draft, tokens, num, uniforms=u),  # noqa: B023
            "numpy-loop": lambda: numpy_loop(target, draft, tokens, num, ua, us),  # noqa: B023
            "hf-style": lambda: hf_style(*tt, gen),  # noqa: B023
            "vllm-v0-style": lambda: vllm_v0_style(*tt, gen),  # noqa: B023
        }
        times = {k: [] for k in entries}
        for fn in entries.values():
            fn()
        for _ in range(args.repeat):
            for k in rng.permutation(list(entries)):
                evict()
                t0 = clock()
                entries[k]()
                times[k].append(clock() - t0)
        t = {k: float(stat(v)) for k, v in times.items()}
        bound = min(t["read pass (numpy)"], t["read pass (torch)"])
        print(f"\nB = {B}, K = {K}, V = {V}, float32, {rejected}/{B} rows rejected; numpy-loop tokens equal "
              f"specviz's on {same:.1%} of rows; read bound {n_bytes / bound / 1e9:.1f} GB/s")  # fmt: skip
        print(f"  {'implementation':<24} {'/ specviz numpy':>15} {'/ specviz torch':>15} {'/ read bound':>12}")
        doc.note(f"B = {B}, V = {V}: {rejected}/{B} rows rejected; numpy-loop tokens equal specviz's on "
                 f"{same:.1%} of rows; read bound {n_bytes / bound / 1e9:.1f} GB/s")  # fmt: skip
        for k in entries:
            print(f"  {k:<24} {t[k] / t['specviz numpy']:>14.2f}x {t[k] / t['specviz torch']:>14.2f}x "
                  f"{t[k] / bound:>11.2f}x")  # fmt: skip
            rows.append([f"{B}, {V}", k, f"{t[k] / t['specviz numpy']:.2f}x", f"{t[k] / t['specviz torch']:.2f}x",
                         f"{t[k] / bound:.2f}x"])  # fmt: skip
    if args.write_doc:
        doc.note(f"torch at {args.threads} thread(s); {args.stat} of {args.repeat} cold calls, {args.clock} time")
        doc.table(f"The same inputs (K = {K}, float32) through each implementation: ratios to specviz (NumPy), "
                  "to specviz (torch) and to the read bound, in the same run",
                  ["B, V", "implementation", "/ specviz numpy", "/ specviz torch", "/ read bound"], rows)  # fmt: skip
        doc.write()


if __name__ == "__main__":
    main()
