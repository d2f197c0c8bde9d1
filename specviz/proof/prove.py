"""The proof suite: scenarios x verifiers, each judged end to end.

# N sequences, L tokens, V vocabulary, K drafts per round, C = V**L cells

A *case* runs one verifier on one scenario: N sequences of L tokens from repeated
draft-and-verify rounds, then

- the joint chi-square of the L-token law against the target's exact law (level ``alpha``,
  with the smallest total-variation shift it detects with 99% probability beside it), and
- tokens per verification against the exact expectation for the contexts actually met
  (:func:`specviz.proof.theory.chain_expected_tokens`), a z-test at the same level (slightly
  conservative: its standard error uses the overall variance of tokens per round, which
  includes the spread between contexts).

No verdict without power (:mod:`specviz.proof.stats`): a test speaks only when it is *conclusive*,
i.e. it would catch a shift of ``stats.MIN_TV`` in the law (or ``stats.MIN_TOKENS`` tokens per
step, after ``stats.MIN_ROUNDS`` rounds) with probability 99%, or it saw a sample the target
cannot produce. A conclusive failing test fails the case; every test conclusive and passing
passes it; anything else is "inconclusive", with the N at which it would not be
(``CaseResult.needed_n``).

The correct verifier must pass both everywhere; a bug is *caught* when a conclusive test fails
in at least one of its cases. The first-token-only and per-position tests are computed too:
they are the lesson that a weaker test misses ``shared_uniform``, and they do not decide
verdicts.

The scenarios and where each bug runs are in :mod:`specviz.proof.scenarios`; the result types,
explanations and the record ``prove --json`` prints in :mod:`specviz.proof.report`; each kind's
controls in :mod:`specviz.proof.controls`; what each verifier is (kind, signature, lossless) in
:mod:`specviz.proof.registry`.

Kinds of verifier (:data:`KINDS`, ``prove --kind``): "chain" is the above. "block" holds the
verifier to block verification's own exact tokens per step
(:func:`specviz.proof.block_trace.block_expected_tokens`, more than the chain's) and runs block
verification's mistakes as controls; "tree" takes :func:`specviz.verifiers.tree.verify_tree`'s signature
(run on the scenarios as chain-shaped trees, :func:`specviz.proof.registry.as_chain`) or verify's, as
the registry declares it (:func:`specviz.proof.registry.signature_of`), with tree verification's
mistakes as controls. For both, :func:`exact_court` adds the court's exact TV: per scenario by
:func:`specviz.proof.court.judge`, and on the small trees of :data:`TREE_PROBLEMS` by
:func:`specviz.proof.court.judge_tree`.

The verifier under test is held to account (:mod:`specviz.proof.harness`): anything it raises,
SystemExit included, is that case's ERROR; a case over its time limit is stopped and reported;
float tokens are an error, its stdout goes to stderr and it gets read-only inputs.
"""

from __future__ import annotations

import functools
import math
import os
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as sps

from ..errors import InputError
from ..verifiers.verify import verify
from . import court, stats, theory
from . import harness as _harness
from . import simulate as _simulate
from .bugs import Bug
from .controls import kind_controls
from .harness import guard, stops_the_suite, time_limit
from .markov import Drafter, DrafterMode
from .registry import as_verify_signature, signature_of
from .report import (
    CaseResult,
    ExactCase,
    NearestBug,
    SuiteResult,
    diagnose_case,
    exact_bug_law,
    explain,
)
from .scenarios import (
    HOME,
    SCENARIOS,
    Scenario,
    can_show,
    get_scenario,
    scenario_chains,
)
from .simulate import generate
from .stats import ALPHA, ChiSquare, MeanTest, chi_square, counts, joint_test, mean_test, position_tests

DEFAULT_N = 300_000
SAMPLED_N = 100_000  # sequences of a bug run only to explain a failure, when its exact law is unavailable


# Small trees the court judges a tree verifier on: (parents, drafter mode, L), on the reference chains.
TREE_PROBLEMS: tuple[tuple[tuple[int, ...], DrafterMode, int], ...] = (
    ((-1, 0, 0), "sample", 2),  # 2 i.i.d. candidates at the root
    ((-1, 0, 0), "argmax", 2),  # the drafter's top 2, deterministic
    ((-1, 0, 0, 1, 2), "sample", 3),  # 2 i.i.d. sequences of 2 drafts
)


