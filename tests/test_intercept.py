"""Interception: the probes reach verifiers that draw their own randomness (specviz.proof.intercept, .reach)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from probe_subjects import ignores_uniforms, torch_own, toy

from specviz import verify
from specviz.proof import intercept, reach
from specviz.proof.intercept import FromUniforms, Supplied, supplying
from specviz.proof.probes import NUMPY64, zero_coin


def _by_name(probes: list) -> dict:
    return {p.name: p for p in probes}


def test_supplied_values_land_on_the_dtype_grid_and_roles_follow_the_shapes() -> None:
    accept, sample = np.array([[0.0, 1.0 - 2.0**-53], [0.5, 0.25]]), np.array([1.0 - 2.0**-53, 0.0])
    with supplying(FromUniforms(accept, sample, vocab=7)) as rec:
        coins = torch.rand(2, 2)  # float32: 1 - 2^-53 floors to 1 - 2^-24, the largest float32 uniform
        u = np.random.default_rng().random(2)
        e = torch.empty(2, 7, dtype=torch.float64).exponential_()
        extra = torch.rand(3)
    assert coins.dtype == torch.float32
    assert coins.tolist() == [[0.0, 1.0 - 2.0**-24], [0.5, 0.25]]
    assert u.tolist() == [1.0 - 2.0**-53, 0.0]
    assert e.shape == (2, 7) and bool((e >= 0).all())
    assert [d.role for d in rec.draws] == ["coins", "sample", "vocab", "unmatched"]
    assert [d.dtype for d in rec.draws][:2] == ["float32", "float64"] and len(extra) == 3
    assert rec.foreign == []


def test_interception_restores_torch_and_numpy_on_exit_and_on_an_exception() -> None:
    before = (torch.rand, torch.rand_like, torch.multinomial, np.random.random, np.random.default_rng,
              np.random.uniform)  # fmt: skip
    assert "uniform_" not in torch.Tensor.__dict__ and "exponential_" not in torch.Tensor.__dict__
    with pytest.raises(RuntimeError, match="inside"):
        with supplying(FromUniforms(np.zeros((1, 1)), np.zeros(1))):
            assert torch.rand is not before[0] and np.random.random is not before[3]
            raise RuntimeError("inside")
    after = (torch.rand, torch.rand_like, torch.multinomial, np.random.random, np.random.default_rng,
             np.random.uniform)  # fmt: skip
    assert all(a is b for a, b in zip(before, after, strict=True))
    assert "uniform_" not in torch.Tensor.__dict__ and "exponential_" not in torch.Tensor.__dict__
    assert "multinomial" not in torch.Tensor.__dict__
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(a, torch.rand(3))  # the real generator again
    assert not isinstance(np.random.default_rng(0), intercept.SuppliedGenerator)


def test_draws_interception_cannot_see_are_reported() -> None:
    from torch import randn  # a source it does not cover: the global generator moves behind its back

    with supplying(FromUniforms(np.zeros((1, 1)), np.zeros(1))) as rec:
        randn(2)
    assert rec.foreign == ["torch's global generator advanced: draws not recognised"]


def test_torch_rand_coin_with_leq_fails_coin_zero_as_support_and_lt_passes() -> None:
    leq = _by_name(reach.run_all(torch_own(leq=True)))
    lt = _by_name(reach.run_all(torch_own(leq=False)))
    assert leq["interception"].verdict == "info" and "torch.rand (4, 1) float32 as coins" in leq["interception"].detail
    assert leq["zero_coin"].verdict == "FAIL" and leq["zero_coin"].kind == "support"
    detail = leq["zero_coin"].detail  # the rate of the coin dtype it drew (float32), not of the tables (float64)
    assert "coin 0.0 accepts draft 3 with p = 0 (2^-24 per float32 coin): tokens [3, 1]" in detail, detail
    assert "2^-53 per draw" not in detail
    assert lt["zero_coin"].verdict == "ok" and lt["zero_coin"].kind == "support"
    assert not [p.name for p in lt.values() if p.failed and p.kind == "support"]
    # Before interception the same verifier got one line: "skipped all: the verifier takes no uniforms=".
    assert "all" not in leq


def test_a_verifier_that_ignores_its_uniforms_is_found_and_probed_through_interception() -> None:
    mode, why = reach.calling_mode(ignores_uniforms, NUMPY64)
    assert mode == "ignores" and "draws its own randomness" in why
    assert reach.calling_mode(verify, NUMPY64)[0] == "uniforms"
    assert reach.calling_mode(toy(), NUMPY64)[0] == "uniforms"
    got = _by_name(reach.run_all(ignores_uniforms))
    assert got["uniforms"].verdict == "info" and "treated as drawing its own randomness" in got["uniforms"].detail
    # Probed on supplied draws, the engine behind **kwargs passes what it passes with explicit uniforms
    # (on its own draws, batch_invariance failed: each call drew fresh uniforms).
    assert got["batch_invariance"].verdict == "ok" and got["zero_coin"].verdict == "ok"
    assert not [p.name for p in got.values() if p.failed]


def test_unmatched_draws_skip_the_probes_that_depend_on_them() -> None:
    def row_by_row(target_probs, draft_probs, draft_tokens, num_draft, *, rng=None):  # scalar draws per row
        B = np.asarray(draft_tokens).shape[0]
        for _ in range(B):
            np.random.random()  # noqa: NPY002 - the legacy global generator, one scalar a row
        return verify(target_probs, draft_probs, draft_tokens, num_draft, rng=np.random.default_rng(0))

    got = _by_name(reach.run_all(row_by_row))
    assert got["zero_coin"].verdict == "skipped" and "interception could not apply" in got["zero_coin"].detail
    assert got["nan_row"].verdict == "ok"  # refusing a NaN row does not depend on the draws


def test_supplied_is_a_verifier_with_uniforms_to_the_existing_probes() -> None:
    w = Supplied(torch_own(leq=True))
    assert zero_coin(w, NUMPY64).failed
    assert {d.role for d in w.draws} == {"coins", "sample"} and w.problems == []


def test_matched_supply_qualifies_coins_and_sample_draws_but_not_a_race() -> None:
    assert reach.matched_supply(torch_own(), NUMPY64) is not None
    assert reach.matched_supply(torch_own(sampler="race"), NUMPY64) is None


def test_prove_shipped_pairs_a_verifier_whose_draws_match_and_samples_one_whose_draws_do_not() -> None:
    from specviz.proof.handover import CallSpec
    from specviz.proof.ship import prove_shipped

    # The engine behind **kwargs on a fresh generator: coins and sample matched, so the paired test runs.
    paired = prove_shipped(ignores_uniforms, V=1000, K=4, spec=CallSpec("float64", "numpy"), tv=0.01)
    assert paired.verdict == "PASS" and paired.paired is not None and paired.paired.mismatches == 0, paired.reason
    assert paired.blackbox is None
    # A race over the vocabulary cannot be matched to the reference's inverse CDF: the black-box tests.
    race = prove_shipped(torch_own(sampler="race"), V=300, K=2, spec=CallSpec("float32", "torch"), tv=0.01,
                         blackbox_rows=20_000)  # fmt: skip
    assert race.paired is None and race.blackbox is not None
    assert "could not be matched to the reference" in race.reason, race.reason
