"""``prove --vocab``: a verifier judged the way an engine calls it. The same in Python: :func:`prove_shipped`.

# B rows, K drafts (padded width), V vocabulary

``prove`` alone calls a verifier with float64 NumPy tables at V = 4; the mistakes that live in
engines (q rounded to bfloat16 in the ratio, a float32 residual) move the law by 1e-3 in TV or
less, and sampling at V = 4 never sees them. Three steps, each printed with what it covers, on
realistic rows handed over as an engine does (:mod:`specviz.proof.handover`):

1. the fault probes (:mod:`specviz.proof.probes`) in the asked dtype, backend and layout;
2. **the paired test** (:func:`paired_test`). The verifier and the reference run on the same
   inputs with the same explicit uniforms. Given the uniforms each is a function, so the pair
   (verifier's row, reference's row) is a coupling of their two laws, and the coupling
   inequality bounds the distance between the laws by the chance that the coupled rows differ:
   TV(verifier, reference) <= P(mismatch). With m mismatches in n independent rows the one-sided
   95% upper bound on P(mismatch) is Clopper-Pearson's; with m = 0 it is 1 - 0.05^(1/n) <=
   -ln(0.05)/n ~ 3/n, which we report. The reference's own distance from the target is at most
   V / GRID (its draw floors each weight to a multiple of 2^-48), so
   TV(verifier, target) <= bound + V * 2^-48. The bound covers the laws of whole rows (accepted
   drafts, replacement or bonus) on the tables exercised, averaged over their rows; it says
   nothing about distributions the test did not generate. Every mismatch is saved as a
   reproducer: an .npz with that one row's inputs and uniforms, replayed by :func:`replay` or
   ``python -m specviz prove --verifier M:F --replay FILE``;
3. where rows mismatch, the sweep over the uniforms (:mod:`specviz.proof.sweep`) decides
   whether the verifier reads its uniforms another valid way (its law is the target's at
   every step swept) or its law is wrong; a wrong law is compared with the families of known
   mistakes at those steps (:func:`specviz.proof.families.diagnose_sweep`).

Example (runs in a few seconds)::

    from specviz import verify
    from specviz.proof.handover import CallSpec
    from specviz.proof.ship import prove_shipped

    report = prove_shipped(verify, V=1000, K=4, spec=CallSpec("float32", "numpy"), tv=0.01)
    assert report.verdict == "PASS"
    print("\\n".join(report.lines()))
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..errors import InputError
from ..verifiers.reference import GRID  # each weight floored to 1 / GRID: TV(reference, target) <= V / GRID
from .blackbox import BlackBox, blackbox_tests
from .families import SweepDiagnosis, diagnose_sweep
from .handover import (
    BACKENDS,
    DEFAULT_SPEC,
    DEVICES,
    DTYPES,
    LAYOUTS,
    ORACLE,
    SYNTHETIC,
    CallSpec,
    Handover,
    Round,
    Tables,
    TableSource,
    _round_to,
    cuda_available,
    draw_round,
    outcome,
    tables_at,
)
from .harness import VerifierRaised
from .probes import Probe, probe_lines, probe_records
from .reach import draws_own, matched_supply, run_all
from .report import clean
from .sweep import Sweep, sweep
from .verdicts import Verdict, exit_status, policy_verdict, summary, support_verdict

CONFIDENCE = 0.95  # the certified bound's one-sided level
MAX_REPRODUCERS = 5  # mismatching rows saved per run (each .npz holds a row's (2K+1, V) tables)
STOP_AFTER = 5  # mismatches before the paired test hands the question to the sweep (and reproducers saved)


# --- the paired test ---------------------------------------------------------------------------------


def certified_bound(mismatches: int, rows: int) -> float:
    """One-sided upper confidence bound on P(mismatch) from ``mismatches`` in ``rows``.

    0 mismatches: -ln(1 - CONFIDENCE) / rows (3.0 / rows at 95%; the exact 1 - 0.05^(1/n) is
    a little smaller). Otherwise Clopper-Pearson's bound.
    """
    if rows <= 0:
        return 1.0
    if mismatches == 0:
        return min(1.0, -math.log(1.0 - CONFIDENCE) / rows)
    if mismatches >= rows:
        return 1.0
    from scipy import stats

    return float(stats.beta.ppf(CONFIDENCE, mismatches + 1, rows - mismatches))


def rows_for(tv: float) -> int:
    """Rows without a mismatch that certify TV <= ``tv``."""
    return math.ceil(-math.log(1.0 - CONFIDENCE) / tv)


class Paired(NamedTuple):
    """What the paired test saw and certified."""

    rows: int  # batch rows compared
    drafts: int  # drafts tested among them
    mismatches: int  # rows whose tokens or counts differ from the reference's
    bound: float  # CONFIDENCE upper bound on P(mismatch) >= TV(verifier, reference)
    reference_tv: float  # V * 2^-48 >= TV(reference, target)
    V: int
    K: int
    spec: CallSpec
    oracle: str
    seconds: float
    reproducers: tuple[str, ...]
    error: str | None  # the verifier raised, or returned a malformed result
    rows_from: str = SYNTHETIC  # where the tables came from

    @property
    def tv_bound(self) -> float:
        """Certified bound on TV(verifier, target): the pair's bound plus the reference's own distance."""
        return self.bound + self.reference_tv

    @property
    def passed(self) -> bool:
        return self.error is None and self.mismatches == 0

    def lines(self) -> list[str]:
        """The result in words, each line under 100 columns."""
        head = [f"paired test vs {self.oracle}", f"  at V = {self.V:,}, K <= {self.K}, {self.spec.describe()}:"]
        if self.error:
            return [*head, f"  ERROR after {self.rows:,} rows: {self.error}"[:99]]
        head.append(f"  on {self.rows_from}"[:99])
        out = [*head, f"  {self.rows:,} rows ({self.drafts:,} drafts), {self.mismatches:,} mismatching rows, "
                     f"{self.seconds:.1f} s"]  # fmt: skip
        if self.mismatches == 0:
            out.append(f"  certified: TV(verifier, reference) <= {self.bound:.3g} (-ln(0.05)/n, {CONFIDENCE:.0%})")
            out.append(f"  so TV(verifier, target) <= {self.tv_bound:.3g}")
        else:
            out.append(f"  mismatch rate {self.mismatches / self.rows:.3g}: TV(verifier, reference) <= "
                       f"{self.bound:.3g} ({CONFIDENCE:.0%}); a mismatch is not yet a wrong law")  # fmt: skip
        out.append(f"  reference's own distance from the target <= V * 2^-48 = {self.reference_tv:.2g}")
        out.append("  covers: the law of whole rows (drafts kept, replacement or bonus) on the generated")
        out.append("  contexts, averaged over their rows; not distributions this test did not generate")
        for path in self.reproducers:
            out.append(f"  reproducer: {path}")
        return out


def _save_reproducer(folder: str, index: int, t: Tables, r: Round, b: int, spec: CallSpec,
                     expected: np.ndarray, got: np.ndarray) -> str:  # fmt: skip
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"mismatch_{index:03d}.npz")
    np.savez_compressed(
        path, target=t.target[b : b + 1].astype(np.float32 if spec.dtype != "float64" else np.float64),
        draft=t.draft[b : b + 1].astype(np.float32 if spec.dtype != "float64" else np.float64),
        draft_tokens=r.draft_tokens[b : b + 1], num_draft=t.num_draft[b : b + 1], accept=r.accept[b : b + 1],
        sample=r.sample[b : b + 1], expected=expected, got=got, dtype=spec.dtype, backend=spec.backend,
        device=spec.device, layout=spec.layout,
    )  # fmt: skip
    return path


def paired_test(
    verifier: Callable[..., Any],
    *,
    V: int,
    K: int = 4,
    spec: CallSpec = DEFAULT_SPEC,
    tv: float = 1e-3,
    rows: int | None = None,
    seed: int = 0,
    reproducers: str | None = None,
    stop_after: int = 1000,
    progress: Callable[[str], None] | None = None,
    source: TableSource | None = None,
) -> Paired:
    """Run ``verifier`` and the reference on the same realistic inputs and uniforms; certify TV.

    ``verifier`` is called as an engine calls it, ``verifier(target, draft, draft_tokens,
    counts, uniforms=(accept, sample))`` in the form ``spec`` asks: padded, counts is
    num_draft (B,) and accept (B, K), the signature of :func:`specviz.verify`; flat, counts is
    the indptr (B+1,) and accept (N,), that of :func:`specviz.verify_flat`. Its result needs
    ``tokens`` (B, K+1) and ``num_tokens`` (B,) (padded output in both layouts).

    It runs until ``rows`` rows are compared (default: enough to certify ``tv`` with no
    mismatch, :func:`rows_for`), or ``stop_after`` mismatches. A fresh table of contexts is
    drawn every ``rounds_per_table`` calls; each call draws new drafts and uniforms.
    Mismatching rows are saved under ``reproducers`` (a folder; the first
    :data:`MAX_REPRODUCERS`). ``source``: where the tables come from (default: realistic rows at
    V; :mod:`specviz.proof.model_rows` for a real model's). Returns :class:`Paired`.
    """
    if spec.device == "cuda" and not cuda_available():
        raise InputError("--device", "cuda with a CUDA device present", "no CUDA device")
    if not 0 < tv < 1:
        raise InputError("tv", "a bound in (0, 1)", repr(tv))
    want = rows_for(tv) if rows is None else int(rows)
    B = 32 if V > 32768 else 64 if V > 4096 else 256
    rng = np.random.default_rng([seed, 18])
    saved: list[str] = []  # the reproducers' paths
    t0, done, drafts, bad, calls = time.perf_counter(), 0, 0, 0, 0
    last_note = t0
    error = None
    rounds_per_table = max(1, math.ceil(want / B / 4))  # four tables of contexts per run
    make = tables_at(V, source)
    while done < want and bad < stop_after and error is None:
        t = make(K, B, seed=int(rng.integers(1 << 62)), dtype=spec.dtype)
        hand = Handover(t, spec)
        for _ in range(rounds_per_table):
            if done >= want or bad >= stop_after:
                break
            r = draw_round(rng, t)
            expected = hand.reference(r)
            c = hand.call(r)
            try:
                got, _ = outcome(verifier(*c.args, uniforms=c.uniforms), B, K)
            except Exception as e:  # the verifier's own failure is the finding
                error = f"{type(e).__name__}: {e}"
                break
            calls += 1
            diff = np.flatnonzero((got != expected).any(axis=1))
            for b in diff:
                if reproducers and len(saved) < MAX_REPRODUCERS:
                    saved.append(_save_reproducer(reproducers, len(saved), t, r, int(b), spec, expected[b], got[b]))
            bad += int(diff.size)
            done += B
            drafts += int(t.num_draft.sum())
            now = time.perf_counter()
            if progress is not None and now - last_note > 5:
                last_note = now
                left = (now - t0) / done * (want - done)
                progress(f"paired test: {done:,} of {want:,} rows, {bad:,} mismatches, about {left:.0f} s left")
    return Paired(rows=done, drafts=drafts, mismatches=bad, bound=certified_bound(bad, done), reference_tv=V / GRID,
                  V=V, K=K, spec=spec, oracle=ORACLE, seconds=time.perf_counter() - t0, reproducers=tuple(saved),
                  error=error, rows_from=getattr(source, "description", SYNTHETIC))  # fmt: skip


class Replay(NamedTuple):
    path: str
    expected: np.ndarray  # (K+1,) the reference's tokens when the file was saved
    reference: np.ndarray  # (K+1,) the reference's tokens now
    got: np.ndarray  # (K+1,) the verifier's tokens now

    @property
    def reproduced(self) -> bool:
        """The verifier still differs from the reference on this row."""
        return bool((self.got != self.reference).any())


def replay(path: str, verifier: Callable[..., Any]) -> Replay:
    """Run one saved mismatching row through ``verifier`` and the reference again."""
    try:
        f = np.load(path)
    except (OSError, ValueError) as e:
        raise InputError("--replay", "an .npz reproducer saved by the paired test", f"{type(e).__name__}: {e}") from e
    with f:
        spec = CallSpec(str(f["dtype"]), str(f["backend"]), str(f["device"]), str(f["layout"]))
        target = _round_to(f["target"].astype(np.float64), spec.dtype)
        draft = _round_to(f["draft"].astype(np.float64), spec.dtype)
        t = Tables(target, draft, f["num_draft"], np.cumsum(draft, axis=-1))
        r = Round(f["draft_tokens"], f["accept"], f["sample"])
        expected = f["expected"]
    K = t.draft.shape[1]
    hand = Handover(t, spec)
    ref = hand.reference(r)
    c = hand.call(r)
    got, _ = outcome(verifier(*c.args, uniforms=c.uniforms), 1, K)
    return Replay(path, expected, ref[0], got[0])


# --- the verdict: probes, paired test, sweep ------------------------------------------------


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

    def verdicts(self, strict: bool = False) -> list[Verdict]:
        """The three verdicts (:mod:`specviz.proof.verdicts`): law, support, policy."""
        why = "; ".join(p.detail.split(" (")[0] for p in self.probes if p.verdict == "skipped")
        support = support_verdict(self.probes, why)
        seen = [c for c in (self.blackbox.checks if self.blackbox else []) if c.law and c.impossible]
        if seen and support.status != "FAIL":  # sampled: the verifier's own draws emitted tokens with p = 0
            c = seen[0]
            support = Verdict("support", "FAIL", f"{c.impossible:,} of {c.n:,} sampled rows emit a token with p = 0 "
                              f"at the {c.part} (rate {c.impossible / max(c.n, 1):.2g} per row)",
                              tuple(f"{d.part}: {d.impossible:,} of {d.n:,}" for d in seen[1:]))  # fmt: skip
        return [self.law_verdict(), support, policy_verdict(self.probes, strict=strict, why_not=why)]

    def law_verdict(self) -> Verdict:
        """The law from the paired test, the sweep, the black-box output laws and the law probes."""
        pt, sw, box = self.paired, self.sweep, self.blackbox
        bad = [f"probe {p.name}: {p.detail}" for p in self.probes if p.kind == "law" and p.failed]
        if pt is not None and pt.error is not None:
            return Verdict("law", "ERROR", f"the verifier raised on realistic rows: {pt.error}")
        if sw is not None and not sw.passed:
            steps = ", ".join(f"row {s.row} {s.part}" for s in sw.steps if not s.passed)
            cause = f" ({self.diagnosis.lines()[0]})" if self.diagnosis is not None and self.diagnosis.lines() else ""
            bad.insert(0, f"wrong at {steps} at V = {pt.V if pt else '?':,}{cause}")
        if box is not None and box.failed:
            laws = all(c.law for c in box.failed)
            held = "" if laws or any(c.law for c in box.failed) else "; every output law tested holds"
            bad.insert(0, f"the {'output law' if laws else f'{box.rule} rule'} breaks at: "
                       + ", ".join(c.part for c in box.failed) + f" at V = {box.V:,}{held}")  # fmt: skip
        if bad:
            return Verdict("law", "FAIL", bad[0], tuple(bad[1:]))
        if box is not None:
            weak = [c.part for c in box.checks if c.law and not c.conclusive]
            if "first token" in weak:
                return Verdict("law", "inconclusive", "the first-token test lacks power: more rows (--n)")
            return Verdict("law", "OK", f"every output law tested passes at V = {box.V:,}"
                           + (f", inconclusive: {', '.join(weak)}" if weak else ""),
                           (f"lossless as far as tested; {box.efficiency()}",))  # fmt: skip
        if pt is not None and pt.mismatches == 0:
            return Verdict("law", "OK", f"TV <= {pt.tv_bound:.2g} certified at V = {pt.V:,}")
        return Verdict("law", "OK", f"the target's law at every step swept at V = {pt.V if pt else '?':,} (another "
                       "valid uniform convention; no TV certificate)")  # fmt: skip


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
    threads: int | None = None,
    blackbox_rows: int = 20_000,
    progress: Callable[[str], None] | None = None,
    blackbox_seconds: float | None = None,
    rule: str | None = None,
    source: TableSource | None = None,
) -> Shipped:
    """Probe ``verifier``, pair it with the reference at vocabulary ``V``, sweep where they differ.

    ``verifier`` has :func:`specviz.verify`'s signature (``spec.layout`` flat: that of
    :func:`specviz.verify_flat`) and takes ``uniforms=``; ``flat`` is its flat-layout twin, if
    any (the padded-vs-flat probe). ``tv``: the bound the paired test certifies with no
    mismatch (it runs -ln(0.05)/tv rows). ``reproducers``: a folder for mismatching rows.
    ``threads``: torch's thread count (default 1). A verifier without ``uniforms=`` gets the
    black-box tests instead (:mod:`specviz.proof.blackbox`, ``blackbox_rows`` rows on one context, or as
    many as ``blackbox_seconds`` allow; acceptance and replacements judged only against a named ``rule``).
    What the verifier raises there or in the sweep comes out as :class:`~specviz.proof.harness.VerifierRaised`.
    Returns :class:`Shipped`; the verdict FAILs on law or support (a policy finding is a warning:
    :meth:`Shipped.verdicts`). ``source``: the tables of the paired test, the sweep and the black-box
    tests (default: realistic rows at V; ``prove --model``: :class:`specviz.proof.model_rows.ModelSource`).
    """
    note = set_torch_threads(threads)
    probes = run_all(verifier, spec, flat=flat, seed=seed)
    supplied = matched_supply(verifier, spec, seed) if draws_own(probes) else None
    if supplied is not None:  # its draws are the coins and the sample: paired with the reference through them
        verifier = supplied
    elif draws_own(probes):  # the law is sampled, token by token
        box = blackbox_tests(verifier, V=V, K=min(K, 2), spec=spec, n=blackbox_rows, seed=seed, progress=progress,
                             seconds=blackbox_seconds, rule=rule, source=source)  # fmt: skip
        where = [c.part for c in box.failed]
        if where:
            what = "the law breaks at: " if any(c.law for c in box.failed) else f"the {rule} rule breaks at: "
            verdict, reason = "FAIL", what + ", ".join(where)
        elif all(c.conclusive for c in box.checks if c.part == "first token"):
            weak = [c.part for c in box.checks if not c.conclusive]
            verdict, reason = "PASS", (f"every token law tested passed at V = {V:,}"
                                       + (f" (inconclusive: {', '.join(weak)})" if weak else "")
                                       + "; its draws could not be matched to the reference's, so no paired "
                                       "test or sweep")  # fmt: skip
        else:
            verdict, reason = "INCONCLUSIVE", "the first-token test lacks power: more rows (--n)"
        failed = [p.name for p in probes if p.failed]  # law and support probes (policy findings are warnings)
        if failed and verdict != "FAIL":
            verdict, reason = "FAIL", "fault probes failed: " + ", ".join(failed) + f" ({reason})"
        return Shipped(verdict, reason, probes, None, None, note, box)
    paired = paired_test(verifier, V=V, K=K, spec=spec, tv=tv, seed=seed, reproducers=reproducers,
                         stop_after=STOP_AFTER, progress=progress, source=source)  # fmt: skip
    failed = [p.name for p in probes if p.failed]
    swept = None
    if paired.error is None and paired.mismatches:
        swept = sweep(verifier, V=V, spec=spec, rows=2, seed=seed, progress=progress, source=source)
    if paired.error is not None:
        verdict, reason = "FAIL", f"the verifier raised on realistic rows: {paired.error}"
    elif swept is not None and not swept.passed:
        bad = [f"row {s.row} {s.part}" for s in swept.steps if not s.passed]
        verdict, reason = "FAIL", f"the law is wrong at {', '.join(bad)} (TV beyond the sweep's resolution)"
    elif failed:  # law and support probes (policy findings are warnings)
        verdict, reason = "FAIL", "fault probes failed: " + ", ".join(failed)
        if "batch_invariance" in failed:
            reason += " (a row's tokens depend on other rows, as with misaligned rows: q of row b + 1 for row b)"
    elif swept is not None:
        verdict, reason = "PASS (law)", (f"{paired.mismatches} rows differ from the reference, but the law is the "
                                         "target's at every step swept: another valid uniform convention "
                                         "(no TV certificate from the paired test)")  # fmt: skip
    else:
        rows = "realistic rows" if source is None else "rows of the model"
        verdict, reason = "PASS", (f"TV(verifier, target) <= {paired.tv_bound:.3g} at 95% on {paired.rows:,} "
                                   f"{rows}; every probe passed")  # fmt: skip
    diagnosis = diagnose_sweep(swept) if swept is not None and not swept.passed else None
    return Shipped(verdict, reason, probes, paired, swept, note, diagnosis=diagnosis)


# --- the command line: ``prove --vocab`` and the probes of a plain ``prove`` (specviz/cli.py calls these)


def add_arguments(p: Any) -> None:
    """The ``prove`` flags of this module, on an argparse parser."""
    p.add_argument("--vocab", type=int, help="judge the verifier at this vocabulary as an engine calls it: "
                   "fault probes, the paired test against the reference, the sweep over the uniforms")
    p.add_argument("--model", help="as --vocab, on rows of a real model (smollm2: SmolLM2-135M, several prompts "
                   "and drafters) in place of the synthetic ones; needs the model installed")
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
        if args.vocab is not None and args.vocab < 2:
            raise InputError("--vocab", "a vocabulary of at least 2 tokens", str(args.vocab))
        if not 1 <= args.drafts <= 8:
            raise InputError("--drafts", "K in [1, 8]", str(args.drafts))
        if spec.device == "cuda" and not cuda_available():
            print("SKIPPED: --device cuda asked, and no CUDA device is present here")
            return 0
        source, V = None, args.vocab
        if getattr(args, "model", None):
            source = _model_source(args)
            if source is None:
                return 2
            if V is not None and V != source.V:
                raise InputError("--vocab", f"the model's vocabulary {source.V:,} (or no --vocab) with --model",
                                 str(V))  # fmt: skip
            V = source.V
        from ..verifiers.verify import verify_flat

        engine = getattr(verifier, "__module__", "").endswith("verifiers.verify")
        flat = verify_flat if engine and spec.layout == "padded" else None  # the padded-vs-flat probe

        def progress(msg: str) -> None:
            if not args.quiet:
                print(msg, file=sys.stderr)

        import contextlib

        # --json: nothing but the JSON on stdout (a verifier's own prints go to stderr with the progress)
        with contextlib.redirect_stdout(sys.stderr) if getattr(args, "json", False) else contextlib.nullcontext():
            from .budget import parse_budget
            from .prove import DEFAULT_N

            budget = parse_budget(getattr(args, "budget", 0)) if args.n is None else 0.0  # an explicit --n is kept
            report = prove_shipped(verifier, V=V, K=args.drafts, spec=spec, tv=args.tv, seed=args.seed,
                                   reproducers=args.reproducers, flat=flat, threads=args.threads,
                                   blackbox_rows=args.n or DEFAULT_N, progress=progress,
                                   blackbox_seconds=budget or None, rule=args.rule, source=source)  # fmt: skip
    except VerifierRaised as e:  # the V = 4 run's ERROR line, with the verifier's traceback
        name = args.verifier or "specviz:verify"
        if getattr(args, "json", False):
            import json

            print(json.dumps({"verdict": "ERROR", "reason": f"{name} raised in {e.where}: {e.error}",
                              "traceback": e.traceback}, indent=2))  # fmt: skip
        else:
            print(f"ERROR {e.where} / {name}: {e.error}")
            print("  " + e.traceback.replace("\n", "\n  "))
            print(f"\nNOT OK: {name} raised in {e.where}")
        return 1
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    verdicts = report.verdicts(strict=args.strict)
    status = exit_status(verdicts)
    if getattr(args, "json", False):
        import json

        out = record(report)
        out["verdicts"] = {v.kind: {"status": v.status, "line": v.line(), "details": list(v.details)}
                           for v in verdicts}  # fmt: skip
        out["verdict_summary"] = summary(verdicts)
        print(json.dumps(clean(out), indent=2, allow_nan=False))
        return status
    lines = report.lines() + [line for v in verdicts for line in v.lines()] + [summary(verdicts)]
    for line in lines:
        print("\n".join(textwrap.wrap(line, 99, subsequent_indent="  ")) if len(line) > 99 else line)
    if report.paired is not None and report.paired.reproducers:
        print("replay one:")
        print(f"  python -m specviz prove --verifier {args.verifier or 'specviz:verify'} --replay "
              f"{report.paired.reproducers[0]}")  # fmt: skip
    return status


def _model_source(args: Any) -> Any:
    """``--model``'s table source (:mod:`specviz.proof.model_rows`), or None after saying why it is absent."""
    import sys

    from . import model_rows

    if args.model not in model_rows.MODELS:
        raise InputError("--model", "one of " + ", ".join(model_rows.MODELS), repr(args.model))
    from ..models import ModelUnavailable

    set_torch_threads(args.threads)
    try:
        return model_rows.source(args.model, args.drafts, seed=args.seed,
                                 progress=None if args.quiet else lambda m: print(m, file=sys.stderr))  # fmt: skip
    except ModelUnavailable as e:
        print(f"error: --model {args.model}: {e}", file=sys.stderr)
        return None