def exact_court(kind: str, verifier: Callable[..., Any], name: str, cases: Iterable[Case],
                controls: dict[str, Bug], *, timeout: float | None = None) -> list[ExactCase]:  # fmt: skip
    """The exact court on the suite's cases: :func:`specviz.proof.court.judge` per scenario for
    verify-signature verifiers, :func:`specviz.proof.court.judge_tree` on :data:`TREE_PROBLEMS` for
    tree-signature ones. A refusal is reported, never turned into a verdict; so is anything the
    verifier raises (``SystemExit`` too) and a problem that runs past ``timeout`` seconds."""
    out: list[ExactCase] = []
    trees_done: set[str] = set()

    def judged(what: str, label: str, is_bug: bool, call: Callable[[], Any]) -> ExactCase:
        try:
            with time_limit(timeout, f"the exact court on {what} / {label}"):
                j = call()
        except BaseException as e:  # a refusal, or a user's verifier that raises or runs too long
            if stops_the_suite(e):
                raise
            return ExactCase(what, label, is_bug, math.nan, math.nan, False, f"{type(e).__name__}: {e}")
        return ExactCase(what, label, is_bug, j.tv_from_target, j.expected_tokens_per_step, j.lossless)

    for case in cases:
        bug = controls[case.bug] if case.bug else None
        fn, label = (bug.verifier, bug.name) if bug else (verifier, name)
        tree = kind == "tree" and signature_of(fn, kind) == "tree"
        fn = guard(fn)  # read-only inputs, its stdout to stderr
        if tree:
            if label in trees_done:
                continue  # the trees are judged once, on the reference chains
            trees_done.add(label)
            target, dchain = scenario_chains(SCENARIOS["reference"])
            for parents, mode, L in TREE_PROBLEMS:
                out.append(judged(f"tree {list(parents)} {mode} L={L}", label, bug is not None,
                                  functools.partial(court.judge_tree, target, Drafter(dchain, mode), parents, L=L,
                                                    verifier=fn)))  # fmt: skip
            continue
        out.append(judged(case.scenario, label, bug is not None,
                          functools.partial(court.judge, fn, case.scenario, name=label)))  # fmt: skip
    return out


@functools.lru_cache(maxsize=64)
def _needed_n_law(name: str, alpha: float) -> int:
    sc = SCENARIOS[name]
    return stats.needed_n(scenario_chains(sc)[0].joint_law(sc.L), alpha=alpha)


def _needed_n(sc: Scenario, tokens: MeanTest, n: int, rounds: int, alpha: float, judged: bool = True) -> int:
    """N at which the joint test and (when ``judged``) the tokens test both become conclusive."""
    need = _needed_n_law(sc.name, alpha)
    per_seq = rounds / max(n, 1)  # verifications per sequence, as measured
    if per_seq > 0 and judged:
        need = max(need, math.ceil(tokens.needed_rounds / per_seq))
    return int(need)


def _sample(
    sc: Scenario, verifier: Callable[..., Any], *, n: int, seed: int, mode: DrafterMode, kind: str = "chain",
    rule: str = "residual",
) -> _simulate.Simulation:
    target, dchain = scenario_chains(sc)
    # Theory: what a correct pipeline achieves with this drafter (a greedy drafter reports one-hot q).
    theory_drafter = Drafter(dchain, "argmax" if mode != "sample" else "sample")
    expected = theory.chain_expected_tokens(target, theory_drafter, sc.K, rule=rule)
    if kind == "block":  # block verification keeps more drafts than the chain: its own exact figure
        from .block_trace import block_expected_tokens

        expected = block_expected_tokens(target, theory_drafter, sc.K)
    verifier = guard(as_verify_signature(verifier, kind))  # read-only inputs, its stdout to stderr
    rng = np.random.default_rng([seed, list(SCENARIOS).index(sc.name)])
    return generate(verifier, target, Drafter(dchain, mode), n=n, L=sc.L, K=sc.K, rng=rng, ragged=sc.ragged,
                    expected=expected)  # fmt: skip


