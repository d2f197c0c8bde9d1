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

Which tokens a scenario sees: a round that accepts all j drafts emits j + 1 tokens, the last
one the bonus. With L = K every first round's bonus is token K + 1, outside the L-token
window, and later rounds start past token 1; so a verifier wrong only in the bonus of full
rows would pass every L = K scenario. The suite therefore has scenarios with L > K (L = K + 1,
ragged too, and K = 1 with L = 3); :attr:`Scenario.covers` says what each one sees.

Kinds of verifier (:data:`KINDS`, ``prove --kind``): "chain" is the above. "block" holds the
verifier to block verification's own exact tokens per step
(:func:`specviz.proof.block_trace.block_expected_tokens`, more than the chain's) and runs block
verification's mistakes as controls; "tree" takes :func:`specviz.verifiers.tree.verify_tree`'s signature
(run on the scenarios as chain-shaped trees, :func:`as_chain`) or verify's, with tree
verification's mistakes as controls. For both, :func:`exact_court` adds the court's exact TV:
per scenario by :func:`specviz.proof.court.judge`, and on the small trees of :data:`TREE_PROBLEMS` by
:func:`specviz.proof.court.judge_tree`. :func:`kind_controls` lists each kind's controls.
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
from . import simulate as _simulate
from . import stats, theory
from .bugs import BUGS, Bug
from .markov import Drafter, MarkovChain, make_chain, random_chain
from .simulate import generate
from .stats import ALPHA, ChiSquare, MeanTest, chi_square, counts, joint_test, mean_test, position_tests

DEFAULT_N = 300_000
CHAIN_SEED = 20_241_130  # the chains of a scenario are fixed; --seed only changes the sampling
REFERENCE_P = theory.REFERENCE_P  # the textbook example: a = 0.7 against uniform q
TOP_CELLS = 5  # cells listed in the explanation of a failure
SAMPLED_N = 100_000  # sequences of a bug run only to explain a failure, when its exact law is unavailable


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

    @property
    def covers(self) -> str:
        """Which emitted tokens enter the L-token window, in words."""
        return coverage(self)


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
        Scenario("bonus", "The bonus of full rows in view (L = K + 1)", 4, 4, 3, False, "sample", "random",
                 "Random chains, 3 drafts per round, 4 tokens judged: a round accepting every draft shows its bonus."),
        Scenario("one_draft", "One draft per round", 4, 3, 1, False, "sample", "random",
                 "Random chains, 1 draft per round, 3 tokens judged: the bonus of full rows, round after round."),
        Scenario("ragged_bonus", "Ragged rows, every bonus in view", 4, 4, 3, True, "sample", "random",
                 "Each row drafts 0 to 3 tokens per round, 4 tokens judged: the bonus of every row shape is seen."),
        Scenario("deterministic_bonus", "Deterministic drafter, the bonus in view", 4, 3, 1, False, "argmax", "random",
                 "The drafter proposes its argmax with no q (draft_probs=None); 1 draft per round, 3 tokens judged."),
    ]
}  # fmt: skip

# Where each bug shows; the rest are run on "reference" (see default_home).
HOME: dict[str, tuple[str, ...]] = {
    "wrong_bonus_row": ("ragged", "ragged_bonus"),  # invisible when every row has K drafts
    "no_bonus": ("reference", "textbook", "bonus"),
    "greedy_draft_sampled_q": ("deterministic",),
}


def default_home(bug: Bug) -> tuple[str, ...]:
    """Where a bug missing from :data:`HOME` runs: by the step it swaps."""
    if bug.rule is not None and getattr(bug.rule, "bonus", None) == "row_before":
        return ("bonus", "one_draft")  # wrong only in the bonus of full rows: invisible when L = K
    if bug.rule is not None and getattr(bug.rule, "bonus", None) == "last":
        return ("ragged", "ragged_bonus")
    return ("reference",)


for _bug in BUGS.values():  # a bug added to bugs.py gets a home where it can show
    HOME.setdefault(_bug.name, default_home(_bug))


# ---------------------------------------------------------------- kinds of verifier: chain, block, tree

KINDS = ("chain", "block", "tree")


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    out = functools.partial(fn)
    out.__name__ = name  # type: ignore[attr-defined]
    return out