def record(report: Shipped) -> dict[str, Any]:
    """``prove --vocab --json``: the report as strict JSON (what :meth:`Shipped.lines` prints, as fields)."""
    pt, sw = report.paired, report.sweep
    out: dict[str, Any] = {"verdict": report.verdict, "reason": report.reason, "threads": report.threads,
                           "probes": probe_records(report.probes), "paired": None, "sweep": None}  # fmt: skip
    if pt is not None:
        out["paired"] = {"oracle": pt.oracle, "rows_from": pt.rows_from, "V": pt.V,
                          "K": pt.K, "call": pt.spec.describe(), "rows": pt.rows,
                         "drafts": pt.drafts, "mismatches": pt.mismatches, "bound": pt.bound,
                         "reference_tv": pt.reference_tv, "tv_bound": pt.tv_bound, "seconds": pt.seconds,
                         "reproducers": pt.reproducers, "error": pt.error}  # fmt: skip
    if sw is not None:
        out["sweep"] = {"passed": sw.passed, "seconds": sw.seconds, "calls": sw.calls,
                        "steps": [{k: getattr(s, k) for k in ("row", "part", "tv", "resolution", "passed", "detail")}
                                  for s in sw.steps]}  # fmt: skip
    if report.diagnosis is not None:
        out["diagnosis"] = report.diagnosis.lines()
    if report.blackbox is not None:
        out["blackbox"] = report.blackbox.lines()
    return clean(out)
