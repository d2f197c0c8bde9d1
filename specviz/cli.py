"""Headless use: ``python -m specviz prove`` and ``python -m specviz list``.

``prove`` runs the embedded suite (every scenario with the verifier under test, every bug
where it shows) and prints one table, or JSON with ``--json``. Exit status 0 exactly when
the verifier passes everything and every bug is caught; 1 otherwise; 2 for bad arguments.
``--verifier module:function`` puts your own verifier (same signature and result fields as
``specviz.verify``) through the same suite.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .bugs import BUGS
from .errors import InputError
from .prove import DEFAULT_N, HOME, SCENARIOS, CaseResult, plan, run_suite
from .stats import ALPHA
from .verify import verify


def load_verifier(spec: str) -> Callable[..., Any]:
    """``package.module:function`` -> the function (the current directory is importable)."""
    mod_name, sep, fn_name = spec.partition(":")
    if not sep or not mod_name or not fn_name:
        raise InputError("--verifier", "module:function, e.g. mypkg.spec:verify", repr(spec))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod_name)
    except Exception as e:
        raise InputError("--verifier", f"an importable module {mod_name!r}", f"{type(e).__name__}: {e}") from e
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise InputError("--verifier", f"a function {fn_name!r} in {mod_name}", "no such callable")
    return fn


def _num(x: float, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


COLUMNS = [
    ("scenario", 13), ("verifier", 22), ("chi2", 9), ("dof", 4), ("crit", 7), ("p-value", 8),
    ("TV", 7), ("detect TV", 9), ("tok/step", 8), ("theory", 7), ("1st-tok", 7), ("verdict", 8),
]  # fmt: skip


def format_row(r: CaseResult) -> str:
    j = r.joint
    cells = [
        r.scenario, r.verifier, _num(j.statistic, ".1f"), str(j.dof), _num(j.critical_value, ".1f"),
        _num(j.p_value, ".2g"), _num(j.tv, ".4f"), _num(j.detectable_tv, ".4f"), _num(r.tokens_measured, ".3f"),
        _num(r.tokens_theory, ".3f"), "pass" if r.first_token.passed else "fail", r.verdict,
    ]  # fmt: skip
    return " ".join(
        c.rjust(w) if i > 1 else c.ljust(w) for i, (c, (_, w)) in enumerate(zip(cells, COLUMNS, strict=True))
    )


def header() -> str:
    top = " ".join(n.rjust(w) if i > 1 else n.ljust(w) for i, (n, w) in enumerate(COLUMNS))
    return top + "\n" + "-" * len(top)


def to_json(r: CaseResult) -> dict[str, Any]:
    def clean(x: Any) -> Any:
        return None if isinstance(x, float) and not math.isfinite(x) else x

    def chi(c: Any) -> dict[str, Any]:
        return {k: clean(v) for k, v in c._asdict().items()}

    return {
        "scenario": r.scenario,
        "verifier": r.verifier,
        "is_bug": r.is_bug,
        "verdict": r.verdict,
        "joint": chi(r.joint),
        "first_token": chi(r.first_token),
        "positions": [chi(p) for p in r.positions],
        "tokens_per_step": {"measured": clean(r.tokens_measured), "theory": clean(r.tokens_theory),
                            "se": clean(r.tokens_se), "z": clean(r.tokens_z), "passed": r.tokens_passed},
        "seconds": round(r.seconds, 3),
        "error": r.error,
    }  # fmt: skip


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    if value in ("", "none"):
        return []
    return list(BUGS) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m specviz", description="specviz: lossless speculative sampling")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="run the end-to-end proof suite", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--n", type=int, default=DEFAULT_N, help=f"sequences per case (default {DEFAULT_N:,})")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (the chains are fixed per scenario)")
    p.add_argument("--scenarios", help="comma-separated, from: " + ", ".join(SCENARIOS))
    p.add_argument("--bugs", help="comma-separated, 'all' or 'none' (default: all; none with --verifier)")
    p.add_argument("--verifier", help="module:function of your own verifier, in place of specviz.verify")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"test level (default {ALPHA})")
    p.add_argument("--matrix", action="store_true", help="run every bug in every scenario")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    sub.add_parser("list", help="list scenarios and bugs")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command == "list":
        for s in SCENARIOS.values():
            print(f"scenario {s.name:14s} {s.description}")
        for b in BUGS.values():
            where = ", ".join(HOME.get(b.name, ("reference",)))
            print(f"bug      {b.name:24s} caught by {b.caught_by} [{where}]")
        return 0
    try:
        verifier, vname = verify, "verify"
        if args.verifier:
            verifier, vname = load_verifier(args.verifier), args.verifier
        bugs = _csv(args.bugs)
        if bugs is None:
            bugs = [] if args.verifier else list(BUGS)
        cases = plan(_csv(args.scenarios), bugs, matrix=args.matrix)
        if not cases:
            raise InputError("--scenarios", "at least one case to run", "none selected")
        if args.n < 1:
            raise InputError("--n", "at least 1 sequence per case", str(args.n))
        if args.seed < 0:
            raise InputError("--seed", "a non-negative integer", str(args.seed))
        if not 0 < args.alpha < 1:
            raise InputError("--alpha", "a level in (0, 1)", str(args.alpha))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    t0 = time.perf_counter()

    def progress(i: int, total: int, r: CaseResult) -> None:
        if not args.quiet:
            print(f"[{i:>2}/{total}] {r.scenario} / {r.verifier}: {r.verdict} ({r.seconds:.1f} s)", file=sys.stderr)

    suite = run_suite(cases, verifier, verifier_name=vname, n=args.n, seed=args.seed, alpha=args.alpha,
                      progress=progress)  # fmt: skip
    elapsed = time.perf_counter() - t0
    if args.json:
        out = {"ok": suite.ok, "failures": suite.failures, "n": args.n, "seed": args.seed, "alpha": args.alpha,
               "seconds": round(elapsed, 2), "cases": [to_json(r) for r in suite.results]}  # fmt: skip
        print(json.dumps(out, indent=2))
    else:
        print(header())
        for r in suite.results:
            print(format_row(r))
        print()
        print(f"N = {args.n:,} sequences per case, seed {args.seed}, level {args.alpha}; {elapsed:.1f} s.")
        print("detect TV: any shift of the joint law at least this large is caught with probability >= 99%.")
        print("1st-tok: a test of the first token alone (informational: it misses shared_uniform).")
        for r in suite.results:
            if r.error:
                print(f"error in {r.scenario} / {r.verifier}: {r.error}")
        print("OK: the verifier passed every case and every bug was caught." if suite.ok
              else "NOT OK:\n  " + "\n  ".join(suite.failures))  # fmt: skip
    return 0 if suite.ok else 1
