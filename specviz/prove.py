"""The proof suite: scenarios x verifiers, each judged end to end.

# N sequences, L tokens, V vocabulary, K drafts per round

A *case* runs one verifier on one scenario: N sequences of L tokens from repeated
draft-and-verify rounds, then

- the joint chi-square of the L-token law against the target's exact law (level ``alpha``,
  with the smallest total-variation shift it detects with 99% probability beside it), and
- tokens per verification against the exact expectation for the contexts actually met
  (:func:`specviz.theory.chain_expected_tokens`), a z-test at the same level (slightly
  conservative: its standard error uses the overall variance of tokens per round, which
  includes the spread between contexts).

The correct verifier must pass both everywhere; a bug is *caught* when either fails in at
least one of its cases. The first-token-only and per-position tests are computed too: they
are the lesson that a weaker test misses ``shared_uniform``, and they do not decide verdicts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
from scipy import stats as sps

from . import theory
from .bugs import BUGS, Bug
from .errors import InputError
from .markov import Drafter, MarkovChain, make_chain, random_chain
from .simulate import generate
from .stats import ALPHA, ChiSquare, counts, joint_test, position_tests
from .verify import verify

DEFAULT_N = 300_000
CHAIN_SEED = 20_241_130  # the chains of a scenario are fixed; --seed only changes the sampling
REFERENCE_P = (0.5, 0.3, 0.15, 0.05)  # the textbook example: a = 0.7 against uniform q


class Scenario(NamedTuple):
    name: str
    title: str
    V: int
    L: int
    K: int
    ragged: bool
    drafter_mode: str  # "sample" or "argmax" (a deterministic drafter, draft_probs=None)
    chains: str  # "random", "textbook", "zeros" or "greedy"
    description: str


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("reference", "Random Markov chains", 4, 3, 3, False, "sample", "random",
                 "Target and drafter are random Markov chains over 4 tokens with a start state; 3 drafts per round."),
        Scenario("textbook", "p = [0.5, 0.3, 0.15, 0.05] vs uniform q", 4, 3, 3, False, "sample", "textbook",
                 "Context-free: the same p and uniform q at every position (a = 0.7, 2.533 tokens per step)."),
        Scenario("ragged", "Ragged rows, wrong padding", 4, 3, 3, True, "sample", "random",
                 "Each row drafts 0 to 3 tokens per round; positions past its count hold wrong distributions."),
        Scenario("deterministic", "Deterministic drafter", 4, 3, 3, False, "argmax", "random",
                 "The drafter proposes its argmax and reports no q (draft_probs=None)."),
        Scenario("zeros", "Zeros in the supports", 4, 3, 3, False, "sample", "zeros",
                 "Half of every row of both chains is exactly 0: tokens one model can never produce."),
        Scenario("greedy", "Greedy target (temperature 0)", 4, 3, 3, False, "sample", "greedy",
                 "The target is one-hot on its argmax: the output must be plain greedy decoding."),
    ]
}  # fmt: skip

# Where each bug shows; the rest are run on "reference".
HOME: dict[str, tuple[str, ...]] = {
    "wrong_bonus_row": ("ragged",),  # invisible when every row has K drafts
    "no_bonus": ("reference", "textbook"),
    "greedy_draft_sampled_q": ("deterministic",),
}


class CaseResult(NamedTuple):
    scenario: str
    verifier: str
    is_bug: bool
    joint: ChiSquare
    first_token: ChiSquare
    positions: list[ChiSquare]
    tokens_measured: float
    tokens_theory: float
    tokens_se: float
    tokens_z: float
    tokens_passed: bool
    passed: bool  # joint and tokens both pass
    seconds: float
    observed: np.ndarray  # (V**L,) joint counts
    law: np.ndarray  # (V,) * L exact target law
    error: str | None = None  # the verifier raised: the message

    @property
    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if self.is_bug:
            return "caught" if not self.passed else "missed"
        return "pass" if self.passed else "FAIL"


def scenario_chains(scenario: Scenario) -> tuple[MarkovChain, MarkovChain]:
    """The scenario's fixed target and drafter chains."""
    V = scenario.V
    rng = np.random.default_rng([CHAIN_SEED, list(SCENARIOS).index(scenario.name)])
    if scenario.chains == "textbook":
        return make_chain(np.tile(REFERENCE_P, (V + 1, 1))), make_chain(np.full((V + 1, V), 1 / V))
    if scenario.chains == "zeros":
        return random_chain(V, rng, zero_fraction=0.5), random_chain(V, rng, zero_fraction=0.5)
    target, draft = random_chain(V, rng), random_chain(V, rng)
    if scenario.chains == "greedy":
        target = make_chain(np.eye(V)[np.argmax(target.table, axis=1)])
    return target, draft


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise InputError("scenario", "one of " + ", ".join(SCENARIOS), repr(name)) from None