def _tree_resample_from_p(target_probs: Any, draft_probs: Any, node_tokens: Any, parents: Any, num_nodes: Any,
                          *, rng: Any = None, uniforms: Any = None, validate: bool = True) -> Any:  # fmt: skip
    """Tree verification whose r is reset to the node's target row after a rejection (a mistake)."""
    from ..verifiers import tree

    t = tree._prepare(target_probs, draft_probs, node_tokens, parents, num_nodes, validate)
    ua, us = tree._uniforms(t, rng, uniforms, validate)
    return tree._verify(t, ua, us, validate, residual="target")


@functools.cache
def kind_controls(kind: str) -> dict[str, Bug]:
    """The negative controls of a kind of verifier: its own classic mistakes, each the rule with
    one step swapped. "chain": :data:`specviz.proof.bugs.BUGS`. "block": :func:`specviz.verifiers.block.verify_block`
    mistakes (:mod:`specviz.proof.block_trace`). "tree": :func:`specviz.verifiers.tree.verify_tree` mistakes, with
    verify_tree's signature (the suite runs them as chain-shaped trees, the court on real trees)."""
    if kind == "chain":
        return BUGS
    if kind == "block":
        from ..verifiers.block import verify_block_lossy
        from .block_trace import verify_block_variant

        def variant(m: str) -> Callable[..., Any]:
            short = {"residual_from_p": "block_residual_from_p", "h_without_one_minus_w": "block_h_no_1_minus_w"}
            return _named(functools.partial(verify_block_variant, mistake=m), short[m])

        bugs = [
            Bug("block_lossy_last", "Last threshold min(1, prod p/q) instead of w_j", _named(
                verify_block_lossy, "block_lossy_last"), None, None,
                "The last draft is kept with the uncapped product ratio min(1, P(x^j) / Q(x^j)) instead of w_j, "
                "which caps the running ratio at 1 after every draft. Step (1) of the proof in "
                "specviz.verifiers.block needs "
                "Pr[tau >= j | x^j] = w_j exactly; the product is at least w_j, so full blocks are kept too often "
                "(TV 1/9 on the paper's toy example, 4/3 drafts per step against 11/9).",
                "the exact court and the joint chi-square on random chains", True, False),
            Bug("block_residual_from_p", "Token after a stop drawn from p_tau", variant("residual_from_p"), None, None,
                "After stopping at tau < j the extra token is drawn from p_tau instead of the residual "
                "(w_tau p_tau - q_tau)+ normalized: the tokens acceptance already produces come out again.",
                "the exact court and every chi-square test", True, False),
            Bug("block_h_no_1_minus_w", "Thresholds without the 1 - w_i term", variant("h_without_one_minus_w"),
                None, None,
                "h_i = m_i / m_i instead of m_i / (m_i + 1 - w_i): the chance that the block fails after x^i is "
                "left out, every threshold before the last is 1 and the block keeps at least j - 1 drafts "
                "whatever the target says.",
                "the exact court, every chi-square test and tokens per step", True, False),
        ]  # fmt: skip
        return {b.name: b for b in bugs}
    if kind == "tree":
        bugs = [
            Bug("tree_resample_from_p", "Reset r to p after a rejection", _named(_tree_resample_from_p,
                "tree_resample_from_p"), None, None,
                "After a rejected candidate r is reset to the node's target row instead of the residual "
                "(r - q)+ normalized: the next candidate, or the final draw, is judged against a law that still "
                "counts the mass the rejected candidate could have taken.",
                "the exact court on trees and every chi-square test", True, False),
        ]  # fmt: skip
        return {b.name: b for b in bugs}
    raise InputError("kind", "one of " + ", ".join(KINDS), repr(kind))