def run_case(
    scenario: Scenario | str,
    verifier: Callable[..., Any] = verify,
    *,
    n: int = DEFAULT_N,
    seed: int = 0,
    bug: Bug | None = None,
    name: str | None = None,
    alpha: float = ALPHA,
    kind: str = "chain",
    timeout: float | None = None,
    rule: str | None = None,
) -> CaseResult:
    """Run one verifier (or the named bug) through one scenario; ``kind`` (:data:`KINDS`) sets the
    exact tokens per step it is held to (block: :func:`specviz.proof.block_trace.block_expected_tokens`)
    and runs a verify_tree-signature verifier as chain-shaped trees.

    The law is the law: a chain verifier's tokens per step are judged only against a named ``rule``
    (:data:`specviz.proof.theory.RULES`); without one they are measured against the residual
    rule's exact figure as efficiency, and only the joint law decides. A bug control is always held
    to the residual rule it is a mistake of; kinds block and tree to their own rule.

    Whatever the verifier raises (``SystemExit`` too; only ``KeyboardInterrupt`` goes through)
    is the case's ERROR, and so is running past ``timeout`` seconds (None or 0: no limit; see
    :mod:`specviz.proof.harness`)."""
    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    if int(n) < 1:
        raise InputError("n", "at least 1 sequence", str(n))
    if int(seed) < 0:
        raise InputError("seed", "a non-negative integer", str(seed))
    if bug is not None:
        verifier = bug.verifier
    default_label: str = bug.name if bug else getattr(verifier, "__name__", "verifier")
    label = name or default_label
    mode = bug.drafter_mode if bug and bug.drafter_mode else sc.drafter_mode
    if rule is not None and rule not in theory.RULES:
        raise InputError("rule", "one of " + ", ".join(theory.RULES), repr(rule))
    judged = rule if bug is None else "residual"
    if kind != "chain":
        judged = kind  # block and tree: the kind is the rule
    law = scenario_chains(sc)[0].joint_law(sc.L)
    t0 = time.perf_counter()
    try:
        with time_limit(timeout, f"the case {sc.name} / {label}"):
            sim = _sample(sc, verifier, n=int(n), seed=int(seed), mode=mode, kind=kind,
                          rule="sample-match" if judged == "sample-match" else "residual")  # fmt: skip
    except BaseException as e:  # a user's verifier may raise anything, exit included: the case's result
        if stops_the_suite(e):
            raise
        return _error_case(sc, label, bug is not None, law, int(n), e, time.perf_counter() - t0, alpha)._replace(
            rule=judged)
    observed = counts(sim.sequences, sc.V, sc.L)
    joint = chi_square(observed, law.ravel(), alpha=alpha)  # joint_test, without counting twice
    positions = position_tests(sim.sequences, law, alpha=alpha)
    tokens = mean_test(sim.tokens_per_round, sim.expected_tokens_per_round, sim.tokens_per_round_se,
                       sim.num_verifications, alpha=alpha)  # fmt: skip
    res = CaseResult(
        scenario=sc.name,
        verifier=label,
        is_bug=bug is not None,
        joint=joint,
        first_token=positions[0],
        positions=positions,
        tokens=tokens,
        passed=bool(joint.passed and (tokens.passed or judged is None)),
        seconds=time.perf_counter() - t0,
        observed=observed,
        law=law,
        n=int(n),
        needed_n=_needed_n(sc, tokens, int(n), sim.num_verifications, alpha, judged is not None),
        rule=judged,
    )
    if not res.passed:
        res = res._replace(explanation=explain(res))
    return res


def _harness_files() -> set[str]:
    return {os.path.abspath(f) for f in (__file__, _simulate.__file__, _harness.__file__)}


def verifier_traceback(e: BaseException) -> str:
    """The traceback of ``e`` from the first frame outside this harness (prove, simulate, harness)."""
    tb = e.__traceback__
    skip = _harness_files()
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in skip:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb)).rstrip()


