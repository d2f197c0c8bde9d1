"""Exact enumeration: the verifier's law of the first L tokens, never silently wrong.

Each law here is checked against something computed another way: the target's joint law (for
lossless verifiers), a closed form for one position, or a chi-square against simulation with a
fixed seed and a stated level, each with a negative control that must fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from specviz import InputError, Uniforms, verify
from specviz.proof.bugs import BUGS
from specviz.proof.exact import ExactLaw, breakpoints, verifier_law
from specviz.proof.markov import Drafter, make_chain, random_chain
from specviz.proof.scenarios import HOME, SCENARIOS, scenario_chains
from specviz.proof.simulate import generate
from specviz.proof.stats import joint_test
from specviz.proof.theory import chain_expected_tokens

TOL = 1e-12
ALPHA = 1e-3  # level of the chi-square checks: a false alarm in 1 of 1000 seeds


@pytest.fixture(scope="module")
def chains():
    rng = np.random.default_rng(42)
    # V = 3 with one zero per row in each chain: supports differ between target and drafter.
    return random_chain(3, rng, zero_fraction=0.34), random_chain(3, rng, zero_fraction=0.34)


def counts_of(sc):
    """prove's draft counts: every row K, or uniform on 0..K each round (generate(ragged=True))."""
    return range(sc.K + 1) if sc.ragged else sc.K


def tv(a, b):
    return 0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum())


@pytest.mark.parametrize("mode", ["sample", "argmax"])
@pytest.mark.parametrize("num_draft", [0, 1, 2])
def test_exact_law_equals_target_with_ragged_rows(chains, mode, num_draft):
    target, draft = chains
    # Padded width K = 2: rows with fewer drafts carry wrong distributions in the padding.
    res = verifier_law(verify, target, Drafter(draft, mode), L=3, num_draft=num_draft, K=2)
    assert isinstance(res, ExactLaw) and res.unresolved == 0
    assert np.abs(res.law - target.joint_law(3)).max() < TOL


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_correct_verifier_on_every_prove_scenario(name):
    sc = SCENARIOS[name]
    target, dchain = scenario_chains(sc)
    drafter = Drafter(dchain, sc.drafter_mode)
    res = verifier_law(verify, target, drafter, L=sc.L, num_draft=counts_of(sc), K=sc.K)
    assert res.law.shape == (sc.V,) * sc.L and res.unresolved < TOL and res.audited >= 4096
    assert np.abs(res.law - target.joint_law(sc.L)).max() < TOL
    # Tokens per verification, by context and draft count, against the closed-form recursion.
    theory = chain_expected_tokens(target, drafter, sc.K)
    met = np.isfinite(res.expected_tokens)
    assert met[0].any() and met[1:].any()  # the start and at least one later context
    assert np.abs(res.expected_tokens[met] - theory[met]).max() < 1e-12


def test_negative_control_resample_from_p_is_not_exact(chains):
    target, draft = chains
    law = verifier_law(BUGS["resample_from_p"].verifier, target, Drafter(draft), L=3, num_draft=2).law
    assert tv(law, target.joint_law(3)) > 0.01
    assert abs(law.sum() - 1) < TOL  # still a law, just the wrong one


def test_breakpoints_cover_acceptance_and_cdf_steps():
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    q = np.array([[0.25, 0.25, 0.5]])
    bps = breakpoints(p, q, np.array([2]))
    assert np.isclose(bps, 0.4).any()  # p(x)/q(x) = 0.2 / 0.5
    assert np.isclose(bps, 0.5).any() and np.isclose(bps, 0.8).any()  # CDF of p_0
    assert np.isclose(bps, 0.25 / 0.3).any()  # residual (0.25, 0.05, 0) / 0.3


# Lossless verifiers whose thresholds are not the listed breakpoints: the enumeration used to
# measure the first one's law off by TV 0.09 with its default settings.
def coin_times_three(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
    u = Uniforms((uniforms.accept * 3) % 1, np.nextafter(1 - uniforms.sample, 0))  # both still uniform
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=u)


def coin_flipped(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
    u = Uniforms(np.nextafter(1 - uniforms.accept, 0), uniforms.sample)
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=u)