def run_case(
    scenario: Scenario | str,
    verifier: Callable[..., Any] = verify,
    *,
    n: int = DEFAULT_N,
    seed: int = 0,
    bug: Bug | None = None,
    name: str | None = None,
    alpha: float = ALPHA,
) -> CaseResult:
    """Run one verifier (or the named bug) through one scenario."""
    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    if int(n) < 1:
        raise InputError("n", "at least 1 sequence", str(n))
    if int(seed) < 0:
        raise InputError("seed", "a non-negative integer", str(seed))
    if bug is not None:
        verifier = bug.verifier
    label = name or (bug.name if bug else getattr(verifier, "__name__", "verifier"))
    target, dchain = scenario_chains(sc)
    mode = bug.drafter_mode if bug and bug.drafter_mode else sc.drafter_mode
    # Theory: what a correct pipeline achieves with this drafter (a greedy drafter reports one-hot q).
    theory_drafter = Drafter(dchain, "argmax" if mode != "sample" else "sample")
    expected = theory.chain_expected_tokens(target, theory_drafter, sc.K)
    law = target.joint_law(sc.L)
    t0 = time.perf_counter()
    rng = np.random.default_rng([seed, list(SCENARIOS).index(sc.name)])
    try:
        sim = generate(verifier, target, Drafter(dchain, mode), n=int(n), L=sc.L, K=sc.K, rng=rng,
                       ragged=sc.ragged, expected=expected)  # fmt: skip
    except Exception as e:  # a user's verifier may raise anything: report it as the case's result
        return _error_case(sc, label, bug is not None, law, f"{type(e).__name__}: {e}", time.perf_counter() - t0)
    joint = joint_test(sim.sequences, law, alpha=alpha)
    positions = position_tests(sim.sequences, law, alpha=alpha)
    se = max(sim.tokens_per_round_se, 1e-12)
    z = (sim.tokens_per_round - sim.expected_tokens_per_round) / se
    tokens_ok = bool(abs(z) <= sps.norm.isf(alpha / 2))
    return CaseResult(
        scenario=sc.name,
        verifier=label,
        is_bug=bug is not None,
        joint=joint,
        first_token=positions[0],
        positions=positions,
        tokens_measured=sim.tokens_per_round,
        tokens_theory=sim.expected_tokens_per_round,
        tokens_se=sim.tokens_per_round_se,
        tokens_z=float(z),
        tokens_passed=tokens_ok,
        passed=bool(joint.passed and tokens_ok),
        seconds=time.perf_counter() - t0,
        observed=counts(sim.sequences, sc.V, sc.L),
        law=law,
    )


def _error_case(sc: Scenario, label: str, is_bug: bool, law: np.ndarray, msg: str, secs: float) -> CaseResult:
    nan = float("nan")
    empty = ChiSquare(nan, 0, nan, nan, ALPHA, nan, nan, 0.99, 0, 0, 0, False)
    return CaseResult(sc.name, label, is_bug, empty, empty, [], nan, nan, nan, nan, False, False, secs,
                      np.zeros(law.size), law, msg)  # fmt: skip