def tree_signature(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes verify_tree's arguments (node_tokens, parents, num_nodes) rather than verify's."""
    import inspect

    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return "parents" in params[:5]


def as_chain(tree_fn: Callable[..., Any]) -> Callable[..., Any]:
    """A verifier with verify_tree's signature as one with verify's: each row is the chain-shaped
    tree (-1, 0, .., K-1) holding its drafts, as :func:`specviz.verifiers.tree.verify_tree_chain` lays it out."""
    from ..verifiers.verify import Verification

    def chain(target_probs: Any, draft_probs: Any, draft_tokens: Any, num_draft: Any, *, rng: Any = None,
              uniforms: Any = None) -> Any:  # fmt: skip
        T, x, j = np.asarray(target_probs), np.asarray(draft_tokens), np.asarray(num_draft).astype(np.int64)
        B, K = x.shape
        V = T.shape[2]
        D = None
        if draft_probs is not None:
            D = np.zeros((B, K + 1, V))  # (B, K+1, V): the last node has no children
            D[:, :K] = draft_probs
        toks = np.zeros((B, K + 1), np.int64)
        toks[:, 1:] = np.where(np.arange(K)[None, :] < j[:, None], x, 0)
        par = np.broadcast_to(np.arange(K + 1) - 1, (B, K + 1))
        kw = {"rng": rng} if uniforms is None else {"uniforms": uniforms}
        res = tree_fn(T, D, toks, par, j + 1, **kw)
        return Verification(tokens=np.asarray(res.tokens), num_tokens=np.asarray(res.num_tokens),
                            num_accepted=np.asarray(res.num_accepted), accept_uniforms=np.asarray(res.accept_uniforms),
                            ratios=np.asarray(res.thresholds), bonus=np.asarray(res.bonus),
                            sample_uniforms=np.asarray(res.sample_uniforms))  # fmt: skip

    chain.__name__ = getattr(tree_fn, "__name__", "tree verifier")
    return chain


class ExactCase(NamedTuple):
    """The exact court's finding for one verifier on one small problem."""

    problem: str  # a scenario name, or "tree <parents> <drafter mode> L=<L> on <scenario>"
    verifier: str
    is_bug: bool
    tv: float  # total variation of its law from the target's (NaN when refused)
    tokens: float  # exact expected tokens of the first verification
    lossless: bool
    refused: str = ""  # why the court gave no law

    @property
    def verdict(self) -> str:
        if self.refused:
            return "refused"
        if self.is_bug:
            return "caught" if not self.lossless else "missed"
        return "pass" if self.lossless else "FAIL"


# Small trees the court judges a tree verifier on: (parents, drafter mode, L), on the reference chains.
TREE_PROBLEMS: tuple[tuple[tuple[int, ...], str, int], ...] = (
    ((-1, 0, 0), "sample", 2),  # 2 i.i.d. candidates at the root
    ((-1, 0, 0), "argmax", 2),  # the drafter's top 2, deterministic
    ((-1, 0, 0, 1, 2), "sample", 3),  # 2 i.i.d. sequences of 2 drafts
)


def exact_court(kind: str, verifier: Callable[..., Any], name: str, cases: Iterable[Case],
                controls: dict[str, Bug]) -> list[ExactCase]:  # fmt: skip
    """The exact court on the suite's cases: :func:`specviz.proof.court.judge` per scenario for
    verify-signature verifiers, :func:`specviz.proof.court.judge_tree` on :data:`TREE_PROBLEMS` for
    tree-signature ones. A refusal is reported, never turned into a verdict."""
    from . import court

    out: list[ExactCase] = []
    trees_done: set[str] = set()
    for case in cases:
        bug = controls[case.bug] if case.bug else None
        fn, label = (bug.verifier, bug.name) if bug else (verifier, name)
        if kind == "tree" and tree_signature(fn):
            if label in trees_done:
                continue  # the trees are judged once, on the reference chains
            trees_done.add(label)
            target, dchain = scenario_chains(SCENARIOS["reference"])
            for parents, mode, L in TREE_PROBLEMS:
                what = f"tree {list(parents)} {mode} L={L}"
                try:
                    j = court.judge_tree(target, Drafter(dchain, mode), parents, L=L, verifier=fn)
                    out.append(ExactCase(what, label, bug is not None, j.tv_from_target, j.expected_tokens_per_step,
                                         j.lossless))  # fmt: skip
                except Exception as e:  # a refusal, or a user's verifier that raises
                    out.append(ExactCase(what, label, bug is not None, math.nan, math.nan, False,
                                         f"{type(e).__name__}: {e}"))  # fmt: skip
            continue
        try:
            j = court.judge(fn, case.scenario, name=label)
            out.append(ExactCase(case.scenario, label, bug is not None, j.tv_from_target, j.expected_tokens_per_step,
                                 j.lossless))  # fmt: skip
        except Exception as e:
            out.append(ExactCase(case.scenario, label, bug is not None, math.nan, math.nan, False,
                                 f"{type(e).__name__}: {e}"))  # fmt: skip
    return out


def bonus_shapes(sc: Scenario) -> tuple[int, ...]:
    """The draft counts j whose row's bonus token can enter the L-token window: j + 1 <= L
    (it is token j + 1 of a first round; later rounds start past token 1)."""
    return tuple(j for j in (range(sc.K + 1) if sc.ragged else (sc.K,)) if j + 1 <= sc.L)


def coverage(sc: Scenario) -> str:
    """The emitted tokens scenario ``sc`` judges.

    In the first round a row with j drafts emits tokens 1..j (drafts, or the replacement at the
    first rejection) and its bonus as token j + 1; later rounds start past token 1. So the
    window of L tokens sees the drafts and replacements at positions 1..min(K, L) and the bonus
    of rows with j drafts exactly when j + 1 <= L.
    """
    shown = list(bonus_shapes(sc))
    hidden = [j for j in (range(sc.K + 1) if sc.ragged else (sc.K,)) if j not in shown]
    last = min(sc.K, sc.L)
    kind = "argmax drafts" if sc.drafter_mode == "argmax" else "drafts"
    parts = [f"{kind} and replacements at position{' 1' if last == 1 else f's 1..{last}'}"]
    if shown:
        if shown == [sc.K]:
            rows = f"full rows ({sc.K} draft{'s' if sc.K > 1 else ''})"
        else:
            rows = "rows with " + ", ".join(map(str, shown)) + " drafts"
        if sc.ragged and sc.K in shown:
            rows += " (all row shapes)"
        parts.append(f"the bonus of {rows}")
    text = ", ".join(parts)
    if hidden:
        text += f"; NOT the bonus of full rows (token {sc.K + 1} > L = {sc.L})"
    return text


class Cell(NamedTuple):
    """One cell of the joint law: the L tokens, its counts and its share of chi-square."""

    tokens: str  # e.g. "0 2 1"
    observed: int
    expected: float  # N * law
    contribution: float  # (observed - expected)^2 / expected; inf for an impossible cell


class NearestBug(NamedTuple):
    bug: str
    tv: float  # TV(observed frequencies, the bug's law)
    source: str  # "exact" (specviz.proof.exact.verifier_law) or "sampled, N = ..."


class Explanation(NamedTuple):
    """Why a case failed, in the terms a reader can check."""

    scenario: str
    covers: str  # which emitted tokens the scenario judges
    cells: list[Cell]  # the largest contributions to chi-square, impossible cells first
    tv_to_target: float  # TV(observed frequencies, the target's law)
    nearest: list[NearestBug]  # known bugs by TV to the observed law, nearest first
    nearest_note: str  # where the bugs' laws came from, or why there are none

    def lines(self) -> list[str]:
        out = [f"scenario {self.scenario}: judges {self.covers}"]
        if self.cells:
            out.append("cells contributing most to chi-square (tokens: observed vs expected):")
            for c in self.cells:
                contrib = "impossible under the target" if math.isinf(c.contribution) else f"+{c.contribution:.1f}"
                out.append(f'  "{c.tokens}": {c.observed:,} vs {c.expected:,.1f}  ({contrib})')
        out.append(f"TV(observed, target) = {self.tv_to_target:.4f}")
        if self.nearest:
            near = ", ".join(f"{b.bug} {b.tv:.4f} ({b.source})" for b in self.nearest[:3])
            out.append(f"nearest known bugs by TV to the observed law: {near}")
            if self.nearest[0].tv >= self.tv_to_target:
                out.append("no known bug's law is nearer than the target's: a mistake of another kind")
        if self.nearest_note:
            out.append(self.nearest_note)
        return out


class CaseResult(NamedTuple):
    scenario: str
    verifier: str
    is_bug: bool
    joint: ChiSquare
    first_token: ChiSquare
    positions: list[ChiSquare]
    tokens: MeanTest  # tokens per verification against the exact expectation
    passed: bool  # joint and tokens tests both pass, whatever their power (see verdict)
    seconds: float
    observed: np.ndarray  # (C,) joint counts in base-V order
    law: np.ndarray  # (V,) * L exact target law
    n: int = 0  # sequences
    needed_n: int | None = None  # N at which every test of the case would be conclusive
    error: str | None = None  # the verifier raised: the message
    traceback: str | None = None  # ... and its traceback, from the verifier's own frames
    explanation: Explanation | None = None  # set when a test fails

    @property
    def conclusive(self) -> bool:
        return self.joint.conclusive and self.tokens.conclusive

    @property
    def failed(self) -> bool:
        """A conclusive test failed (an impossible sample is conclusive)."""
        return (not self.joint.passed and self.joint.conclusive) or (not self.tokens.passed and self.tokens.conclusive)

    @property
    def verdict(self) -> str:
        """One of pass, FAIL, inconclusive (the verifier under test); caught, missed,
        inconclusive (a bug); ERROR (the verifier raised)."""
        if self.error:
            return "ERROR"
        if self.failed:
            return "caught" if self.is_bug else "FAIL"
        if not self.conclusive:
            return "inconclusive"
        return "missed" if self.is_bug else "pass"

    # The tokens test under its former names.
    @property
    def tokens_measured(self) -> float:
        return self.tokens.measured

    @property
    def tokens_theory(self) -> float:
        return self.tokens.expected

    @property
    def tokens_se(self) -> float:
        return self.tokens.se

    @property
    def tokens_z(self) -> float:
        return self.tokens.z

    @property
    def tokens_passed(self) -> bool:
        return self.tokens.passed


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


def cell_tokens(code: int, V: int, L: int) -> str:
    """The L tokens of cell ``code`` (base-V order, first token most significant): "0 2 1"."""
    digits = []
    for _ in range(L):
        code, d = divmod(code, V)
        digits.append(d)
    return " ".join(map(str, reversed(digits)))


@functools.lru_cache(maxsize=64)
def _needed_n_law(name: str, alpha: float) -> int:
    sc = SCENARIOS[name]
    return stats.needed_n(scenario_chains(sc)[0].joint_law(sc.L), alpha=alpha)


def _needed_n(sc: Scenario, tokens: MeanTest, n: int, rounds: int, alpha: float) -> int:
    """N at which the joint test and the tokens test both become conclusive."""
    need = _needed_n_law(sc.name, alpha)
    per_seq = rounds / max(n, 1)  # verifications per sequence, as measured
    if per_seq > 0:
        need = max(need, math.ceil(tokens.needed_rounds / per_seq))
    return int(need)


def _sample(
    sc: Scenario, verifier: Callable[..., Any], *, n: int, seed: int, mode: str, kind: str = "chain"
) -> _simulate.Simulation:
    target, dchain = scenario_chains(sc)
    # Theory: what a correct pipeline achieves with this drafter (a greedy drafter reports one-hot q).
    theory_drafter = Drafter(dchain, "argmax" if mode != "sample" else "sample")
    expected = theory.chain_expected_tokens(target, theory_drafter, sc.K)
    if kind == "block":  # block verification keeps more drafts than the chain: its own exact figure
        from .block_trace import block_expected_tokens

        expected = block_expected_tokens(target, theory_drafter, sc.K)
    if kind == "tree" and tree_signature(verifier):
        verifier = as_chain(verifier)
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
) -> CaseResult:
    """Run one verifier (or the named bug) through one scenario; ``kind`` (:data:`KINDS`) sets the
    exact tokens per step it is held to (block: :func:`specviz.proof.block_trace.block_expected_tokens`)
    and runs a verify_tree-signature verifier as chain-shaped trees."""
    sc = get_scenario(scenario) if isinstance(scenario, str) else scenario
    if int(n) < 1:
        raise InputError("n", "at least 1 sequence", str(n))
    if int(seed) < 0:
        raise InputError("seed", "a non-negative integer", str(seed))
    if bug is not None:
        verifier = bug.verifier
    label = name or (bug.name if bug else getattr(verifier, "__name__", "verifier"))
    mode = bug.drafter_mode if bug and bug.drafter_mode else sc.drafter_mode
    law = scenario_chains(sc)[0].joint_law(sc.L)
    t0 = time.perf_counter()
    try:
        sim = _sample(sc, verifier, n=int(n), seed=int(seed), mode=mode, kind=kind)
    except Exception as e:  # a user's verifier may raise anything: report it as the case's result
        return _error_case(sc, label, bug is not None, law, int(n), e, time.perf_counter() - t0, alpha)
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
        passed=bool(joint.passed and tokens.passed),
        seconds=time.perf_counter() - t0,
        observed=observed,
        law=law,
        n=int(n),
        needed_n=_needed_n(sc, tokens, int(n), sim.num_verifications, alpha),
    )
    if not res.passed:
        res = res._replace(explanation=explain(res))
    return res


