"""Headless use: ``python -m specviz prove`` and ``python -m specviz list``.

``prove`` runs the embedded suite (every scenario with the verifier under test, every bug
where it shows, as negative controls) and prints one table, or JSON with ``--json``.
``--verifier module:function`` puts your own verifier (same signature and result fields as
``specviz.verify``) through the same suite, with the bugs run beside it so the output shows
the tests fail where they should on these very scenarios (``--bugs none`` skips them, and
says so). A failing case explains itself: the cells that weigh most in chi-square, tokens per
step against the exact value, and the known bug whose law is nearest. No verdict without
power: a test that could not see a shift of TV 0.05 (or 0.05 tokens per step) gives
"inconclusive", with the N it needs.

``--kind chain|block|tree`` says what kind of verifier is under test (default chain). ``block``:
a function with ``specviz.verify``'s signature judged against block verification's own exact
tokens per step, by the exact court (``specviz.proof.court.judge``, every scenario) beside the joint
chi-square, with block verification's classic mistakes as controls. ``tree``: a function with
``specviz.verifiers.tree.verify_tree``'s signature (run as chain-shaped trees on the scenarios, and on small
real trees by ``specviz.proof.court.judge_tree``), or one with verify's signature (a chain-shaped tree,
like ``specviz.verifiers.tree.verify_tree_chain``), with tree verification's mistakes as controls. The
default verifier of each kind is the package's own.

The verifier is held to account (``specviz.proof.harness``): anything it raises, ``SystemExit``
included, is its case's ERROR; ``--timeout`` seconds (default 60, 0 for none) stop a case that
hangs, as an ERROR naming it; float tokens are an error, not truncated; it gets read-only
arrays, and a write into one is an error naming the argument; what it prints goes to stderr,
so ``--json`` prints JSON only.

``specviz list`` prints the verifier registry (``specviz.proof.registry``: each verifier's kind,
signature, lossless or lossy, reference and mistakes), the scenarios and the bugs.

Exit status: 0 when the verifier passes every case and every bug run is caught; 1 when
something fails, raises, runs past its time limit or a bug is missed; 2 for bad arguments;
3 when nothing failed but some case is inconclusive (N too small).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .errors import InputError
from .proof import registry, shipped
from .proof.bugs import BUGS
from .proof.controls import KINDS, kind_controls
from .proof.engine_bugs import FAULTS
from .proof.harness import DEFAULT_TIMEOUT
from .proof.prove import DEFAULT_N, plan, run_suite
from .proof.report import (
    CaseResult,
    SuiteResult,
    case_record,
    controls_line,
    exact_record,
    exact_table,
    fault_tv,
    format_row,
    header,
    home_tvs,
    summary_line,
)
from .proof.scenarios import HOME, SCENARIOS
from .proof.stats import ALPHA, MIN_TOKENS, MIN_TV

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3


def load_verifier(spec: str) -> Callable[..., Any]:
    """``package.module:function`` -> the function (the current directory is importable); an
    adapter's name (``hf``, ``vllm:M:F``, ``flashinfer:M:F``: specviz.proof.adapters) wraps one."""
    from .proof import adapters

    adapted = adapters.resolve(spec, load_verifier)
    if adapted is not None:
        return adapted[0]
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


def to_json(r: CaseResult) -> dict[str, Any]:
    return case_record(r)


def _csv(value: str | None, every: Sequence[str] = tuple(BUGS)) -> list[str] | None:
    if value is None:
        return None
    if value in ("", "none"):
        return []
    return list(every) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]