def _error_case(sc: Scenario, label: str, is_bug: bool, law: np.ndarray, n: int, e: BaseException, secs: float,
                alpha: float) -> CaseResult:  # fmt: skip
    empty = ChiSquare.empty(alpha)
    return CaseResult(scenario=sc.name, verifier=label, is_bug=is_bug, joint=empty, first_token=empty, positions=[],
                      tokens=MeanTest.empty(alpha), passed=False, seconds=secs, observed=np.zeros(law.size), law=law,
                      n=n, error=f"{type(e).__name__}: {e}", traceback=verifier_traceback(e))  # fmt: skip


def nearest_bugs(
    res: CaseResult, controls: Iterable[CaseResult] = (), *, seed: int = 0, alpha: float = ALPHA, kind: str = "chain"
) -> tuple[list[NearestBug], str]:
    """Known bugs (those that change the law) ordered by TV between their law and the observed
    one. Exact laws where :func:`specviz.proof.exact.verifier_law` answers; otherwise the bug
    controls' sampled laws in the same scenario (run here at the case's N when absent)."""
    sc = SCENARIOS[res.scenario]
    target_law = res.law.ravel()
    freq = np.asarray(res.observed, dtype=np.float64) / max(float(np.sum(res.observed)), 1.0)
    by_bug = {c.verifier: c for c in controls if c.is_bug and c.scenario == sc.name and not c.error}
    out, sampled = [], []
    known = kind_controls(kind)
    for b in known.values():
        if not b.changes_law:
            continue
        law = exact_bug_law(sc.name, b.name, kind)
        if law is not None:
            if theory.total_variation(law, target_law) < 1e-9:
                continue  # the bug does not change the law in this scenario
            out.append(NearestBug(b.name, theory.total_variation(freq, law), "exact"))
            continue
        ctrl = by_bug.get(b.name) or run_case(sc, n=min(max(res.n, 1), SAMPLED_N), seed=seed, bug=b, alpha=alpha,
                                              kind=kind)  # fmt: skip
        if ctrl.error:
            continue
        if ctrl.conclusive and not ctrl.failed:
            continue  # invisible in this scenario: its law is the target's as far as N can tell
        law = ctrl.observed / max(ctrl.observed.sum(), 1.0)
        out.append(NearestBug(b.name, theory.total_variation(freq, law), f"sampled, N = {ctrl.n:,}"))
        sampled.append(b.name)
    out.sort(key=lambda x: x.tv)
    notes = []
    if sampled:
        notes.append("exact law unavailable for " + ", ".join(sampled) + " here: their sampled laws are used, "
                     "so those TVs include sampling noise in both laws")  # fmt: skip
    if res.joint.passed and not res.tokens.passed:
        same = [b.name for b in known.values() if not b.changes_law]
        notes.append("the law passes and only tokens per step fail: a mistake that keeps the law but changes "
                     "how many tokens a verification yields, like " + ", ".join(same))  # fmt: skip
    return out, "; ".join(notes)


class Case(NamedTuple):
    scenario: str
    bug: str | None  # None: the verifier under test


def plan(
    scenarios: Iterable[str] | None = None,
    bugs: Iterable[str] | None = None,
    *,
    matrix: bool = False,
    kind: str = "chain",
) -> list[Case]:
    """The cases to run: the verifier in every scenario, each bug where it shows.

    ``bugs=None`` runs every bug that can show in the chosen scenarios (:func:`can_show`: one
    that needs ragged rows, or the bonus of full rows in view, is left out when no chosen
    scenario has them); named bugs always run, in the chosen scenarios when none of their homes
    is among them. ``kind`` (:data:`KINDS`) picks the controls: :func:`kind_controls`.
    """
    known = kind_controls(kind)
    scs = list(SCENARIOS) if scenarios is None else [get_scenario(s).name for s in scenarios]
    if bugs is None:
        bug_names = [b.name for b in known.values() if any(can_show(b, SCENARIOS[s]) for s in scs)]
    else:
        bug_names = list(bugs)
    for b in bug_names:
        if b not in known:
            raise InputError("bugs", "names from: " + ", ".join(known), repr(b))
    cases = [Case(s, None) for s in scs]
    for b in bug_names:
        homes = scs if matrix else [s for s in HOME.get(b, ("reference",)) if s in scs]
        cases += [Case(s, b) for s in (homes or scs)]
    return cases