def _harness_files() -> set[str]:
    return {os.path.abspath(__file__), os.path.abspath(_simulate.__file__)}


def verifier_traceback(e: BaseException) -> str:
    """The traceback of ``e`` from the first frame outside this harness (prove, simulate)."""
    tb = e.__traceback__
    skip = _harness_files()
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) in skip:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb)).rstrip()


def _error_case(sc: Scenario, label: str, is_bug: bool, law: np.ndarray, n: int, e: Exception, secs: float,
                alpha: float) -> CaseResult:  # fmt: skip
    nan = float("nan")
    empty = ChiSquare(nan, 0, nan, nan, alpha, nan, nan, stats.POWER, 0, 0, 0, False)
    tokens = MeanTest(nan, nan, nan, nan, 0, alpha, nan, stats.POWER, False, False)
    return CaseResult(sc.name, label, is_bug, empty, empty, [], tokens, False, secs, np.zeros(law.size), law,
                      n=n, error=f"{type(e).__name__}: {e}", traceback=verifier_traceback(e))  # fmt: skip


def top_cells(observed: np.ndarray, law: np.ndarray, k: int = TOP_CELLS) -> list[Cell]:
    """The k largest terms of the chi-square statistic, cells the target cannot produce first.

    Cells tested on their own (expected count >= ``stats.MIN_EXPECTED``) are listed by their
    tokens; the cells the test pools (expected below that) count as one, "pooled (m cells)",
    as they do in the statistic.
    """
    law = np.asarray(law)
    V, L = law.shape[0], law.ndim
    obs = np.asarray(observed, dtype=np.float64).ravel()
    p0 = law.ravel()
    exp = obs.sum() * p0
    out = [Cell(cell_tokens(int(i), V, L), int(obs[i]), 0.0, math.inf) for i in np.flatnonzero((p0 == 0) & (obs > 0))]
    alone = np.flatnonzero(exp >= stats.MIN_EXPECTED)
    terms = [(float((obs[i] - exp[i]) ** 2 / exp[i]), cell_tokens(int(i), V, L), obs[i], exp[i]) for i in alone]
    small = (p0 > 0) & (exp < stats.MIN_EXPECTED)
    if small.any():
        o, e = obs[small].sum(), exp[small].sum()
        terms.append((float((o - e) ** 2 / e), f"pooled ({int(small.sum())} cells)", o, e))
    terms.sort(key=lambda t: -t[0])
    out += [Cell(name, int(o), float(e), c) for c, name, o, e in terms if c > 0]
    return out[:k]


