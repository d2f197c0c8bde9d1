"""Exact laws of an independent implementation of the rule, its correct variants and its mutants.

tests/user_verifiers.py is written apart from specviz.verify (its own inverse CDF, its own coin
handling), so its thresholds are not the ones exact.breakpoints lists for specviz. Every correct
variant must come out as the target's law to 1e-12 (or be refused, never a wrong law); every
mutant's exact law must agree with a simulation of that mutant (joint chi-square at level ALPHA,
fixed seed), and where the mutant moves the law by TV >= 0.01 the same samples must fail
against the target's law (negative control).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from specviz.proof.exact import verifier_law
from specviz.proof.markov import Drafter
from specviz.proof.scenarios import SCENARIOS, scenario_chains
from specviz.proof.simulate import generate
from specviz.proof.stats import joint_test
from tests import user_verifiers as uv

ALPHA = 1e-3
N = 30_000


def law_of(name: str, scenario: str):
    sc = SCENARIOS[scenario]
    target, dchain = scenario_chains(sc)
    drafter = Drafter(dchain, sc.drafter_mode)
    res = verifier_law(getattr(uv, name), target, drafter, L=sc.L, num_draft=range(sc.K + 1) if sc.ragged else sc.K,
                       K=sc.K)  # fmt: skip
    return sc, target, drafter, res


def test_correct_variants_are_exact_on_the_bonus_scenario():
    # 2u mod 1 and 1 - u put the acceptance thresholds where exact.breakpoints lists none.
    for name in ("correct_doubled_u", "correct_one_minus_u"):
        sc, target, _, res = law_of(name, "bonus")
        assert res.unresolved < 1e-12
        assert np.abs(res.law - target.joint_law(sc.L)).max() < 1e-12, name


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("name", list(uv.VARIANTS))
def test_every_correct_variant_is_exact(name, scenario):
    sc, target, _, res = law_of(name, scenario)
    assert np.abs(res.law - target.joint_law(sc.L)).max() < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("name", [m.name for m in uv.MUTANTS])
def test_every_mutant_law_agrees_with_its_simulation(name, scenario):
    sc, target, drafter, res = law_of(name, scenario)
    sim = generate(getattr(uv, name), target, drafter, n=N, L=sc.L, K=sc.K, rng=np.random.default_rng(17),
                   ragged=sc.ragged, expected=np.nan_to_num(res.expected_tokens))  # fmt: skip
    fit = joint_test(sim.sequences, res.law, alpha=ALPHA)
    assert fit.passed, (fit.statistic, fit.critical_value)
    gap, se = sim.tokens_per_round - sim.expected_tokens_per_round, sim.tokens_per_round_se
    assert abs(gap) <= norm.isf(ALPHA / 2) * se + 1e-12, (gap, se)  # exact tokens per verification, too
    if 0.5 * np.abs(res.law - target.joint_law(sc.L)).sum() >= 0.01:
        control = joint_test(sim.sequences, target.joint_law(sc.L), alpha=ALPHA)
        assert not control.passed, (control.statistic, control.critical_value)