def run_suite(
    cases: list[Case],
    verifier: Callable[..., Any] = verify,
    *,
    verifier_name: str = "verify",
    n: int = DEFAULT_N,
    seed: int = 0,
    alpha: float = ALPHA,
    progress: Callable[[int, int, CaseResult], None] | None = None,
    kind: str = "chain",
    timeout: float | None = None,
    rule: str | None = None,
) -> SuiteResult:
    """Run the cases of :func:`plan` (made with the same ``kind``). For kinds "block" and "tree"
    the exact court (:func:`exact_court`) judges the verifier and the controls too: a verifier
    it finds lossy fails, and a control it finds lossy is caught. ``timeout``: seconds per case
    (and per exact-court problem); a case past it is an ERROR naming the case. ``rule``: what the
    verifier's tokens per step are held to (:func:`run_case`; None: reported as efficiency)."""
    if not cases:
        raise InputError("scenarios", "at least one case to run", "none selected")
    known = kind_controls(kind)
    results = []
    for i, case in enumerate(cases):
        bug = known[case.bug] if case.bug else None
        res = run_case(case.scenario, verifier, n=n, seed=seed, bug=bug, name=None if bug else verifier_name,
                       alpha=alpha, kind=kind, timeout=timeout, rule=rule)  # fmt: skip
        results.append(res)
        if progress:
            progress(i + 1, len(cases), res)
    controls = [r for r in results if r.is_bug]
    fitted_on = None  # the families of known mistakes are fitted to the first failing case of a chain verifier
    for i, r in enumerate(results):  # a failing verdict explains itself, nearest known bug included
        if not r.is_bug and r.verdict == "FAIL":
            near, note = nearest_bugs(r, controls, seed=seed, alpha=alpha, kind=kind)
            diag = diagnose_case(r, seed=seed) if kind == "chain" and fitted_on is None else None
            fitted_on = r.scenario if diag is not None else fitted_on
            fam_note = f"families of known mistakes: fitted on {fitted_on} above" if fitted_on and not diag else ""
            results[i] = r._replace(explanation=explain(r, near, note, diag, fam_note))
    failures = []
    for r in results:
        if not r.is_bug and r.verdict == "ERROR":
            failures.append(f"{r.verifier} raised on {r.scenario}: {r.error}")
        elif not r.is_bug and r.verdict == "FAIL" and r.joint.passed:
            t = r.tokens
            failures.append(f"tokens per step {t.measured:.3f} against {t.expected:.3f} by the {r.rule} rule "
                            f"(z = {t.z:+.1f}) on {r.scenario}; the output law holds (its joint chi-square "
                            f"passes): {r.verifier} keeps drafts by another rule, losslessly")  # fmt: skip
        elif not r.is_bug and r.verdict == "FAIL":
            failures.append(f"{r.verifier} failed on {r.scenario}")
        elif r.is_bug and r.verdict == "ERROR":
            failures.append(f"bug control {r.verifier} raised on {r.scenario}: {r.error}")
    inconclusive = [f"{r.verifier} on {r.scenario}: N = {r.n:,} is too small, need N >= {r.needed_n:,}"
                    for r in results if r.verdict == "inconclusive"]  # fmt: skip
    exact = exact_court(kind, verifier, verifier_name, cases, known, timeout=timeout) if kind != "chain" else []
    for e in exact:
        if e.verdict == "FAIL":
            failures.append(f"{e.verifier} is lossy by the exact court on {e.problem}: TV {e.tv:.3g} from the target")
    control_names = list(dict.fromkeys(c.bug for c in cases if c.bug))
    for b in control_names:
        mine = [r for r in results if r.is_bug and r.verifier == b]
        if any(r.verdict == "caught" for r in mine) or any(e.verdict == "caught" for e in exact if e.verifier == b):
            continue
        if all(r.verdict == "missed" for r in mine):
            failures.append(f"{b} was not caught in {', '.join(r.scenario for r in mine)}")
    needs = [r.needed_n for r in results if r.verdict == "inconclusive" and r.needed_n]
    return SuiteResult(results=results, ok=not failures and not inconclusive, failures=failures,
                       controls=control_names, inconclusive=inconclusive, needed_n=max(needs) if needs else None,
                       exact=tuple(exact), kind=kind)  # fmt: skip