def explain(res: CaseResult, nearest: list[NearestBug] | None = None, note: str = "") -> Explanation:
    """Which cells and tokens-per-step figures make ``res`` fail; ``nearest`` bugs if known."""
    sc = SCENARIOS[res.scenario]
    obs = np.asarray(res.observed, dtype=np.float64)
    tv = 0.5 * float(np.abs(obs / max(obs.sum(), 1) - res.law.ravel()).sum())
    return Explanation(sc.name, sc.covers, top_cells(obs, res.law), tv, nearest or [], note)


@functools.lru_cache(maxsize=128)
def exact_bug_law(scenario: str, bug: str, kind: str = "chain") -> np.ndarray | None:
    """The exact law (C,) of ``bug`` in a scenario by :func:`specviz.proof.exact.verifier_law`, or
    None where it refuses (too large, a ragged scenario it does not model, ...)."""
    sc, b = SCENARIOS[scenario], kind_controls(kind)[bug]
    fn = as_chain(b.verifier) if kind == "tree" and tree_signature(b.verifier) else b.verifier
    target, dchain = scenario_chains(sc)
    # Ragged rounds draw each row's count uniformly from 0..K: verifier_law takes that as a sequence.
    num_draft: Any = range(sc.K + 1) if sc.ragged else sc.K
    try:
        from .exact import verifier_law

        res = verifier_law(fn, target, Drafter(dchain, b.drafter_mode or sc.drafter_mode), L=sc.L,
                           num_draft=num_draft, K=sc.K)  # fmt: skip
        law = np.asarray(getattr(res, "law", res), dtype=np.float64).ravel()
        unresolved = float(getattr(res, "unresolved", 0.0))
    except Exception:  # refused or failed: the caller falls back to a sampled law
        return None
    if law.size != sc.V**sc.L or not np.isfinite(law).all() or abs(law.sum() - 1) > 1e-9 or unresolved > 1e-9:
        return None
    return law


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
            if 0.5 * np.abs(law - target_law).sum() < 1e-9:
                continue  # the bug does not change the law in this scenario
            out.append(NearestBug(b.name, float(0.5 * np.abs(freq - law).sum()), "exact"))
            continue
        ctrl = by_bug.get(b.name) or run_case(sc, n=min(max(res.n, 1), SAMPLED_N), seed=seed, bug=b, alpha=alpha,
                                              kind=kind)  # fmt: skip
        if ctrl.error:
            continue
        if ctrl.conclusive and not ctrl.failed:
            continue  # invisible in this scenario: its law is the target's as far as N can tell
        law = ctrl.observed / max(ctrl.observed.sum(), 1.0)
        out.append(NearestBug(b.name, float(0.5 * np.abs(freq - law).sum()), f"sampled, N = {ctrl.n:,}"))
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