class Case(NamedTuple):
    scenario: str
    bug: str | None  # None: the verifier under test


def plan(
    scenarios: Iterable[str] | None = None, bugs: Iterable[str] | None = None, *, matrix: bool = False
) -> list[Case]:
    """The cases to run: the verifier in every scenario, each bug where it shows."""
    scs = list(SCENARIOS) if scenarios is None else [get_scenario(s).name for s in scenarios]
    bug_names = list(BUGS) if bugs is None else list(bugs)
    for b in bug_names:
        if b not in BUGS:
            raise InputError("bugs", "names from: " + ", ".join(BUGS), repr(b))
    cases = [Case(s, None) for s in scs]
    for b in bug_names:
        homes = scs if matrix else [s for s in HOME.get(b, ("reference",)) if s in scs]
        cases += [Case(s, b) for s in (homes or scs)]
    return cases


class SuiteResult(NamedTuple):
    results: list[CaseResult]
    ok: bool  # the verifier passed every case and every bug was caught somewhere
    failures: list[str]  # why not ok, one line each


def run_suite(
    cases: list[Case],
    verifier: Callable[..., Any] = verify,
    *,
    verifier_name: str = "verify",
    n: int = DEFAULT_N,
    seed: int = 0,
    alpha: float = ALPHA,
    progress: Callable[[int, int, CaseResult], None] | None = None,
) -> SuiteResult:
    results = []
    for i, case in enumerate(cases):
        bug = BUGS[case.bug] if case.bug else None
        res = run_case(case.scenario, verifier, n=n, seed=seed, bug=bug, name=None if bug else verifier_name,
                       alpha=alpha)  # fmt: skip
        results.append(res)
        if progress:
            progress(i + 1, len(cases), res)
    if not cases:
        raise InputError("scenarios", "at least one case to run", "none selected")
    failures = [f"{r.verifier} {'failed' if not r.error else 'raised'} on {r.scenario}"
                + (f": {r.error}" if r.error else "") for r in results if not r.is_bug and not r.passed]  # fmt: skip
    # A pass proves nothing when the test could not have failed: too few samples for any power.
    powerless = [r for r in results if not r.is_bug and not r.error and not np.isfinite(r.joint.detectable_tv)]
    failures += [f"{r.verifier} on {r.scenario}: N = {n:,} is too small for the test to detect anything"
                 for r in powerless]  # fmt: skip
    for b in dict.fromkeys(c.bug for c in cases if c.bug):
        mine = [r for r in results if r.is_bug and r.verifier == b]
        if all(r.passed for r in mine):
            failures.append(f"{b} was not caught in {', '.join(r.scenario for r in mine)}")
    return SuiteResult(results, not failures, failures)


class Calibration(NamedTuple):
    trials: int
    rejections: int  # runs whose joint test rejected at level alpha
    rate: float
    alpha: float
    binom_p: float  # two-sided binomial test of rejections ~ Binomial(trials, alpha)
    consistent: bool  # binom_p above the level of this meta-test (0.001)


def calibrate(
    scenario: str = "reference",
    *,
    seeds: Iterable[int] = range(100),
    n: int = 100_000,
    alpha: float = 0.01,
    bug: Bug | None = None,
) -> Calibration:
    """How often the joint test rejects the correct verifier at level alpha, over many seeds.

    A calibrated test rejects in about a fraction alpha of honest runs: too often means the
    chi-square approximation (or the pooling) is off, too rarely means it is conservative.
    """
    seeds = list(seeds)
    rejected = sum(not run_case(scenario, n=n, seed=s, alpha=alpha, bug=bug).joint.passed for s in seeds)
    p = float(sps.binomtest(rejected, len(seeds), alpha).pvalue)
    return Calibration(len(seeds), rejected, rejected / len(seeds), alpha, p, p > 0.001)
