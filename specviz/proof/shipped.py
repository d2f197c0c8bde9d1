"""``prove --vocab``: a verifier judged the way an engine calls it. The same in Python: :func:`prove_shipped`.

# B rows, K drafts (padded width), V vocabulary

Three steps, each printed with what it covers:

1. the fault probes (:mod:`specviz.proof.probes`) in the asked dtype, backend and layout;
2. the paired test against the reference on realistic rows at vocabulary V
   (:mod:`specviz.proof.ship`): no mismatch in n rows certifies TV <= -ln(0.05)/n at 95%;
3. where rows mismatch, the sweep over the uniforms (:mod:`specviz.proof.sweep`) decides
   whether the verifier reads its uniforms another valid way (its law is the target's at
   every step swept) or its law is wrong; a wrong law is compared with the families of known
   mistakes at those steps (:func:`specviz.proof.families.diagnose_sweep`).

Example (runs in a few seconds)::

    from specviz import verify
    from specviz.proof.ship import CallSpec
    from specviz.proof.shipped import prove_shipped

    report = prove_shipped(verify, V=1000, K=4, spec=CallSpec("float32", "numpy"), tv=0.01)
    assert report.verdict == "PASS"
    print("\\n".join(report.lines()))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .blackbox import BlackBox, blackbox_tests
from .families import SweepDiagnosis, diagnose_sweep
from .probes import Probe, probe_lines, run_probes
from .ship import CallSpec, Paired, paired_test
from .sweep import Sweep, sweep

DEFAULT_SPEC = CallSpec()
STOP_AFTER = 5  # mismatches before the paired test hands the question to the sweep (and reproducers saved)


class Shipped(NamedTuple):
    verdict: str  # "PASS" | "PASS (law)" | "FAIL" | "INCONCLUSIVE"
    reason: str
    probes: list[Probe]
    paired: Paired | None
    sweep: Sweep | None
    threads: str  # what prove did with torch's threads
    blackbox: BlackBox | None = None  # the sampled tests, for a verifier without uniforms=
    diagnosis: SweepDiagnosis | None = None  # the families of known mistakes fitted to a failing sweep

    def lines(self) -> list[str]:
        out = [self.threads, "", "fault probes:"] + ["  " + s for s in probe_lines(self.probes)]
        if self.paired is not None:
            out += [""] + self.paired.lines()
        if self.sweep is not None:
            out += [""] + self.sweep.lines()
        if self.diagnosis is not None:
            out += [""] + self.diagnosis.lines()
        if self.blackbox is not None:
            out += [""] + self.blackbox.lines()
        return [*out, "", f"{self.verdict}: {self.reason}"]


def set_torch_threads(threads: int | None) -> str:
    """Run torch at ``threads`` threads (default 1: on a shared machine torch's default, one per
    core, cost 121 s of wall time against 16 s at one), and say so."""
    try:
        import torch
    except ImportError:
        return "torch not installed"
    n = 1 if threads is None else threads
    if n > 0:
        torch.set_num_threads(n)
    return f"torch threads: {torch.get_num_threads()}" + (" (--threads to change)" if threads is None else "")


def prove_shipped(
    verifier: Callable[..., Any],
    *,
    V: int,
    K: int = 4,
    spec: CallSpec = DEFAULT_SPEC,
    tv: float = 1e-3,
    seed: int = 0,
    reproducers: str | None = None,
    flat: Callable[..., Any] | None = None,
    sweep_rows: int = 2,
    threads: int | None = None,
    blackbox_rows: int = 20_000,
    progress: Callable[[str], None] | None = None,
) -> Shipped:
    """Probe ``verifier``, pair it with the reference at vocabulary ``V``, sweep where they differ.

    ``verifier`` has :func:`specviz.verify`'s signature (``spec.layout`` flat: that of
    :func:`specviz.verify_flat`) and takes ``uniforms=``; ``flat`` is its flat-layout twin, if
    any (the padded-vs-flat probe). ``tv``: the bound the paired test certifies with no
    mismatch (it runs -ln(0.05)/tv rows). ``reproducers``: a folder for mismatching rows.
    ``threads``: torch's thread count (default 1). A verifier without ``uniforms=`` gets the
    black-box tests instead (:mod:`specviz.proof.blackbox`, ``blackbox_rows`` rows on one context).
    Returns :class:`Shipped`.
    """
    note = set_torch_threads(threads)
    probes = run_probes(verifier, spec, flat=flat, seed=seed)
    if any(p.verdict == "skipped" for p in probes):  # rng only: the law is sampled, token by token
        box = blackbox_tests(verifier, V=V, K=min(K, 2), spec=spec, n=blackbox_rows, seed=seed, progress=progress)
        where = [c.part for c in box.failed]
        if where:
            verdict, reason = "FAIL", "the law breaks at: " + ", ".join(where)
        elif all(c.conclusive for c in box.checks if c.part in ("first token", "acceptance")):
            weak = [c.part for c in box.checks if not c.conclusive]
            verdict, reason = "PASS", (f"every token law tested passed at V = {V:,}"
                                       + (f" (inconclusive: {', '.join(weak)})" if weak else "")
                                       + "; no uniforms=, so no paired test, sweep or probes")  # fmt: skip
        else:
            verdict, reason = "INCONCLUSIVE", "the first-token or acceptance test lacks power: more rows (--n)"
        return Shipped(verdict, reason, probes, None, None, note, box)
    paired = paired_test(verifier, V=V, K=K, spec=spec, tv=tv, seed=seed, reproducers=reproducers,
                         stop_after=STOP_AFTER, progress=progress)  # fmt: skip
    failed = [p.name for p in probes if p.failed]
    swept = None
    if paired.error is None and paired.mismatches:
        swept = sweep(verifier, V=V, spec=spec, rows=sweep_rows, seed=seed, progress=progress)
    if paired.error is not None:
        verdict, reason = "FAIL", f"the verifier raised on realistic rows: {paired.error}"
    elif swept is not None and not swept.passed:
        bad = [f"row {s.row} {s.part}" for s in swept.steps if not s.passed]
        verdict, reason = "FAIL", f"the law is wrong at {', '.join(bad)} (TV beyond the sweep's resolution)"
    elif failed:
        verdict, reason = "FAIL", "fault probes failed: " + ", ".join(failed)
        if "batch_invariance" in failed:
            reason += " (a row's tokens depend on other rows, as with misaligned rows: q of row b + 1 for row b)"
    elif swept is not None:
        verdict, reason = "PASS (law)", (f"{paired.mismatches} rows differ from the reference, but the law is the "
                                         "target's at every step swept: another valid uniform convention "
                                         "(no TV certificate from the paired test)")  # fmt: skip
    else:
        verdict, reason = "PASS", (f"TV(verifier, target) <= {paired.tv_bound:.3g} at 95% on {paired.rows:,} "
                                   "realistic rows; every probe passed")  # fmt: skip
    diagnosis = diagnose_sweep(swept) if swept is not None and not swept.passed else None
    return Shipped(verdict, reason, probes, paired, swept, note, diagnosis=diagnosis)


# --- the command line: ``prove --vocab`` and the probes of a plain ``prove`` (specviz/cli.py calls these)


def add_arguments(p: Any) -> None:
    """The ``prove`` flags of this module, on an argparse parser."""
    from .ship import BACKENDS, DEVICES, DTYPES, LAYOUTS

    p.add_argument("--vocab", type=int, help="judge the verifier at this vocabulary as an engine calls it: "
                   "fault probes, the paired test against the reference, the sweep over the uniforms")
    p.add_argument("--drafts", type=int, default=4, help="with --vocab: drafts per row at most, K (default 4)")
    p.add_argument("--dtype", default="float32", help="with --vocab: " + "|".join(DTYPES) + " (default float32)")
    p.add_argument("--backend", default="torch", help="with --vocab: " + "|".join(BACKENDS) + " (default torch)")
    p.add_argument("--device", default="cpu", help="with --vocab: " + "|".join(DEVICES) + " (default cpu)")
    p.add_argument("--layout", default="padded", help="with --vocab: " + "|".join(LAYOUTS) + " (default padded)")
    p.add_argument("--tv", type=float, default=1e-3, help="with --vocab: the TV bound to certify (default 1e-3)")
    p.add_argument("--reproducers", default="specviz-reproducers",
                   help="with --vocab: folder for the .npz of each mismatching row")
    p.add_argument("--replay", help="run one saved .npz reproducer through --verifier and the reference")
    p.add_argument("--threads", type=int, help="torch threads (default 1, said in the output)")


def run_cli(args: Any, load: Callable[[str], Callable[..., Any]]) -> int:
    """``prove --vocab`` or ``prove --replay``: print the report, return the exit status (0, 1 or 2)."""
    import sys
    import textwrap

    from ..errors import InputError
    from .ship import cuda_available, replay

    try:
        spec = CallSpec(args.dtype, args.backend, args.device, args.layout)
        if args.verifier:
            verifier = load(args.verifier)
        else:
            from ..verifiers.verify import verify, verify_flat

            verifier = verify_flat if spec.layout == "flat" else verify
        if args.replay:
            note = set_torch_threads(args.threads)
            r = replay(args.replay, verifier)
            print(note)
            print(f"replay {r.path}: reference {r.reference.tolist()} (saved {r.expected.tolist()}), "
                  f"verifier {r.got.tolist()}")  # fmt: skip
            print("reproduced: the verifier still differs" if r.reproduced else "not reproduced: they agree now")
            return 1 if r.reproduced else 0
        if args.vocab < 2:
            raise InputError("--vocab", "a vocabulary of at least 2 tokens", str(args.vocab))
        if not 1 <= args.drafts <= 8:
            raise InputError("--drafts", "K in [1, 8]", str(args.drafts))
        if spec.device == "cuda" and not cuda_available():
            print("SKIPPED: --device cuda asked, and no CUDA device is present here")
            return 0
        from ..verifiers.verify import verify_flat

        engine = getattr(verifier, "__module__", "").endswith("verifiers.verify")
        flat = verify_flat if engine and spec.layout == "padded" else None  # the padded-vs-flat probe

        def progress(msg: str) -> None:
            if not args.quiet:
                print(msg, file=sys.stderr)

        import contextlib

        # --json: nothing but the JSON on stdout (a verifier's own prints go to stderr with the progress)
        with contextlib.redirect_stdout(sys.stderr) if getattr(args, "json", False) else contextlib.nullcontext():
            report = prove_shipped(verifier, V=args.vocab, K=args.drafts, spec=spec, tv=args.tv, seed=args.seed,
                                   reproducers=args.reproducers, flat=flat, threads=args.threads,
                                   blackbox_rows=args.n, progress=progress)  # fmt: skip
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    status = 0 if report.verdict.startswith("PASS") else 3 if report.verdict == "INCONCLUSIVE" else 1
    if getattr(args, "json", False):
        import json

        print(json.dumps(record(report), indent=2, allow_nan=False, default=plain_json))
        return status
    for line in report.lines():
        print("\n".join(textwrap.wrap(line, 99, subsequent_indent="  ")) if len(line) > 99 else line)
    if report.paired is not None and report.paired.reproducers:
        print("replay one:")
        print(f"  python -m specviz prove --verifier {args.verifier or 'specviz:verify'} --replay "
              f"{report.paired.reproducers[0]}")  # fmt: skip
    return status


def plain_json(x: Any) -> Any:
    """NumPy scalars as Python's (a probe's or step's fields may be NumPy's)."""
    if hasattr(x, "item"):
        return x.item()
    raise TypeError(f"{type(x).__name__} in the JSON record")


def _finite(x: float) -> float | None:
    return float(x) if x == x and abs(x) != float("inf") else None


def record(report: Shipped) -> dict[str, Any]:
    """``prove --vocab --json``: the report as strict JSON (what :meth:`Shipped.lines` prints, as fields)."""
    out: dict[str, Any] = {"verdict": report.verdict, "reason": report.reason, "threads": report.threads,
                           "probes": probe_records(report.probes), "paired": None, "sweep": None}  # fmt: skip
    pt = report.paired
    if pt is not None:
        out["paired"] = {"oracle": pt.oracle, "V": int(pt.V), "K": int(pt.K), "call": pt.spec.describe(),
                         "rows": int(pt.rows), "drafts": int(pt.drafts), "mismatches": int(pt.mismatches),
                         "bound": _finite(pt.bound), "reference_tv": float(pt.reference_tv),
                         "tv_bound": _finite(pt.tv_bound),
                         "seconds": pt.seconds, "reproducers": list(pt.reproducers), "error": pt.error}  # fmt: skip
    sw = report.sweep
    if sw is not None:
        out["sweep"] = {"passed": bool(sw.passed), "seconds": sw.seconds, "calls": int(sw.calls),
                        "steps": [{"row": int(s.row), "part": s.part, "tv": _finite(s.tv),
                                   "resolution": float(s.resolution), "passed": bool(s.passed), "detail": s.detail}
                                  for s in sw.steps]}  # fmt: skip
    if report.diagnosis is not None:
        out["diagnosis"] = report.diagnosis.lines()
    if report.blackbox is not None:
        out["blackbox"] = report.blackbox.lines()
    return out


def plain_probes(verifier: Callable[..., Any]) -> list[Probe]:
    """The probes a plain ``prove`` runs beside its suite (float64 NumPy, as the suite calls)."""
    return run_probes(verifier)


def probe_records(probes: list[Probe]) -> list[dict[str, str]]:
    return [{"name": p.name, "verdict": p.verdict, "detail": p.detail} for p in probes]