def can_show(bug: Bug, sc: Scenario) -> bool:
    """Whether ``bug`` can change what scenario ``sc`` judges: a bug that needs ragged rows
    cannot show without them, and one wrong only in the bonus of full rows cannot show when
    that bonus never enters the window (L = K)."""
    if bug.needs_ragged and not sc.ragged:
        return False
    if bug.rule is not None and getattr(bug.rule, "bonus", None) == "row_before":
        return sc.K in bonus_shapes(sc)
    return True


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


class SuiteResult(NamedTuple):
    results: list[CaseResult]
    ok: bool  # the verifier passed every case and every bug run was caught somewhere
    failures: list[str]  # why not ok, one line each (empty when merely inconclusive)
    controls: list[str]  # the bugs run as negative controls (empty: none ran)
    inconclusive: list[str]  # cases whose tests lack the power to speak, one line each
    needed_n: int | None  # N at which every case would be conclusive, when some is not
    exact: tuple[ExactCase, ...] = ()  # the exact court's rows (kinds block and tree)
    kind: str = "chain"

    @property
    def verdict(self) -> str:
        """One of ok, FAIL (something failed, raised or a bug was missed) or inconclusive."""
        return "FAIL" if self.failures else "inconclusive" if self.inconclusive else "ok"


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
) -> SuiteResult:
    """Run the cases of :func:`plan` (made with the same ``kind``). For kinds "block" and "tree"
    the exact court (:func:`exact_court`) judges the verifier and the controls too: a verifier
    it finds lossy fails, and a control it finds lossy is caught."""
    if not cases:
        raise InputError("scenarios", "at least one case to run", "none selected")
    known = kind_controls(kind)
    results = []
    for i, case in enumerate(cases):
        bug = known[case.bug] if case.bug else None
        res = run_case(case.scenario, verifier, n=n, seed=seed, bug=bug, name=None if bug else verifier_name,
                       alpha=alpha, kind=kind)  # fmt: skip
        results.append(res)
        if progress:
            progress(i + 1, len(cases), res)
    controls = [r for r in results if r.is_bug]
    for i, r in enumerate(results):  # a failing verdict explains itself, nearest known bug included
        if not r.is_bug and r.verdict == "FAIL":
            near, note = nearest_bugs(r, controls, seed=seed, alpha=alpha, kind=kind)
            results[i] = r._replace(explanation=explain(r, near, note))
    failures = []
    for r in results:
        if not r.is_bug and r.verdict == "ERROR":
            failures.append(f"{r.verifier} raised on {r.scenario}: {r.error}")
        elif not r.is_bug and r.verdict == "FAIL":
            failures.append(f"{r.verifier} failed on {r.scenario}")
        elif r.is_bug and r.verdict == "ERROR":
            failures.append(f"bug control {r.verifier} raised on {r.scenario}: {r.error}")
    inconclusive = [f"{r.verifier} on {r.scenario}: N = {r.n:,} is too small, need N >= {r.needed_n:,}"
                    for r in results if r.verdict == "inconclusive"]  # fmt: skip
    exact = exact_court(kind, verifier, verifier_name, cases, known) if kind != "chain" else []
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
    return SuiteResult(results, not failures and not inconclusive, failures, control_names, inconclusive,
                       max(needs) if needs else None, tuple(exact), kind)  # fmt: skip