@pytest.mark.parametrize("fn", [coin_times_three, coin_flipped])
def test_rescaled_coin_lossless_verifier_gets_the_target_law(chains, fn):
    target, draft = chains
    res = verifier_law(fn, target, Drafter(draft), L=3, num_draft=2)
    assert res.unresolved < TOL
    assert np.abs(res.law - target.joint_law(3)).max() < TOL
    sc = SCENARIOS["one_draft"]  # prove's own chains, K = 1, L = 3
    target, dchain = scenario_chains(sc)
    res = verifier_law(fn, target, Drafter(dchain), L=sc.L, num_draft=sc.K)
    assert np.abs(res.law - target.joint_law(sc.L)).max() < TOL


STRIPE = (0.41, 0.414)  # narrower than the line searches' spacing, and no listed breakpoint bounds it


def stripe_coin(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
    """Also accepts a draft the target can produce when its coin lands in STRIPE (a lossy rule)."""
    a = np.array(uniforms.accept, dtype=np.float64)
    a = np.where((a >= STRIPE[0]) & (a < STRIPE[1]), 0.0, a)
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=Uniforms(a, uniforms.sample))


def test_a_piece_the_probes_miss_is_found_by_the_audit():
    # p(0) / q(0) = 1/6 < 0.41: token 0 is accepted with probability 1/6 + 0.004 instead of 1/6.
    p, q = np.array([0.1, 0.5, 0.4]), np.array([0.6, 0.1, 0.3])
    target, draft = make_chain(np.tile(p, (4, 1))), make_chain(np.tile(q, (4, 1)))
    ratio = np.minimum(1, p / q)
    accepted = q * (ratio + np.maximum(0, STRIPE[1] - np.maximum(STRIPE[0], ratio)))
    residual = np.maximum(p - q, 0) / np.maximum(p - q, 0).sum()
    closed = accepted + (1 - accepted.sum()) * residual
    res = verifier_law(stripe_coin, target, Drafter(draft), L=1, num_draft=1)
    np.testing.assert_allclose(res.law, closed, atol=TOL, rtol=0)
    assert res.audited >= 4096 and res.unresolved < TOL
    # Negative control: without the audit, the probes and line searches alone miss the stripe.
    blind = verifier_law(stripe_coin, target, Drafter(draft), L=1, num_draft=1, audit=0)
    assert blind.audited == 0 and np.abs(blind.law - closed).max() > 1e-3


def own_randomness(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=np.random.default_rng())


def seeded_randomness(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
    return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=np.random.default_rng(0))


@pytest.mark.parametrize("fn", [own_randomness, seeded_randomness])
def test_verifier_that_ignores_its_uniforms_is_refused(chains, fn):
    # The seeded one returns the same tokens for the same batch: only calling it again with the
    # rows in another order shows that a row's output is not a function of its own uniforms.
    target, draft = chains
    with pytest.raises(InputError, match="verifier: expected a pure function of its uniforms="):
        verifier_law(fn, target, Drafter(draft), L=2, num_draft=1)


def averaged_coin(target_probs, draft_probs, draft_tokens, num_draft, *, uniforms):
    # Coin 0 is (u_0 + u_1) / 2: a threshold on a sum of uniforms, which no cut along one uniform resolves.
    a = np.array(uniforms.accept, dtype=np.float64)
    a[:, 0] = 0.5 * (a[:, 0] + a[:, 1])
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=Uniforms(a, uniforms.sample))


def test_decision_on_two_uniforms_is_refused_not_guessed(chains, monkeypatch):
    target, draft = chains
    with pytest.raises(InputError, match="verifier: expected boxes resolved within max_evals = 200,000"):
        verifier_law(averaged_coin, target, Drafter(draft), L=2, num_draft=2, max_evals=200_000)
    # With a cap on the cuts per box instead, the boxes left over are reported and refused.
    monkeypatch.setattr("specviz.proof.boxes.MAX_DEPTH", 4)  # the box search lives in boxes
    with pytest.raises(InputError, match=r"verifier: expected an output the enumeration resolves up to tol = 1e-09"):
        verifier_law(averaged_coin, target, Drafter(draft), L=2, num_draft=2)
    res = verifier_law(averaged_coin, target, Drafter(draft), L=2, num_draft=2, tol=1.0)
    assert res.unresolved > 1e-3  # the bound is stated, and it is not small


SCALE = 0.9  # the lossy verifier accepts x iff u < SCALE * p(x) / q(x): a threshold nobody lists