def _version() -> str:
    from . import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    # "specviz" when run as the installed console command, "python -m specviz" otherwise.
    prog = "python -m specviz" if sys.argv[0].endswith("__main__.py") else "specviz"
    ap = argparse.ArgumentParser(prog=prog, description="specviz: lossless speculative sampling")
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="run the end-to-end proof suite", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--n", type=int, default=DEFAULT_N, help=f"sequences per case (default {DEFAULT_N:,})")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (the chains are fixed per scenario)")
    p.add_argument("--scenarios", help="comma-separated, from: " + ", ".join(SCENARIOS))
    p.add_argument("--bugs", help="negative controls: comma-separated, 'all' (default) or 'none'")
    p.add_argument("--verifier", help="module:function of your own verifier, in place of the kind's own")
    p.add_argument("--kind", default="chain", help="what the verifier is: " + ", ".join(KINDS) + " (default chain)")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"test level (default {ALPHA})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per case before it is stopped and fails (default {DEFAULT_TIMEOUT:g}; 0: no limit)")
    p.add_argument("--matrix", action="store_true", help="run every bug in every scenario")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    shipped.add_arguments(p)  # --vocab, --dtype, --backend, --device, --layout, --tv, --replay, --threads
    sub.add_parser("list", help="list the verifiers (the registry), the scenarios (with the emitted tokens each "
                   "judges) and the bugs")
    return ap


def _list() -> None:
    for e in registry.VERIFIERS.values():  # the registry: what each verifier is
        ref = e.reference.partition(":")[2] if e.reference else "none"
        print(f"verifier {e.name:24s} kind={e.kind} signature={e.signature} {'lossless' if e.lossless else 'LOSSY'} "
              f"reference={ref}{' (prove --kind ' + e.kind + ' runs it)' if e.own else ''}")  # fmt: skip
        print(f"{'':33s}{e.summary}")
        if e.own:
            print(f"{'':33s}mistakes (its negative controls): {', '.join(e.mistakes)}")
    for s in SCENARIOS.values():
        print(f"scenario {s.name:19s} V={s.V} K={s.K} L={s.L}{' ragged' if s.ragged else ''}: {s.description}")
        print(f"{'':29s}judges: {s.covers}")
    for b in BUGS.values():
        where = ", ".join(HOME.get(b.name, ("reference",)))
        print(f"bug      {b.name:24s} caught by {b.caught_by} [{where}]")
        print(f"{'':33s}exact TV from the target: {home_tvs(b.name)}")
    for f in FAULTS.values():  # tested directly (tests/test_engine_bugs.py), not by prove
        print(f"fault    {f.name:24s} caught by {f.caught_by}")
        print(f"{'':33s}exact TV from the target: {fault_tv(f.name)}")


def _print_table(suite: SuiteResult, args: argparse.Namespace, elapsed: float) -> None:
    print(header())
    for r in suite.results:
        print(format_row(r))
    print()
    print(f"N = {args.n:,} sequences per case, seed {args.seed}, level {args.alpha}; {elapsed:.1f} s.")
    print("detect TV: any shift of the joint law at least this large is caught with probability >= 99%.")
    print(f"A verdict needs power: a test that cannot catch TV {MIN_TV} in the law (or {MIN_TOKENS} tokens per "
          "step) says inconclusive.")  # fmt: skip
    print("1st-tok: a test of the first token alone (informational: it misses shared_uniform).")
    if suite.exact:
        print()
        print(exact_table(suite))
    print(controls_line(suite))
    for r in suite.results:
        if r.verdict == "FAIL" and r.explanation is not None:
            print()
            print(f"FAIL {r.scenario} / {r.verifier}:")
            t = r.tokens
            for line in r.explanation.lines():
                print("  " + line)
            print(f"  tokens per step: measured {t.measured:.4f} vs exact {t.expected:.4f} (z = {t.z:+.2f}, "
                  f"{'pass' if t.passed else 'fail'})")  # fmt: skip
            print(f"  joint chi-square {r.joint.statistic:.1f} against critical value {r.joint.critical_value:.1f} "
                  f"({r.joint.dof} dof)" + (f"; {r.joint.impossible:,} impossible samples" if r.joint.impossible
                                            else ""))  # fmt: skip
        elif r.error:
            print()
            print(f"ERROR {r.scenario} / {r.verifier}: {r.error}")
            if r.traceback:
                print("  " + r.traceback.replace("\n", "\n  "))
    print()
    print(summary_line(suite))


