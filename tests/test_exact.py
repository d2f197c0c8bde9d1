"""Exact enumeration: the verifier's law of the first L tokens equals the target's to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

from specviz import InputError, Uniforms, verify
from specviz.bugs import BUGS
from specviz.exact import breakpoints, verifier_law
from specviz.markov import Drafter, random_chain

TOL = 1e-12


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(42)
    # V = 3 with one zero per row in each chain: supports differ between target and drafter.
    return random_chain(3, rng, zero_fraction=0.34), random_chain(3, rng, zero_fraction=0.34)


@pytest.mark.parametrize("mode", ["sample", "argmax"])
@pytest.mark.parametrize("num_draft", [0, 1, 2])
def test_exact_law_equals_target_with_ragged_rows(chains, mode, num_draft):
    target, draft = chains
    # Padded width K = 2: rows with fewer drafts carry wrong distributions in the padding.
    law = verifier_law(verify, target, Drafter(draft, mode), L=3, num_draft=num_draft, K=2, refine=True)
    assert np.abs(law - target.joint_law(3)).max() < TOL


def test_exact_law_with_dense_chains_and_four_tokens():
    rng = np.random.default_rng(7)
    target, draft = random_chain(4, rng), random_chain(4, rng)
    law = verifier_law(verify, target, Drafter(draft), L=3, num_draft=2)
    assert np.abs(law - target.joint_law(3)).max() < TOL


def test_negative_control_resample_from_p_is_not_exact(chains):
    target, draft = chains
    law = verifier_law(BUGS["resample_from_p"].verifier, target, Drafter(draft), L=3, num_draft=2, refine=True)
    tv = 0.5 * np.abs(law - target.joint_law(3)).sum()
    assert tv > 0.01, tv
    assert abs(law.sum() - 1) < TOL  # still a law, just the wrong one


def test_breakpoints_cover_acceptance_and_cdf_steps():
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    q = np.array([[0.25, 0.25, 0.5]])
    bps = breakpoints(p, q, np.array([2]))
    assert np.isclose(bps, 0.4).any()  # p(x)/q(x) = 0.2 / 0.5
    assert np.isclose(bps, 0.5).any() and np.isclose(bps, 0.8).any()  # CDF of p_0
    assert np.isclose(bps, 0.25 / 0.3).any()  # residual (0.25, 0.05, 0) / 0.3


def test_refine_catches_a_threshold_the_enumeration_does_not_list(chains):
    # Shifting the sample uniform by 0.01 moves every CDF step off the listed breakpoints.
    def shifted(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
        u = Uniforms(uniforms.accept, np.minimum(uniforms.sample + 0.01, 1 - 2**-53))
        return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=u)

    target, draft = chains
    with pytest.raises(InputError, match="verifier: expected an output constant on every box"):
        verifier_law(shifted, target, Drafter(draft), L=2, num_draft=1, refine=True)


def test_zero_drafts_with_default_width(chains):
    target, draft = chains
    law = verifier_law(verify, target, Drafter(draft), L=2, num_draft=0)
    assert np.abs(law - target.joint_law(2)).max() < TOL
