"""Where users wait on the simulation: a Bug-lab click, a Tokens-page step, the prove suite.

    python benchmarks/bench_sim.py [--repeat 3] [--scenarios reference,ragged] [--bugs all|none|a,b] [--no-prove]
                                   [--write-doc]

Each figure is printed as a ratio to its goal bound (issue 9: a Bug-lab click at N = 1,000,000
under 1 s, a Tokens-page step at its cap under 1 s, ``python -m specviz prove`` under 8 s)
and, for the simulation, to a baseline measured in the same run: the simulation as it was
before chunking and table gathers (``legacy_generate`` below, kept verbatim apart from names),
driving the same verifier. A click is split into the time spent inside the verifier and the
rest (drafting, building the padded batches, bookkeeping, the chi-square), measured by
wrapping the verifier with a timer. The machine is shared and noisy: old and new runs are
interleaved, the median of ``--repeat`` is reported, and CPU time (``time.process_time``;
``getrusage`` for the command) is printed beside wall time: under load the wall time
includes waiting for a core, the CPU time is what the work costs.

Bug-lab clicks on a mistake (``--bugs``): each mistake of the catalogue runs on the reference
(:mod:`specviz.verifiers.reference` with one step swapped), not on the engine, so its click is
timed too, at its first home scenario, as a ratio to the 1 s bound and to the correct verifier's
click on the same scenario in the same run (the engine: what a mistake's click cost when the
mistakes were switches of the engine).

``--write-doc`` writes the figures as tables into the bench_sim section of docs/speed.md
(benchmarks/speed_doc.py), with the command, the date and the machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import speed_doc  # benchmarks/ is on the path when this file runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz import verify  # noqa: E402
from specviz.app import limits, speed  # noqa: E402
from specviz.errors import InputError  # noqa: E402
from specviz.proof import prove, scenarios  # noqa: E402
from specviz.proof.markov import START, Drafter, MarkovChain  # noqa: E402
from specviz.proof.simulate import Round, Simulation  # noqa: E402
from specviz.verifiers._fused import BACKEND_ENV  # noqa: E402
from specviz.verifiers._fused import enabled as numba_enabled  # noqa: E402
from specviz.verifiers.verify import verify_greedy  # noqa: E402

CLICK_BOUND_S = 1.0  # Bug lab, N = limits.MAX_PROVE_N
TOKENS_BOUND_S = 1.0  # Tokens page, limits.MAX_TOKENS_N rows x 17 points, with and without the bonus
PROVE_BOUND_S = 8.0  # python -m specviz prove, default settings
TOKENS_K = range(17)  # the Tokens page's K axis (app_pages/tokens.py K_RANGE)


# --- the baseline: the simulation before this rewrite ----------------------------------------------


def _legacy_build_round(target: MarkovChain, drafter: Drafter, ctx, drafts, num_draft) -> Round:
    A, K = drafts.shape
    V = target.V
    g = V - 1
    pos = np.arange(K + 1)
    ctxs = np.concatenate([ctx[:, None], drafts], axis=1)
    valid_t = pos[None, :] <= num_draft[:, None]
    ctxs = np.where(valid_t, ctxs, START)
    target_probs = target.probs(ctxs)
    target_probs[~valid_t] = np.eye(V)[g]
    valid = pos[None, :K] < num_draft[:, None]
    tokens = np.where(valid, drafts, g)
    draft_probs = None
    if drafter.reports_q:
        draft_probs = drafter.chain.probs(ctxs[:, :K])
        draft_probs[~valid] = np.eye(V)[g]
    return Round(target_probs, draft_probs, tokens, num_draft)


def _legacy_sample_rows(rows, u):
    cdf = np.cumsum(rows, axis=1)
    tok = np.count_nonzero(cdf <= (u * cdf[:, -1])[:, None], axis=1)
    last = rows.shape[1] - 1 - np.argmax(rows[:, ::-1] > 0, axis=1)
    return np.minimum(tok, last).astype(np.int64)


def _legacy_draft_tokens(drafter: Drafter, ctx, K: int, rng) -> np.ndarray:
    A = ctx.shape[0]
    out = np.empty((A, K), dtype=np.int64)
    prev = ctx
    for i in range(K):
        rows = drafter.chain.probs(prev)
        prev = _legacy_sample_rows(rows, rng.random(A)) if drafter.samples else np.argmax(rows, axis=1)
        out[:, i] = prev
    return out


def _legacy_check_result(res, A, K, V):
    toks = np.asarray(res.tokens)
    num = np.asarray(res.num_tokens).astype(np.int64)
    if toks.shape != (A, K + 1) or num.shape != (A,):
        raise InputError("verifier", f"tokens ({A}, {K + 1})", f"{toks.shape}")
    if num.size and (num.min() < 0 or num.max() > K + 1):
        raise InputError("verifier", f"num_tokens in [0, {K + 1}]", f"{num.min()}..{num.max()}")
    emitted = np.arange(K + 1)[None, :] < num[:, None]
    if emitted.any() and ((toks[emitted] < 0) | (toks[emitted] >= V)).any():
        raise InputError("verifier", f"emitted tokens in [0, {V})", "out-of-range tokens")
    return toks, num


def legacy_generate(verifier, target, drafter, *, n, L, K, rng, ragged=False, greedy=False, expected=None):
    """specviz.proof.simulate.generate before chunking (commit d2e1b32), for the same-run baseline."""
    V = target.V
    seqs = np.full((n, L), -1, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    tok_sum = tok_sq = 0.0
    draft_sum = 0
    expected_sum = 0.0
    calls = 0
    accepted = np.zeros(K, dtype=np.int64)
    tested = np.zeros(K, dtype=np.int64)
    for _ in range(L * (K + 2) + 1):
        active = np.flatnonzero(length < L)
        if active.size == 0:
            break
        A = active.size
        last = seqs[active, np.maximum(length[active] - 1, 0)]
        ctx = np.where(length[active] > 0, last, START)
        j = rng.integers(0, K + 1, size=A) if ragged else np.full(A, K, dtype=np.int64)
        rnd = _legacy_build_round(target, drafter, ctx, _legacy_draft_tokens(drafter, ctx, K, rng), j)
        if greedy:
            res = verify_greedy(rnd.target_probs, rnd.draft_tokens, j)
        else:
            res = verifier(rnd.target_probs, rnd.draft_probs, rnd.draft_tokens, j, rng=rng)
        toks, num = _legacy_check_result(res, A, K, V)
        calls += A
        tok_sum += float(num.sum())
        tok_sq += float((num.astype(np.float64) ** 2).sum())
        draft_sum += int(j.sum())
        if expected is not None:
            expected_sum += float(expected[ctx + 1, j].sum())
        n_acc = np.asarray(res.num_accepted)
        pos = np.arange(K)
        tested += ((pos[None, :] <= n_acc[:, None]) & (pos[None, :] < j[:, None])).sum(0)
        accepted += (pos[None, :] < n_acc[:, None]).sum(0)
        for t in range(K + 1):
            take = (t < num) & (length[active] + t < L)
            rows = active[take]
            seqs[rows, length[rows] + t] = toks[take, t]
        length[active] = np.minimum(length[active] + num, L)
    else:
        raise InputError("verifier", "at least one token emitted per round", "rounds that emit none")
    mean = tok_sum / max(calls, 1)
    var = max(tok_sq / max(calls, 1) - mean**2, 0.0)
    return Simulation(
        sequences=seqs,
        num_verifications=calls,
        tokens_per_round=mean,
        tokens_per_round_se=float(np.sqrt(var / max(calls, 1))),
        mean_num_draft=draft_sum / max(calls, 1),
        accept_by_position=accepted / np.maximum(tested, 1),
        tested_by_position=tested,
        expected_tokens_per_round=expected_sum / max(calls, 1) if expected is not None else float("nan"),
    )


# --- measurements ------------------------------------------------------------------------------------


class TimedVerify:
    """specviz.verify with a stopwatch; keeps the ``validate`` keyword visible to the simulation."""

    __name__ = "verify"

    def __init__(self) -> None:
        self.seconds = self.cpu = 0.0
        self.calls = 0

    def __call__(self, *args: Any, validate: bool = True, **kw: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        res = verify(*args, validate=validate, **kw)
        self.seconds += time.perf_counter() - t0
        self.cpu += time.process_time() - c0
        self.calls += 1
        return res


class Click(NamedTuple):
    seconds: float  # wall time of prove.run_case
    cpu: float  # its CPU time (process_time): what the click costs when the machine is not shared
    verifier_cpu: float  # CPU time inside the verifier calls
    calls: int  # verifier calls
    verdict: str


def click(scenario: str, n: int, legacy: bool) -> Click:
    """One Bug-lab click: prove.run_case with the verifier timed."""
    timed = TimedVerify()
    saved = prove.generate
    if legacy:
        prove.generate = legacy_generate
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        res = prove.run_case(scenario, timed, n=n, seed=0)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        prove.generate = saved
    return Click(secs, cpu, timed.cpu, timed.calls, res.verdict)


def bug_click(scenario: str, n: int, bug: Any) -> tuple[float, float]:
    """One Bug-lab click on a mistake (app_pages/bug_lab.py: prove.run_case with bug=): wall, CPU."""
    t0, c0 = time.perf_counter(), time.process_time()
    prove.run_case(scenario, n=n, seed=0, bug=bug)
    return time.perf_counter() - t0, time.process_time() - c0


def bug_clicks(names: list[str], n: int, repeat: int) -> list[list[str]]:
    """Each mistake's click against the correct verifier's on the same scenario, interleaved; table rows."""
    from specviz.proof.bugs import BUGS

    print(f"\nBug-lab click on a mistake (it runs on the reference), n = {n:,}; median of {repeat}; "
          "x rule: the mistake's CPU time over the correct verifier's (the engine) on the same scenario")  # fmt: skip
    print(f"{'bug':24s} {'scenario':14s} {'wall':>7s} {'/ 1 s':>6s} {'cpu':>6s} {'rule cpu':>8s} {'x rule':>6s}")
    rows = []
    for name in names:
        bug = BUGS[name]
        sc = scenarios.HOME.get(name, ("reference",))[0]
        mine, rule = [], []
        for r in range(repeat):
            for which in ((bug, None) if r % 2 == 0 else (None, bug)):
                (mine if which is bug else rule).append(bug_click(sc, n, which))
        w, c = median([m[0] for m in mine]), median([m[1] for m in mine])
        rc = median([m[1] for m in rule])
        print(f"{name:24s} {sc:14s} {w:7.3f} {w / CLICK_BOUND_S:6.2f} {c:6.3f} {rc:8.3f} {c / rc:6.2f}")
        rows.append([f"`{name}`", sc, f"{w:.3f}", f"{c:.3f}", f"{c / CLICK_BOUND_S:.2f}", f"{rc:.3f}",
                     f"{c / rc:.2f}x"])  # fmt: skip
    return rows


def tokens_step(n: int) -> tuple[float, float]:
    """What one Tokens-page slider step computes (app_pages/tokens.py ``measure``, both curves): wall, CPU."""
    p, q = speed.two_token_pair(0.7)
    t0, c0 = time.perf_counter(), time.process_time()
    for bonus in (True, False):
        speed.measure_tokens(p, q, TOKENS_K, n, 0, bonus=bonus)
    return time.perf_counter() - t0, time.process_time() - c0


def prove_command(legacy: bool) -> tuple[float, float, int]:
    """Wall time, CPU time and exit status of ``python -m specviz prove --quiet`` (interpreter start included)."""
    cmd = [sys.executable, "-m", "specviz", "prove", "--quiet"]
    if legacy:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--legacy-prove"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return secs, cpu, done.returncode


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def interleaved(fn: Callable[[bool], Any], repeat: int) -> tuple[list[Any], list[Any]]:
    new, old = [], []
    for r in range(repeat):
        for legacy in (False, True) if r % 2 == 0 else (True, False):
            (old if legacy else new).append(fn(legacy))
    return new, old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=limits.MAX_PROVE_N, help="sequences per click")
    ap.add_argument("--scenarios", default="reference,ragged")
    ap.add_argument("--bugs", default="all", help="mistakes whose Bug-lab click to time: all, none, or names")
    ap.add_argument("--no-prove", action="store_true", help="skip the two prove-suite runs (~15 s)")
    ap.add_argument("--legacy-prove", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(speed_doc.FLAG, action="store_true", help=speed_doc.FLAG_HELP)
    args = ap.parse_args()
    if args.legacy_prove:  # the baseline suite: the command with the old simulation patched in
        from specviz import cli

        prove.generate = legacy_generate
        sys.exit(cli.main(["prove", "--quiet"]))

    doc = speed_doc.Section("bench_sim")
    waits: list[list[str]] = []  # where users wait: one row per click
    wait_header = ["click", "wall s", "cpu s", "cpu / bound", "bound s", "before / now (cpu)"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"compiled loops (Numba): {'on' if numba_enabled() else 'off (not installed or ' + BACKEND_ENV + '=numpy)'}")
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average {load} "
          "(ratios to the legacy run hold under load; ratios to the bounds do not)")  # fmt: skip
    print(f"Bug-lab click: prove.run_case(scenario, n = {args.n:,}); median of {args.repeat}, old and new interleaved")
    print("wall: seconds of the click; cpu: its CPU seconds, split into the verifier and the rest (simulation "
          "and statistics); ratios: to the 1 s bound, and legacy / new")  # fmt: skip
    print(f"{'scenario':12s} {'impl':7s} {'wall':>7s} {'/ 1 s':>6s} {'cpu':>6s} {'/ 1 s':>6s} {'seq/cpu-s':>10s} "
          f"{'verifier':>8s} {'rest':>6s} {'calls':>5s} {'x wall':>6s} {'x cpu':>6s}  verdict")  # fmt: skip
    for sc in args.scenarios.split(","):
        new, old = interleaved(lambda legacy, sc=sc: click(sc, args.n, legacy), args.repeat)
        base_wall, base_cpu = median([r.seconds for r in old]), median([r.cpu for r in old])
        for label, runs in (("new", new), ("legacy", old)):
            wall, cpu = median([r.seconds for r in runs]), median([r.cpu for r in runs])
            ver = median([r.verifier_cpu for r in runs])
            print(f"{sc:12s} {label:7s} {wall:7.3f} {wall / CLICK_BOUND_S:6.2f} {cpu:6.3f} {cpu / CLICK_BOUND_S:6.2f} "
                  f"{args.n / cpu:10,.0f} {ver:8.3f} {cpu - ver:6.3f} {runs[0].calls:5d} {base_wall / wall:6.2f} "
                  f"{base_cpu / cpu:6.2f}  {runs[0].verdict}")  # fmt: skip
            if label == "new":
                waits.append([f"Bug lab, N = {args.n:,}, {sc} scenario ({runs[0].verdict})", f"{wall:.3f}",
                              f"{cpu:.3f}", f"{cpu / CLICK_BOUND_S:.2f}", f"{CLICK_BOUND_S:g}",
                              f"{base_cpu / cpu:.2f}x"])  # fmt: skip

    if args.bugs != "none":
        from specviz.proof.bugs import BUGS

        bug_rows = bug_clicks(list(BUGS) if args.bugs == "all" else args.bugs.split(","), args.n, args.repeat)
    else:
        bug_rows = []

    n_tok = limits.MAX_TOKENS_N
    runs, pure = [], []
    for _ in range(args.repeat):  # interleaved: the compiled loops, then NumPy's passes (SPECVIZ_BACKEND=numpy)
        runs.append(tokens_step(n_tok))
        os.environ[BACKEND_ENV] = "numpy"
        try:
            pure.append(tokens_step(n_tok))
        finally:
            os.environ.pop(BACKEND_ENV, None)
    t, c = median([r[0] for r in runs]), median([r[1] for r in runs])
    tp, cp = median([r[0] for r in pure]), median([r[1] for r in pure])
    print(f"\nTokens-page step: speed.measure_tokens x 2 (bonus, no bonus), {n_tok:,} rows x {len(TOKENS_K)} K values: "
          f"wall {t:.3f} s = {t / TOKENS_BOUND_S:.2f} x, cpu {c:.3f} s = {c / TOKENS_BOUND_S:.2f} x the 1 s bound "
          "(verifier calls and position.draw_iid; the simulation module is not on this path)")  # fmt: skip
    print(f"  with NumPy's passes only ({BACKEND_ENV}=numpy): wall {tp:.3f} s = {tp / TOKENS_BOUND_S:.2f} x, "
          f"cpu {cp:.3f} s; "
          f"compiled loops {cp / c:.2f} x faster in cpu")  # fmt: skip
    tok = f"Tokens per step, one slider step at its cap ({n_tok:,} rows x {len(TOKENS_K)} K, twice)"
    waits.append([tok, f"{t:.3f}", f"{c:.3f}", f"{c / TOKENS_BOUND_S:.2f}", f"{TOKENS_BOUND_S:g}", f"{cp / c:.2f}x"])
    waits.append([f"the same with NumPy's passes only ({BACKEND_ENV}=numpy)", f"{tp:.3f}", f"{cp:.3f}",
                  f"{cp / TOKENS_BOUND_S:.2f}", f"{TOKENS_BOUND_S:g}", ""])  # fmt: skip

    if not args.no_prove:
        new, old = interleaved(prove_command, 1)
        (tn, cn, rc_new), (to, co, rc_old) = new[0], old[0]
        print(f"\npython -m specviz prove: wall {tn:.2f} s = {tn / PROVE_BOUND_S:.2f} x, cpu {cn:.2f} s = "
              f"{cn / PROVE_BOUND_S:.2f} x the 8 s bound (exit {rc_new}); with the legacy simulation wall {to:.2f} s, "
              f"cpu {co:.2f} s (exit {rc_old}): {to / tn:.2f} x wall, {co / cn:.2f} x cpu")  # fmt: skip
        from specviz.proof.bugs import BUGS

        what = f"`python -m specviz prove` ({len(scenarios.SCENARIOS)} scenarios, {len(BUGS)} bugs; exit {rc_new})"
        waits.append([what, f"{tn:.2f}", f"{cn:.2f}", f"{cn / PROVE_BOUND_S:.2f}", f"{PROVE_BOUND_S:g}",
                      f"{co / cn:.2f}x"])  # fmt: skip

    if args.write_doc:
        doc.note(f"compiled loops (Numba): {'on' if numba_enabled() else 'off'}; medians of {args.repeat}, "
                 "the current code and its baseline interleaved")  # fmt: skip
        doc.table("Where users wait: CPU seconds against each goal's bound, and the baseline (the simulation before "
                  "chunking and table gathers, and the same click with NumPy's passes only) over now",
                  wait_header, waits)  # fmt: skip
        if bug_rows:
            doc.table("A Bug-lab click on each mistake (it runs on the reference), against the correct verifier's "
                      "click on the same scenario in the same run (the engine)",
                      ["bug", "scenario", "wall s", "cpu s", "cpu / 1 s", "rule cpu s", "mistake / rule"],
                      bug_rows)  # fmt: skip
        doc.write()


if __name__ == "__main__":
    main()
