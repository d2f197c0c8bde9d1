"""What speculative sampling costs on the real model (SmolLM2-135M, torch at one thread, CPU).

    python benchmarks/bench_models.py [--K 3,4] [--tokens 32] [--drafters same,early,lookup,ngram]
                                      [--layers 24] [--prompt "..."]

Every cost is a ratio to one **target token**: a forward over one new position with the KV
cache, plus process_logits on its row (plain decoding's cost per token), measured in the same
run. Then, at each K:

- the target's verification pass over K + 1 positions (its forward, and process_logits on the
  K + 1 rows), and the specviz.verify call on those rows;
- per drafter: the cost of one draft (c), the measured acceptance per position against
  sum min(p, q) from the real rows, tokens per round against (1 - a^(K+1)) / (1 - a) from the
  measured a, and the speedup over plain decoding, measured (tokens per second of rounds over
  tokens per second of plain decoding) and modelled as E[tokens] / (v + K c + o), with v the
  verification pass and o the verify call and the rest of a round, each in target tokens.

Clock: CPU time of the calling thread (torch runs on it), the median over the rounds, with wall
time beside the totals; the machine's load average is printed, since under load the wall time
includes waiting for a core. The converted model file is loaded first (its load time printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz import Settings, process_logits  # noqa: E402
from specviz.app import model_drafters  # noqa: E402
from specviz.models import Session, load, missing, rounds  # noqa: E402
from specviz.models.drafters import sample  # noqa: E402
from specviz.proof import theory  # noqa: E402

PROMPTS = (
    "A hash table is a data structure that",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "The three most important rules of writing clearly are",
)


def plain_token_cost(model, prompt: list[int], settings: Settings, n: int) -> tuple[float, float]:
    """(median CPU seconds, median wall seconds) per token of plain decoding with the KV cache."""
    s = Session(model.llama)
    rng = np.random.default_rng(0)
    seq = list(prompt)
    s.logits(seq[:-1])  # prefill, not timed
    cpu, wall = [], []
    for _ in range(n):
        c, w = time.thread_time(), time.perf_counter()
        p = process_logits(s.logits(seq)[0].numpy(), settings)
        seq.append(sample(p, float(rng.random())))
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", default="3,4", help="drafts per round, comma-separated")
    ap.add_argument("--tokens", type=int, default=32, help="tokens generated per drafter, K and prompt")
    ap.add_argument("--drafters", default=",".join(model_drafters.KINDS))
    ap.add_argument("--layers", type=int, default=24, help="the early-exit drafter's depth (of 30)")
    ap.add_argument("--draft-temperature", type=float, default=1.5, help="the same-model drafter's temperature")
    ap.add_argument("--prompt", action="append", help="a prompt (repeatable); default: three built in")
    args = ap.parse_args()
    reason = missing()
    if reason is not None:
        print(f"skipped: {reason}")
        return
    c0, w0 = time.process_time(), time.perf_counter()
    model = load()
    print(f"load: {time.process_time() - c0:.2f} s CPU, {time.perf_counter() - w0:.2f} s wall "
          f"({'converted the GGUF' if model.converted else 'from the converted file'} {model.cache}); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    settings = Settings(temperature=1.0, top_p=0.95)
    print(f"target settings: {settings}")
    prompts = args.prompt or list(PROMPTS)
    Ks = [int(k) for k in args.K.split(",")]
    for text in prompts:
        prompt = model.encode(text)
        tok_cpu, tok_wall = plain_token_cost(model, prompt, settings, n=16)
        print(f"\nprompt {text!r} ({len(prompt)} tokens)")
        print(f"  target token (1 position, cached, processed): {tok_cpu * 1e3:.1f} ms CPU, "
              f"{tok_wall * 1e3:.1f} ms wall = 1")  # fmt: skip
        for K in Ks:
            print(f"  K = {K}")
            header = True
            for kind in args.drafters.split(","):
                dsettings = Settings(temperature=args.draft_temperature) if kind == "same" else settings
                drafter = model_drafters.drafter(kind, model, dsettings, layers=args.layers)
                target = rounds.Target(model.llama, settings)
                target.prepare(prompt)  # the prefills, not timed (run() repeats them at the cost of one position)
                drafter.prepare(prompt)
                c, w = time.thread_time(), time.perf_counter()
                got = list(rounds.run(target, drafter, prompt, K, seed=0, max_tokens=args.tokens))
                run_cpu, run_wall = time.thread_time() - c, time.perf_counter() - w
                if header:  # the verification costs, from this drafter's rounds with K drafts
                    full = [r for r in got if len(r.drafts) == K] or got
                    v = statistics.median(r.target_cpu_seconds for r in full)
                    pr = statistics.median(r.process_seconds for r in full)
                    vc = statistics.median(r.verify_seconds for r in full)
                    print(f"    verification pass over K + 1 = {K + 1} positions: forward {v / tok_cpu:.2f}, "
                          f"process_logits {pr / tok_cpu:.2f}; specviz.verify call {vc / tok_cpu:.3f} "
                          "target tokens")  # fmt: skip
                    header = False
                drafted = sum(len(r.drafts) for r in got)
                c_draft = (sum(r.draft_cpu_seconds for r in got) / drafted / tok_cpu) if drafted else float("nan")
                acc = [(sum(1 for r in got if len(r.drafts) > i and r.accepted > i),
                        sum(1 for r in got if len(r.drafts) > i and r.accepted >= i)) for i in range(K)]  # fmt: skip
                per_pos = [a / n if n else float("nan") for a, n in acc]
                overlap = [float(np.mean([r.overlap[i] for r in got if len(r.overlap) > i and r.accepted >= i]))
                           if acc[i][1] else float("nan") for i in range(K)]  # fmt: skip
                tested = sum(n for _, n in acc)
                a = sum(x for x, _ in acc) / tested if tested else float("nan")
                tokens = sum(len(r.emitted) for r in got) / len(got)
                closed = theory.expected_tokens(min(a, 1 - 1e-12), K) if tested else 1.0
                round_cpu = statistics.median(r.draft_cpu_seconds + r.target_cpu_seconds + r.process_seconds
                                              + r.verify_seconds for r in got)  # fmt: skip
                measured = (sum(len(r.emitted) for r in got) / run_cpu) * tok_cpu
                other = round_cpu / tok_cpu - statistics.median(
                    (r.target_cpu_seconds + r.draft_cpu_seconds) / tok_cpu for r in got
                )
                vpass = statistics.median(r.target_cpu_seconds for r in got) / tok_cpu
                model_speedup = closed / (vpass + K * (c_draft if drafted else 0.0) + other)
                shown = " ".join(f"{x:.2f}" for x in per_pos), " ".join(f"{x:.2f}" for x in overlap)
                print(f"    {drafter.name}: draft c = {c_draft:.3f}; acceptance per position "
                      f"{shown[0]} vs sum min(p,q) {shown[1]}; "
                      f"a = {a:.2f}; tokens/round {tokens:.2f} vs closed form {closed:.2f}; speedup measured "
                      f"{measured:.2f}x, modelled {model_speedup:.2f}x; {len(got)} rounds, {run_cpu:.1f} s CPU, "
                      f"{run_wall:.1f} s wall")  # fmt: skip
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
