"""The court: any verifier's exact law, its distance from the target and its tokens per step.

# V vocabulary, K drafts per round (padded width), L tokens judged

:func:`judge` puts one verifier (a function with :func:`specviz.verify`'s signature, or the name
of a rule in :data:`RULES`) through :func:`specviz.exact.verifier_law` on a problem: a target
chain, a drafter, the window L, the padded width K and the draft counts. It returns the exact
law of the first L tokens, its total-variation distance from the target's law, the exact
expected tokens of one verification, and a verdict computed from those numbers:
``lossless`` iff TV <= 1e-12 + the mass the enumeration could not resolve. The court refuses
(an :class:`~specviz.InputError` naming ``verifier``) rather than guess when the enumeration
cannot vouch for a law. :func:`compare` judges several rules on one problem, one row each.

Problems are the Markov-chain scenarios of :mod:`specviz.prove` (by name or as a
:class:`~specviz.prove.Scenario`), :func:`toy_problem` (the block-verification paper's example),
or a :class:`Problem` built by hand.

Expected tokens per step: the exact mean number of tokens emitted by the first verification
(from the start context), averaged over the draft counts a row can have (uniformly, as
:func:`specviz.simulate.generate` draws them for ragged rows). On a context-free problem (the
toy example) this is the mean of every verification.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .block import verify_block, verify_block_lossy
from .errors import InputError
from .exact import verifier_law
from .lossy import verify_lenient, verify_typical
from .markov import Drafter, MarkovChain, make_chain
from .sample_match import verify_sample_match
from .tree import verify_tree_chain
from .verify import verify

Verifier = Callable[..., Any]

LOSSLESS_TOL = 1e-12  # TV from the target allowed for a lossless verdict, on top of the unresolved mass

# Every rule the court knows by name, in the order :func:`compare` lists them.
RULES: dict[str, Verifier] = {
    "chain": verify,
    "block": verify_block,
    "tree (chain-shaped)": verify_tree_chain,
    "sample-and-match": verify_sample_match,
    "block, lossy last threshold": verify_block_lossy,
    "typical acceptance (Medusa)": verify_typical,
    "lenient acceptance (theta = 3/4)": verify_lenient,
}


class Problem(NamedTuple):
    """What a verifier is judged on."""

    target: MarkovChain
    drafter: Drafter
    L: int  # tokens judged
    K: int  # padded draft width
    num_draft: int | tuple[int, ...]  # every row's draft count, or the counts drawn uniformly


class Judgement(NamedTuple):
    """The court's finding for one verifier on one problem."""

    rule: str
    law: np.ndarray  # (V,) * L exact law of the first L tokens
    target_law: np.ndarray  # (V,) * L the target's
    tv_from_target: float  # total variation between the two
    expected_tokens_per_step: float  # first verification, averaged over draft counts
    expected_accepted_per_step: float  # the same minus the one token every verification emits
    unresolved: float  # mass the enumeration could not resolve (a bound on its own error in TV)
    lossless: bool  # tv_from_target <= LOSSLESS_TOL + unresolved
    refused: str = ""  # why the court gave no law (then every number is NaN), "" when it did

    @property
    def badge(self) -> str:
        if self.refused:
            return "refused"
        return "lossless" if self.lossless else "LOSSY"


def toy_problem() -> Problem:
    """Sun et al.'s example: context-free p = (1/3, 2/3), q = (2/3, 1/3), 2 drafts, 3 tokens judged.

    Block verification keeps 11/9 drafts per step, the chain 10/9; the lossy last threshold
    keeps 4/3 and its 3 tokens are 1/9 from the target in total variation.
    """
    p, q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
    return Problem(make_chain(np.array([p] * 3)), Drafter(make_chain(np.array([q] * 3))), 3, 2, 2)


def pair_problem(target_probs: Sequence[float], draft_probs: Sequence[float], K: int, L: int | None = None) -> Problem:
    """A context-free problem: the same p and q at every position, K drafts per round.

    ``L`` defaults to K + 1 (capped at 4 tokens judged, for the enumeration's sake).
    """
    p = np.asarray(target_probs, dtype=np.float64)
    q = np.asarray(draft_probs, dtype=np.float64)
    if p.ndim != 1 or q.shape != p.shape:
        raise InputError("draft_probs", f"a row of the target's length {p.shape[-1] if p.ndim else 0}", str(q.shape))
    if int(K) < 0:
        raise InputError("K", "a draft count >= 0", str(K))
    V = p.shape[0]
    target = make_chain(np.tile(p, (V + 1, 1)), "target_probs")
    draft = make_chain(np.tile(q, (V + 1, 1)), "draft_probs")
    return Problem(target, Drafter(draft), min(int(K) + 1, 4) if L is None else int(L), int(K), int(K))