def case_record(r: CaseResult) -> dict[str, Any]:
    """Every field of a case as plain JSON-ready data: what ``prove --json`` prints and what an
    app page offers for download. Cells are keyed by their tokens ("0 2 1")."""

    def clean(x: Any) -> Any:
        if isinstance(x, (bool, np.bool_)):
            return bool(x)
        if isinstance(x, (int, np.integer)):
            return int(x)
        if isinstance(x, (float, np.floating)):
            return float(x) if math.isfinite(x) else None
        return x

    def chi(c: Any) -> dict[str, Any]:
        return {**{k: clean(v) for k, v in c._asdict().items()}, "conclusive": c.conclusive}

    sc = SCENARIOS[r.scenario]
    V, L = sc.V, sc.L
    names = [cell_tokens(i, V, L) for i in range(V**L)]
    n_obs = float(np.sum(r.observed))
    ex = r.explanation
    return {
        "scenario": r.scenario,
        "covers": sc.covers,
        "verifier": r.verifier,
        "is_bug": r.is_bug,
        "verdict": r.verdict,
        "n": r.n,
        "needed_n": r.needed_n,
        "V": V, "L": L, "K": sc.K, "ragged": sc.ragged,
        "tokens_test": None if r.error else {**{k: clean(v) for k, v in r.tokens._asdict().items()},
                                             "needed_rounds": r.tokens.needed_rounds},
        "joint": chi(r.joint),
        "first_token": chi(r.first_token),
        "positions": [chi(p) for p in r.positions],
        "tokens_per_step": {"measured": clean(r.tokens.measured), "theory": clean(r.tokens.expected),
                            "se": clean(r.tokens.se), "z": clean(r.tokens.z), "passed": r.tokens.passed},
        "counts": [int(v) for v in r.observed],  # (C,) in base-V order, as "cells"
        "law": [float(v) for v in r.law.ravel()],
        "cells": [{"sequence": c, "observed": int(o), "exact_probability": float(p), "expected_count": n_obs * float(p)}
                  for c, o, p in zip(names, r.observed, r.law.ravel(), strict=True)],
        "explanation": None if ex is None else {
            "scenario": ex.scenario, "covers": ex.covers, "tv_to_target": clean(ex.tv_to_target),
            "cells": [{k: clean(v) for k, v in c._asdict().items()} for c in ex.cells],
            "nearest_bugs": [{k: clean(v) for k, v in b._asdict().items()} for b in ex.nearest],
            "note": ex.nearest_note,
        },
        "seconds": round(r.seconds, 3),
        "error": r.error,
        "traceback": r.traceback,
    }  # fmt: skip


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
    return Calibration(trials, rejections, rejections / trials, alpha, float(ci.low), float(ci.high), p, crit,
                       rejections >= crit, p > CALIBRATION_LEVEL)  # fmt: skip


