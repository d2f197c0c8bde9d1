"""Headless use: ``python -m specviz prove`` and ``python -m specviz list``.

``prove`` runs the embedded suite (every scenario with the verifier under test, every bug
where it shows, as negative controls) and prints one table, or JSON with ``--json``.
``--verifier module:function`` puts your own verifier (same signature and result fields as
``specviz.verify``) through the same suite, with the bugs run beside it so the output shows
the tests fail where they should on these very scenarios (``--bugs none`` skips them, and
says so). A failing case explains itself: the cells that weigh most in chi-square, tokens per
step against the exact value, the known bug whose law fits, and the family of known mistakes
(an unprocessed q or p, a mixture with q, misaligned rows, a wrongly normalized residual) fitted
at its best parameter, or "no known family fits" (specviz.proof.families). No verdict without
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
signature, lossless or lossy, reference and mistakes), the scenarios and the bugs; ``list --tv`` adds
each bug's exact TV from the target's law (by enumeration: seconds, where the list alone takes a fraction of one).

``--budget`` (default 120s of CPU, 0 for none): without ``--n``, the verifier's first calls are timed
in every scenario and N (and the per-case time limit) cut to fit, with the smallest TV then
detectable printed (specviz.proof.budget); with ``--vocab``, the black-box tests stop at it.
``specviz power`` audits another test design (chi2, l2, per-cell): the smallest TV it detects at 90%
power, against the paired test (specviz.proof.power).

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
import re
import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .errors import InputError
from .proof import registry
from .proof.bugs import BUGS
from .proof.controls import KINDS, kind_controls
from .proof.engine_bugs import FAULTS
from .proof.scenarios import HOME, SCENARIOS

if TYPE_CHECKING:
    from .proof.report import CaseResult, SuiteResult

# The statistics (specviz.proof.stats, report, prove, ship) import SciPy: about 2 s of CPU.
# ``list`` needs none of it, so those modules are imported where ``prove`` uses them.

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3
WIDTH = 100  # columns of every line the CLI prints (tests/test_cli_ergonomics.py checks it)


def fill(text: str, indent: int | None = None) -> str:
    """``text`` wrapped to :data:`WIDTH`, line by line; a continuation is indented ``indent``
    columns (default: the line's own indent plus two). A word longer than a line stays whole."""
    out = []
    for line in text.splitlines() or [""]:
        lead = len(line) - len(line.lstrip(" "))
        more = " " * (lead + 2 if indent is None else indent)
        kept = OPERATOR.sub("\xa0\\1\xa0", line)  # "L = 3" stays on one line: textwrap breaks at ASCII spaces only
        out.append(textwrap.fill(kept, WIDTH, subsequent_indent=more, break_long_words=False,
                                 break_on_hyphens=False).replace("\xa0", " ") or line)  # fmt: skip
    return "\n".join(out)


OPERATOR = re.compile(r" (=|<|>|<=|>=|\*|\+|-) (?=\S)")  # the spaces around an operator in a formula


class PlainHelp(argparse.HelpFormatter):
    """Help as plain text within the terminal and :data:`WIDTH` columns: a docstring's RST double
    backticks dropped, its paragraphs kept apart (argparse's own formatter runs them together)."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("width", min(WIDTH, shutil.get_terminal_size().columns - 2))
        super().__init__(prog, **kwargs)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = text.replace("``", "").strip().split("\n\n")
        return "\n\n".join(textwrap.fill(" ".join(p.split()), width, initial_indent=indent, subsequent_indent=indent)
                             for p in paragraphs)  # fmt: skip


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
    from .proof.report import case_record

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


def build_parser(prove: bool = True) -> argparse.ArgumentParser:
    """The parser; ``prove=False`` leaves out prove's options (their defaults import the
    statistics), for a command line that runs ``list``."""
    # "specviz" when run as the installed console command, "python -m specviz" otherwise.
    prog = "python -m specviz" if sys.argv[0].endswith("__main__.py") else "specviz"
    ap = argparse.ArgumentParser(prog=prog, description="specviz: lossless speculative sampling",
                                 formatter_class=PlainHelp)  # fmt: skip
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prove", help="run the end-to-end proof suite", description=__doc__,
                       formatter_class=PlainHelp)  # fmt: skip
    ls = sub.add_parser("list", help="list the verifiers (the registry), the scenarios (with the emitted tokens each "
                        "judges) and the bugs", description="The verifier registry, the scenarios prove runs (with "
                        "the emitted tokens each judges), the bugs it runs as negative controls and the engine "
                        "faults tested beside them.", formatter_class=PlainHelp)  # fmt: skip
    ls.add_argument("--tv", action="store_true", help="also compute each bug's and fault's exact TV from the "
                    "target's law, by enumeration (a few seconds)")  # fmt: skip
    pw = sub.add_parser("power", help="the smallest TV another test design detects, against the paired test",
                        description=POWER_HELP, formatter_class=PlainHelp)  # fmt: skip
    pw.add_argument("--preset", help="an engine's published design (specviz.proof.power.PRESETS): vllm-chi2, vllm-l2; "
                    "with no --test either, every preset")  # fmt: skip
    pw.add_argument("--test", help="chi2 | l2 | per-cell")
    pw.add_argument("--n", type=int, help="samples of the token tested")
    pw.add_argument("--vocab", type=int, help="cells V of the token's law")
    pw.add_argument("--alpha", type=float, help="chi2: the level (default 1e-3)")
    pw.add_argument("--threshold", type=float, help="l2: the distance it fails above; per-cell: the tolerance per cell")
    pw.add_argument("--power", type=float, default=0.9, help="the detection probability (default 0.9)")
    pw.add_argument("--no-catalogue", action="store_true", help="leave out the catalogue's mistakes (their exact TVs "
                    "take a few seconds)")  # fmt: skip
    if not prove:
        return ap
    from .proof import ship
    from .proof.budget import DEFAULT_BUDGET
    from .proof.harness import DEFAULT_TIMEOUT
    from .proof.prove import DEFAULT_N
    from .proof.stats import ALPHA
    from .proof.theory import RULES

    p.add_argument("--n", type=int, help=f"sequences per case (default {DEFAULT_N:,}, or fewer to fit --budget; "
                   "with --vocab: rows of the black-box tests)")  # fmt: skip
    p.add_argument("--budget", default=f"{DEFAULT_BUDGET:g}s", help="time for the verifier under test (default "
                   f"{DEFAULT_BUDGET:g}s; 0: none): its first calls are timed, N and --timeout sized to fit, and the "
                   "smallest TV then detectable printed (specviz.proof.budget); an explicit --n is kept")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="sampling seed (the chains are fixed per scenario)")
    p.add_argument("--scenarios", help="comma-separated, from: " + ", ".join(SCENARIOS))
    p.add_argument("--bugs", help="negative controls: comma-separated, 'all' (default) or 'none'")
    p.add_argument("--verifier", help="module:function of your own verifier, in place of the kind's own")
    p.add_argument("--kind", default="chain", help="what the verifier is: " + ", ".join(KINDS) + " (default chain)")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"test level (default {ALPHA})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per case before it is stopped and fails (default {DEFAULT_TIMEOUT:g}; 0: no limit)")
    p.add_argument("--matrix", action="store_true", help="run every bug in every scenario")
    p.add_argument("--rule", help="judge tokens per step against this rule: " + "|".join(RULES) + " (default: "
                   "none; tokens per step are then efficiency, and only the law decides)")
    p.add_argument("--strict", action="store_true", help="policy warnings (invalid input accepted) fail: exit 1")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ship.add_arguments(p)  # --vocab, --dtype, --backend, --device, --layout, --tv, --replay, --threads
    return ap


POWER_HELP = """The smallest total-variation shift of one token's law that a sampled test design (chi2,
l2 or per-cell, as engines test their verifiers) detects with probability --power, whatever the
shift's shape; what specviz's paired test needs for the same TV; and which of the catalogue's
mistakes the design is sure to catch. The figures and their approximations: specviz.proof.power;
each is checked against a simulation in tests/test_power.py."""


def _power(args: argparse.Namespace) -> int:
    """``specviz power``: print the audit of a design (or of every preset), return the exit status."""
    from .proof import power

    try:
        if args.preset is None and args.test is None:
            designs = list(power.PRESETS.values())
        else:
            designs = [power.design_from(args)]
        cat = None if args.no_catalogue else power.catalogue_tvs()
        lines = [line for d in designs for line in ([*power.report(d, args.power, cat), ""])]
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print("\n".join(fill(line) for line in lines[:-1]))
    return EXIT_OK


TESTS_PATH = re.compile(r" \((?:in )?tests/[^)]*\)")  # "(tests/test_x.py)": a file of the repository, not the wheel


def _list(tv: bool = False) -> None:
    """Print the registry, the scenarios, the bugs and the faults, each line within :data:`WIDTH`;
    ``tv``: with each bug's and fault's exact TV from the target (enumeration, seconds of CPU)."""
    if tv:
        from .proof.report import fault_tv, home_tvs

    def say(head: str, *body: str) -> None:
        print(fill(head, 9))
        for b in body:
            print(fill(" " * 9 + b))

    for e in registry.VERIFIERS.values():  # the registry: what each verifier is
        ref = e.reference.partition(":")[2] if e.reference else "none"
        say(f"verifier {e.name:24s} kind={e.kind} signature={e.signature} {'lossless' if e.lossless else 'LOSSY'} "
            f"reference={ref}", e.summary,
            *([f"prove --kind {e.kind} runs it, its mistakes as negative controls: {', '.join(e.mistakes)}"]
              if e.own else []))  # fmt: skip
    for s in SCENARIOS.values():
        say(f"scenario {s.name:19s} V={s.V} K={s.K} L={s.L}{' ragged' if s.ragged else ''}: {s.description}",
            f"judges: {s.covers}")  # fmt: skip
    for b in BUGS.values():
        where = ", ".join(HOME.get(b.name, ("reference",)))
        say(f"bug      {b.name:24s} caught by {TESTS_PATH.sub('', b.caught_by)} [{where}]",
            *([f"exact TV from the target: {home_tvs(b.name)}"] if tv else []))  # fmt: skip
    print(fill("Engine faults: no sampled law shows them, so prove does not run them; direct tests in specviz's "
               "own test suite (the source repository) do."))  # fmt: skip
    for f in FAULTS.values():
        say(f"fault    {f.name:24s} caught by {TESTS_PATH.sub('', f.caught_by)}",
            *([f"exact TV from the target: {fault_tv(f.name)}"] if tv else []))  # fmt: skip
    if not tv:
        print(fill("Each bug's and fault's exact TV from the target's law: specviz list --tv (by enumeration)."))


def _print_table(suite: SuiteResult, args: argparse.Namespace, vname: str, elapsed: float) -> None:
    from .proof.report import controls_line, exact_table, format_row, header
    from .proof.stats import MIN_TOKENS, MIN_TV

    print(fill(f"verifier under test: {vname} (kind {args.kind})"))
    print(header())
    for r in suite.results:
        print(format_row(r))
    print()
    for line in (
        f"N = {args.n:,} sequences per case, seed {args.seed}, level {args.alpha}; {elapsed:.1f} s.",
        "p-value: of the chi-square test of the joint law of the scenario's L tokens (its statistic, dof and "
        "critical value are in --json). TV: from the observed law to the target's. detect: any shift of the "
        "joint law at least this large is caught with probability >= 99%. tokens: tokens per verification "
        "step, measured; exact: its exact value.",
        f"A verdict needs power: a test that cannot catch TV {MIN_TV} in the law (or {MIN_TOKENS} tokens per "
        "step) says inconclusive.",
        "1st-tok: a test of the first token alone (informational: it misses shared_uniform).",
    ):
        print(fill(line))
    if suite.exact:
        print()
        print(fill(exact_table(suite)))
    print(fill(controls_line(suite)))
    for r in suite.results:
        if r.verdict == "FAIL" and r.explanation is not None:
            print()
            print(fill(f"FAIL {r.scenario} / {r.verifier}:"))
            t = r.tokens
            for line in r.explanation.lines():
                print(fill("  " + line))
            print(fill(f"  tokens per step: measured {t.measured:.4f} vs exact {t.expected:.4f} (z = {t.z:+.2f}, "
                       f"{'pass' if t.passed else 'fail'})"))  # fmt: skip
            print(fill(f"  joint chi-square {r.joint.statistic:.1f} against critical value "
                       f"{r.joint.critical_value:.1f} ({r.joint.dof} dof)"
                       + (f"; {r.joint.impossible:,} impossible samples" if r.joint.impossible else "")))  # fmt: skip
        elif r.error:
            print()
            print(fill(f"ERROR {r.scenario} / {r.verifier}: {r.error}"))
            if r.traceback:  # as Python wrote it: a wrapped traceback would misquote the code
                print("  " + r.traceback.replace("\n", "\n  "))


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


# The flag of each argument name the proof modules' InputErrors use.
FLAGS = {"scenario": "--scenarios", "scenarios": "--scenarios", "bugs": "--bugs", "n": "--n", "seed": "--seed",
         "kind": "--kind", "verifier": "--verifier"}  # fmt: skip


def _plan(args: argparse.Namespace) -> list[Any]:
    """The cases of prove's command line (:func:`specviz.proof.prove.plan`), its errors naming the flag."""
    from .proof.prove import plan

    try:
        cases = plan(_csv(args.scenarios), _csv(args.bugs, tuple(kind_controls(args.kind))), matrix=args.matrix,
                     kind=args.kind)  # fmt: skip
    except InputError as e:
        raise InputError(FLAGS.get(e.argument, e.argument), e.expected, e.got) from e
    if not any(c.bug is None for c in cases):
        raise InputError("--scenarios", "at least one case to run", "none selected")
    return cases


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(prove=argv[:1] != ["list"]).parse_args(argv)
    if args.command == "list":
        _list(tv=args.tv)
        return EXIT_OK
    if args.command == "power":
        return _power(args)
    from .proof import probes as fault_probes
    from .proof import reach, ship
    from .proof import verdicts as V
    from .proof.budget import parse_budget, size_to_budget
    from .proof.prove import DEFAULT_N, run_suite
    from .proof.report import controls_line, exact_record, summary_line

    try:  # the checks that cost nothing first (both paths), then the verifier's import and the plan
        if args.n is not None and args.n < 1:
            raise InputError("--n", "at least 1 sequence per case", str(args.n))
        if args.seed < 0:
            raise InputError("--seed", "a non-negative integer", str(args.seed))
        if not 0 < args.alpha < 1:
            raise InputError("--alpha", "a level in (0, 1)", str(args.alpha))
        if not args.timeout >= 0:
            raise InputError("--timeout", "seconds per case >= 0 (0: no limit)", str(args.timeout))
        if not 0 < args.tv < 1:
            raise InputError("--tv", "a TV bound in (0, 1)", str(args.tv))
        if args.rule is not None and args.rule not in ("residual", "sample-match"):
            raise InputError("--rule", "residual or sample-match", repr(args.rule))
        if args.rule is not None and args.kind != "chain":
            raise InputError("--rule", "no rule with --kind block or tree (each is judged by its own rule)",
                             repr(args.rule))  # fmt: skip
        if args.threads is not None and args.threads < 0:
            raise InputError("--threads", "a thread count >= 0", str(args.threads))
        budget_s = parse_budget(args.budget)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.vocab is not None or args.replay or args.model:  # the verifier as an engine calls it (proof.ship)
        return ship.run_cli(args, load_verifier)
    try:
        if args.kind not in KINDS:
            raise InputError("--kind", "one of " + ", ".join(KINDS), repr(args.kind))
        cases = _plan(args)
        own = registry.own_verifier(args.kind)
        verifier, vname = own.function, own.name
        if args.verifier:
            verifier, vname = load_verifier(args.verifier), args.verifier
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE

    if "torch" in sys.modules:  # a torch verifier: one thread unless --threads says otherwise, and say so
        note = ship.set_torch_threads(args.threads)
        if not args.quiet:
            print(note, file=sys.stderr)
    budget = None
    if args.n is None:  # no --n: the default N, cut to fit the budget (specviz.proof.budget)
        args.n = DEFAULT_N
        if budget_s > 0:
            with _stdout_to_stderr(args.json):
                budget = size_to_budget(verifier, [c.scenario for c in cases if c.bug is None], budget=budget_s,
                                        n_max=DEFAULT_N, kind=args.kind, seed=args.seed, alpha=args.alpha,
                                        timeout=args.timeout)  # fmt: skip
            args.n, args.timeout = budget.n, budget.timeout or 0.0
            if not args.quiet:
                print("\n".join(budget.lines()), file=sys.stderr)
    t0 = time.perf_counter()

    def progress(i: int, total: int, r: CaseResult) -> None:
        if not args.quiet:
            print(f"[{i:>2}/{total}] {r.scenario} / {r.verifier}: {r.verdict} ({r.seconds:.1f} s)", file=sys.stderr)

    with _stdout_to_stderr(args.json):  # --json: nothing but the JSON on stdout, whatever the verifier writes
        suite = run_suite(cases, verifier, verifier_name=vname, n=args.n, seed=args.seed, alpha=args.alpha,
                          progress=progress, kind=args.kind, timeout=args.timeout or None, rule=args.rule)  # fmt: skip
    elapsed = time.perf_counter() - t0
    errored = any(r.error for r in suite.results if not r.is_bug)
    with _stdout_to_stderr(args.json):
        # The fault probes call the verifier directly: only one that came through the suite (no hang, no exit).
        # Verifiers drawing their own randomness are probed through interception (specviz.proof.reach).
        probes = reach.run_all(verifier) if args.kind == "chain" and not errored else []
    why = "the verifier raised in the suite" if errored else f"--kind {args.kind} has no probes" if not probes else ""
    if any(p.verdict == "skipped" for p in probes):
        why = "; ".join(p.detail.split(" (")[0] for p in probes if p.verdict == "skipped")
    verdicts = [V.law_verdict(suite, probes), V.support_verdict(probes, why),
                V.policy_verdict(probes, strict=args.strict, why_not=why)]  # fmt: skip
    if args.json:
        out = {"ok": suite.ok, "verdict": suite.verdict, "failures": suite.failures,
               "inconclusive": suite.inconclusive, "needed_n": suite.needed_n,
               "negative_controls": {"run": suite.controls, "note": controls_line(suite)},
               "summary": summary_line(suite), "verifier": vname, "n": args.n, "seed": args.seed,
               "alpha": args.alpha, "seconds": round(elapsed, 2), "kind": args.kind,
               "exact": [exact_record(e) for e in suite.exact],
               "cases": [to_json(r) for r in suite.results]}  # fmt: skip
        out["probes"] = fault_probes.probe_records(probes)
        out["budget"] = budget.record() if budget is not None else None
        out["verdicts"] = {v.kind: {"status": v.status, "line": v.line(), "details": list(v.details)}
                           for v in verdicts}  # fmt: skip
        out["verdict_summary"], out["efficiency"] = V.summary(verdicts), V.efficiency_line(suite)
        out["exit_status"] = V.exit_status(verdicts)  # "ok" and "verdict" above are the suite's (the law's cases)
        print(json.dumps(out, indent=2, allow_nan=False))  # strict JSON: no NaN or Infinity
    else:
        if budget is not None:
            print(fill("\n".join(budget.lines())))
        _print_table(suite, args, vname, elapsed)
        if probes:
            print("\nFault probes (single calls with chosen coins and rows; --vocab V for the rest):")
            print("\n".join("  " + line for line in fault_probes.probe_lines(probes)))
        print()
        for v in verdicts:
            print("\n".join(fill(line) for line in v.lines()))
        if V.efficiency_line(suite):
            print(fill(V.efficiency_line(suite)))
        print(fill(V.summary(verdicts)))
    return V.exit_status(verdicts)