@contextlib.contextmanager
def _stdout_to_stderr(on: bool) -> Iterator[None]:
    """While on: file descriptor 1 and ``sys.stdout`` both write to stderr (a verifier's prints,
    from Python or from C, cannot reach the JSON printed after)."""
    if not on:
        yield
        return
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (an embedded interpreter): sys.stdout alone
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        sys.stderr.flush()
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: Sequence[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command == "list":
        _list()
        return EXIT_OK
    if args.vocab is not None or args.replay:  # the verifier as an engine calls it (specviz.proof.shipped)
        return shipped.run_cli(args, load_verifier)
    try:
        if args.kind not in KINDS:
            raise InputError("--kind", "one of " + ", ".join(KINDS), repr(args.kind))
        own = registry.own_verifier(args.kind)
        verifier, vname = own.function, own.name
        if args.verifier:
            verifier, vname = load_verifier(args.verifier), args.verifier
        bugs = _csv(args.bugs, tuple(kind_controls(args.kind)))
        cases = plan(_csv(args.scenarios), bugs, matrix=args.matrix, kind=args.kind)
        if not any(c.bug is None for c in cases):
            raise InputError("--scenarios", "at least one case to run", "none selected")
        if args.n < 1:
            raise InputError("--n", "at least 1 sequence per case", str(args.n))
        if args.seed < 0:
            raise InputError("--seed", "a non-negative integer", str(args.seed))
        if not 0 < args.alpha < 1:
            raise InputError("--alpha", "a level in (0, 1)", str(args.alpha))
        if not args.timeout >= 0:
            raise InputError("--timeout", "seconds per case >= 0 (0: no limit)", str(args.timeout))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE

    t0 = time.perf_counter()

    def progress(i: int, total: int, r: CaseResult) -> None:
        if not args.quiet:
            print(f"[{i:>2}/{total}] {r.scenario} / {r.verifier}: {r.verdict} ({r.seconds:.1f} s)", file=sys.stderr)

    with _stdout_to_stderr(args.json):  # --json: nothing but the JSON on stdout, whatever the verifier writes
        suite = run_suite(cases, verifier, verifier_name=vname, n=args.n, seed=args.seed, alpha=args.alpha,
                          progress=progress, kind=args.kind, timeout=args.timeout or None)  # fmt: skip
    elapsed = time.perf_counter() - t0
    with _stdout_to_stderr(args.json):
        # The fault probes call the verifier directly: only one that came through the suite (no hang, no exit).
        probes = shipped.plain_probes(verifier) if args.kind == "chain" and not suite.failures else []
    if args.json:
        out = {"ok": suite.ok, "verdict": suite.verdict, "failures": suite.failures,
               "inconclusive": suite.inconclusive, "needed_n": suite.needed_n,
               "negative_controls": {"run": suite.controls, "note": controls_line(suite)},
               "summary": summary_line(suite), "verifier": vname, "n": args.n, "seed": args.seed,
               "alpha": args.alpha, "seconds": round(elapsed, 2), "kind": args.kind,
               "exact": [exact_record(e) for e in suite.exact],
               "cases": [to_json(r) for r in suite.results]}  # fmt: skip
        out["probes"] = shipped.probe_records(probes)
        print(json.dumps(out, indent=2, allow_nan=False))  # strict JSON: no NaN or Infinity
    else:
        _print_table(suite, args, elapsed)
        if probes:
            print("\nFault probes (single calls with chosen coins and rows; --vocab V for the rest):")
            print("\n".join("  " + line for line in shipped.probe_lines(probes)))
            if any(p.failed for p in probes):
                print("NOT OK: fault probes failed: " + ", ".join(p.name for p in probes if p.failed))
    if any(p.failed for p in probes):
        return EXIT_FAIL
    return EXIT_FAIL if suite.failures else EXIT_INCONCLUSIVE if suite.inconclusive else EXIT_OK