class Calibration(NamedTuple):
    trials: int
    rejections: int  # runs whose test rejected at level alpha
    rate: float
    alpha: float
    ci_low: float  # Clopper-Pearson 95% interval for the rejection rate
    ci_high: float
    binom_p: float  # two-sided binomial test of rejections ~ Binomial(trials, alpha)
    critical: int  # this many rejections or more: the rate is far above alpha (one-sided, level 0.001)
    far_above: bool  # rejections >= critical
    consistent: bool  # binom_p above the level of this meta-test (0.001)


CALIBRATION_LEVEL = 0.001  # level of the meta-test on the rejection count


def rejection_critical(trials: int, alpha: float, level: float = CALIBRATION_LEVEL) -> int:
    """Smallest c with P(Binomial(trials, alpha) >= c) <= level: that many rejections of honest
    runs is evidence at ``level`` that the test rejects more often than alpha."""
    return int(sps.binom.isf(level, trials, alpha)) + 1


# A test judged for calibration: (the simulation's result, the exact law (V,) * L, alpha) -> passed.
CalibratedTest = Callable[[_simulate.Simulation, np.ndarray, float], bool]


def joint_passes(sim: _simulate.Simulation, law: np.ndarray, alpha: float) -> bool:
    """The suite's distribution test: the joint chi-square, small cells pooled."""
    return joint_test(sim.sequences, law, alpha=alpha).passed


def tokens_passes(sim: _simulate.Simulation, law: np.ndarray, alpha: float) -> bool:
    """The suite's tokens-per-step z-test against the exact expectation for the contexts met."""
    return mean_test(sim.tokens_per_round, sim.expected_tokens_per_round, sim.tokens_per_round_se,
                     sim.num_verifications, alpha=alpha).passed  # fmt: skip


def rejection_rate(rejections: int, trials: int, alpha: float) -> Calibration:
    """A rejection count of honest runs against the level alpha, with its Clopper-Pearson interval."""
    bt = sps.binomtest(rejections, trials, alpha)
    ci = bt.proportion_ci(confidence_level=0.95, method="exact")
    crit = rejection_critical(trials, alpha)
    p = float(bt.pvalue)
    return Calibration(trials=trials, rejections=rejections, rate=rejections / trials, alpha=alpha,
                       ci_low=float(ci.low), ci_high=float(ci.high), binom_p=p, critical=crit,
                       far_above=rejections >= crit, consistent=p > CALIBRATION_LEVEL)  # fmt: skip


def calibrate_tests(
    tests: dict[str, CalibratedTest],
    scenario: str = "reference",
    *,
    seeds: Iterable[int] = range(100),
    n: int = 100_000,
    alpha: float = 0.01,
    bug: Bug | None = None,
) -> dict[str, Calibration]:
    """How often each test rejects at level alpha over many seeds, all on the same samples.

    For the correct verifier a calibrated test rejects in about a fraction alpha of the runs:
    too often means the chi-square approximation (or the pooling) is off, too rarely means it
    is conservative. ``bug`` replaces the verifier.
    """
    sc = get_scenario(scenario)
    seeds = list(seeds)
    if not seeds:
        raise InputError("seeds", "at least one seed", "none")
    if int(n) < 1:
        raise InputError("n", "at least 1 sequence", str(n))
    law = scenario_chains(sc)[0].joint_law(sc.L)
    fn = bug.verifier if bug else verify
    mode = bug.drafter_mode if bug and bug.drafter_mode else sc.drafter_mode
    rejected = dict.fromkeys(tests, 0)
    for s in seeds:
        sim = _sample(sc, fn, n=int(n), seed=s, mode=mode)
        for name, test in tests.items():
            rejected[name] += not test(sim, law, alpha)
    return {name: rejection_rate(r, len(seeds), alpha) for name, r in rejected.items()}