def calibrate_tests(
    tests: dict[str, CalibratedTest],
    scenario: str = "reference",
    *,
    seeds: Iterable[int] = range(100),
    n: int = 100_000,
    alpha: float = 0.01,
    bug: Bug | None = None,
    verifier: Callable[..., Any] = verify,
) -> dict[str, Calibration]:
    """:func:`calibrate` for several tests on the same samples (one simulation per seed)."""
    sc = get_scenario(scenario)
    seeds = list(seeds)
    if not seeds:
        raise InputError("seeds", "at least one seed", "none")
    if int(n) < 1:
        raise InputError("n", "at least 1 sequence", str(n))
    law = scenario_chains(sc)[0].joint_law(sc.L)
    fn = bug.verifier if bug else verifier
    mode = bug.drafter_mode if bug and bug.drafter_mode else sc.drafter_mode
    rejected = dict.fromkeys(tests, 0)
    for s in seeds:
        sim = _sample(sc, fn, n=int(n), seed=s, mode=mode)
        for name, test in tests.items():
            rejected[name] += not test(sim, law, alpha)
    return {name: rejection_rate(r, len(seeds), alpha) for name, r in rejected.items()}


def calibrate(
    scenario: str = "reference",
    *,
    seeds: Iterable[int] = range(100),
    n: int = 100_000,
    alpha: float = 0.01,
    bug: Bug | None = None,
    verifier: Callable[..., Any] = verify,
    test: CalibratedTest = joint_passes,
) -> Calibration:
    """How often a test (default: the joint chi-square) rejects at level alpha over many seeds.

    For the correct verifier a calibrated test rejects in about a fraction alpha of the runs:
    too often means the chi-square approximation (or the pooling) is off, too rarely means it
    is conservative. ``test`` replaces the joint test (to check that a miscalibrated one is
    detected); ``bug`` or ``verifier`` replace the verifier.
    """
    return calibrate_tests({"test": test}, scenario, seeds=seeds, n=n, alpha=alpha, bug=bug,
                           verifier=verifier)["test"]  # fmt: skip