def problem(scenario: Any) -> Problem:
    """A :class:`Problem` from a scenario name, a :class:`~specviz.prove.Scenario`, a Problem or a
    tuple (target chain, drafter, L, K, num_draft)."""
    if isinstance(scenario, Problem):
        return scenario
    if isinstance(scenario, tuple) and len(scenario) == 5 and isinstance(scenario[0], MarkovChain):
        target, drafter, L, K, num_draft = scenario
        nd = int(num_draft) if np.ndim(num_draft) == 0 else tuple(int(j) for j in num_draft)
        return Problem(target, drafter, int(L), int(K), nd)
    from . import prove  # the scenarios live with the proof tools

    sc = prove.get_scenario(scenario) if isinstance(scenario, str) else scenario
    if not isinstance(sc, prove.Scenario):
        raise InputError("scenario", "a scenario name, a Scenario, a Problem or (target, drafter, L, K, num_draft)",
                         type(scenario).__name__)  # fmt: skip
    target, draft = prove.scenario_chains(sc)
    num_draft: int | tuple[int, ...] = tuple(range(sc.K + 1)) if sc.ragged else sc.K
    return Problem(target, Drafter(draft, sc.drafter_mode), sc.L, sc.K, num_draft)  # type: ignore[arg-type]


def _resolve(verifier: Verifier | str) -> tuple[str, Verifier]:
    if isinstance(verifier, str):
        if verifier not in RULES:
            raise InputError("verifier", "a rule name: " + ", ".join(RULES), repr(verifier))
        return verifier, RULES[verifier]
    if not callable(verifier):
        raise InputError(
            "verifier", "a function with specviz.verify's signature, or a rule name", type(verifier).__name__
        )
    return getattr(verifier, "__name__", type(verifier).__name__), verifier


def judge(
    verifier: Verifier | str, scenario: Any, *, name: str | None = None, max_evals: int | None = None
) -> Judgement:
    """The exact law of ``verifier`` on ``scenario`` (see :func:`problem`), its TV from the
    target and its expected tokens per step; ``lossless`` is computed, never declared.

    Raises :class:`~specviz.InputError` naming ``verifier`` when the enumeration cannot vouch for
    the law (see :mod:`specviz.exact`): the court refuses rather than guesses.
    """
    label, fn = _resolve(verifier)
    pb = problem(scenario)
    kwargs = {} if max_evals is None else {"max_evals": int(max_evals)}
    res = verifier_law(fn, pb.target, pb.drafter, L=pb.L, num_draft=pb.num_draft, K=pb.K, **kwargs)
    want = pb.target.joint_law(pb.L)
    tv = 0.5 * float(np.abs(res.law - want).sum())
    counts = [pb.num_draft] if isinstance(pb.num_draft, int) else list(pb.num_draft)
    tokens = float(np.mean([res.expected_tokens[0, j] for j in counts]))  # row 0: the start context
    return Judgement(
        rule=name or label,
        law=res.law,
        target_law=want,
        tv_from_target=tv,
        expected_tokens_per_step=tokens,
        expected_accepted_per_step=tokens - 1.0,
        unresolved=float(res.unresolved),
        lossless=bool(tv <= LOSSLESS_TOL + res.unresolved),
    )


def compare(rules: Iterable[str | Verifier] | None, scenario: Any, *, max_evals: int | None = None) -> list[Judgement]:
    """One :class:`Judgement` per rule (default: every rule in :data:`RULES`), on one problem.

    A rule the court cannot judge within ``max_evals`` (or at all) gets a row with NaN numbers,
    ``lossless=False`` and the reason in ``refused``, so one refusal does not hide the others.
    """
    pb = problem(scenario)
    out = []
    for r in RULES if rules is None else rules:
        label, _fn = _resolve(r)
        try:
            out.append(judge(r, pb, max_evals=max_evals))
        except InputError as e:
            if e.argument != "verifier":
                raise
            nan = float("nan")
            shape = (pb.target.V,) * pb.L
            out.append(
                Judgement(label, np.full(shape, nan), pb.target.joint_law(pb.L), nan, nan, nan, nan, False, str(e))
            )
    return out


def table(judgements: Iterable[Judgement]) -> list[dict[str, Any]]:
    """Rows for display: rule, badge, TV, expected tokens and accepted drafts per step."""
    return [
        {
            "rule": j.rule,
            "verdict": j.badge,
            "TV from target": j.tv_from_target,
            "tokens per step": j.expected_tokens_per_step,
            "accepted drafts per step": j.expected_accepted_per_step,
            "unresolved mass": j.unresolved,
        }
        for j in judgements
    ]