def scaled_coin(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None, uniforms=None, validate=True):
    """Accept iff u * q < SCALE * p: u / SCALE can reach 1, so validation of the uniforms is off."""
    if uniforms is None:
        B, K = np.shape(draft_tokens)
        uniforms = Uniforms(rng.random((B, K)), rng.random(B))
    u = Uniforms(np.asarray(uniforms.accept) / SCALE, uniforms.sample)
    return verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms=u, validate=False)


@pytest.mark.parametrize("K", [1, 2])
def test_lossy_verifier_with_an_unlisted_threshold_gets_its_closed_form(chains, K):
    # First token: x drafted and accepted w.p. min(q(x), SCALE p(x)); otherwise the residual
    # max(0, p - q) / sum max(0, p - q) (the verifier's residual is unchanged).
    target, draft = chains
    p, q = target.table[0], draft.table[0]
    accepted = np.minimum(q, SCALE * p)
    residual = np.maximum(p - q, 0) / np.maximum(p - q, 0).sum()
    closed = accepted + (1 - accepted.sum()) * residual
    res = verifier_law(scaled_coin, target, Drafter(draft), L=1, num_draft=K)
    assert res.unresolved < TOL
    np.testing.assert_allclose(res.law, closed, atol=TOL, rtol=0)
    assert tv(closed, p) > 0.01  # the check can fail: the lossy law is not the target's


def test_lossy_verifier_joint_law_agrees_with_simulation():
    rng = np.random.default_rng(3)
    target, draft = random_chain(3, rng), random_chain(3, rng)
    law = verifier_law(scaled_coin, target, Drafter(draft), L=3, num_draft=2).law
    sim = generate(scaled_coin, target, Drafter(draft), n=60_000, L=3, K=2, rng=np.random.default_rng(11))
    fit = joint_test(sim.sequences, law, alpha=ALPHA)
    assert fit.passed, (fit.statistic, fit.critical_value)
    control = joint_test(sim.sequences, target.joint_law(3), alpha=ALPHA)  # negative control: must fail
    assert not control.passed, (control.statistic, control.critical_value, tv(law, target.joint_law(3)))


Z_CRIT = float(norm.isf(ALPHA / 2))  # two-sided critical value of the tokens-per-verification z-test


def tokens_z(sim) -> float:
    """Measured mean tokens per verification against the mean of the exact table over the rounds run.

    The table passes through np.nan_to_num: its NaN cells are (context, count) pairs no round can
    meet, and generate weighs every cell by its count (0 * NaN would be NaN). With no spread at all
    (every round emits the same count) the two must be equal."""
    gap = sim.tokens_per_round - sim.expected_tokens_per_round
    if sim.tokens_per_round_se == 0:
        return 0.0 if abs(gap) < 1e-12 else float("inf")
    return gap / sim.tokens_per_round_se


def sim_check(bug_name: str, scenario: str, n: int, seed: int, control: bool = True) -> tuple[float, float]:
    """The bug's exact law in a prove scenario against a simulation of it: (TV to target, fit p-value).

    ``control``: the same samples must fail against the target's law (only when the bug moves it)."""
    sc, bug = SCENARIOS[scenario], BUGS[bug_name]
    target, dchain = scenario_chains(sc)
    drafter = Drafter(dchain, bug.drafter_mode or sc.drafter_mode)
    res = verifier_law(bug.verifier, target, drafter, L=sc.L, num_draft=counts_of(sc), K=sc.K)
    assert res.unresolved < TOL and abs(res.law.sum() - 1) < TOL
    sim = generate(bug.verifier, target, drafter, n=n, L=sc.L, K=sc.K, rng=np.random.default_rng(seed),
                   ragged=sc.ragged, expected=np.nan_to_num(res.expected_tokens))  # fmt: skip
    fit = joint_test(sim.sequences, res.law, alpha=ALPHA)
    assert fit.passed, (bug_name, scenario, fit.statistic, fit.critical_value)
    assert abs(tokens_z(sim)) <= Z_CRIT, (bug_name, scenario, tokens_z(sim))  # tokens per verification too
    if control:
        neg = joint_test(sim.sequences, target.joint_law(sc.L), alpha=ALPHA)  # negative control: must fail
        assert not neg.passed, (bug_name, scenario, neg.statistic, neg.critical_value)
    return tv(res.law, target.joint_law(sc.L)), fit.p_value


LAW_CHANGING = [b.name for b in BUGS.values() if b.changes_law]
FAST = ["shared_uniform", "wrong_bonus_row", "greedy_draft_sampled_q"]  # joint-only, ragged, pipeline


@pytest.mark.parametrize("name", FAST)
def test_bug_law_in_its_home_scenario_agrees_with_simulation(name):
    distance, _ = sim_check(name, HOME.get(name, ("reference",))[0], n=20_000, seed=1)
    assert distance > 0.01


@pytest.mark.slow
@pytest.mark.parametrize("name", LAW_CHANGING)
@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "greedy"])
def test_every_bug_law_in_every_scenario_agrees_with_simulation(name, scenario):
    sc, bug = SCENARIOS[scenario], BUGS[name]
    target, dchain = scenario_chains(sc)
    drafter = Drafter(dchain, bug.drafter_mode or sc.drafter_mode)
    law = verifier_law(bug.verifier, target, drafter, L=sc.L, num_draft=counts_of(sc), K=sc.K).law
    # A law within TV 0.01 of the target gets no negative control at this N (it could pass by chance).
    sim_check(name, scenario, n=100_000, seed=2, control=tv(law, target.joint_law(sc.L)) >= 0.01)


def test_rounds_that_emit_nothing_are_retried_like_generate(chains):
    # no_bonus emits nothing in a round with no draft; generate then drafts again. The law of what
    # does come out is still the target's, and tokens per verification lose the bonus.
    target, draft = chains
    drafter = Drafter(draft)
    res = verifier_law(BUGS["no_bonus"].verifier, target, drafter, L=3, num_draft=[0, 1, 2])
    assert np.abs(res.law - target.joint_law(3)).max() < TOL
    theory = chain_expected_tokens(target, drafter, 2, bonus=False)
    met = np.isfinite(res.expected_tokens)
    assert met[:, 0].any() and np.abs(res.expected_tokens[met] - theory[met]).max() < 1e-12
    assert (res.expected_tokens[met[:, 0], 0] == 0).all()
    with pytest.raises(InputError, match="verifier: expected at least one token emitted per round"):
        verifier_law(BUGS["no_bonus"].verifier, target, drafter, L=2, num_draft=0)


def test_exact_tokens_per_verification_agree_with_simulation():
    # no_bonus keeps the law but not the tokens: its exact table must fit its simulation, and the
    # correct rule's table (the closed form with the bonus) must not (negative control).
    sc = SCENARIOS["reference"]
    target, dchain = scenario_chains(sc)
    drafter = Drafter(dchain)
    fn = BUGS["no_bonus"].verifier
    res = verifier_law(fn, target, drafter, L=sc.L, num_draft=sc.K)
    tables = np.nan_to_num(res.expected_tokens), chain_expected_tokens(target, drafter, sc.K)
    runs = [generate(fn, target, drafter, n=20_000, L=sc.L, K=sc.K, rng=np.random.default_rng(4), expected=table)
            for table in tables]  # fmt: skip
    assert abs(tokens_z(runs[0])) <= Z_CRIT, tokens_z(runs[0])
    assert abs(tokens_z(runs[1])) > Z_CRIT, tokens_z(runs[1])


def test_zero_drafts_with_default_width(chains):
    target, draft = chains
    res = verifier_law(verify, target, Drafter(draft), L=2, num_draft=0)
    assert np.abs(res.law - target.joint_law(2)).max() < TOL


def test_bad_arguments_name_themselves(chains):
    target, draft = chains
    with pytest.raises(InputError, match=r"num_draft: expected draft counts in \[0, K = 1\]"):
        verifier_law(verify, target, Drafter(draft), L=2, num_draft=2, K=1)
    with pytest.raises(InputError, match="num_draft: expected at least one draft count"):
        verifier_law(verify, target, Drafter(draft), L=2, num_draft=[])
    with pytest.raises(InputError, match=r"L: expected a law of at most 16,777,216 cells V\*\*L"):
        verifier_law(verify, target, Drafter(draft), L=16, num_draft=1)
    with pytest.raises(InputError, match="L: expected at least 1 token"):
        verifier_law(verify, target, Drafter(draft), L=0, num_draft=1)
    with pytest.raises(InputError, match="audit: expected a non-negative number"):
        verifier_law(verify, target, Drafter(draft), L=2, num_draft=1, audit=-1)
    with pytest.raises(InputError, match="drafter: expected a chain over V = 3 tokens"):
        verifier_law(verify, target, Drafter(random_chain(4, np.random.default_rng(0))), L=2, num_draft=1)
