"""The 2026 probe classes: each fails a one-line defect of its class and passes the engine (specviz.verify)."""

from __future__ import annotations

import pytest
from probe_subjects import torch_own, toy

from specviz import verify, verify_flat
from specviz.proof import probes_2026 as P
from specviz.proof.handover import CallSpec
from specviz.proof.intercept import Supplied
from specviz.proof.probes import NUMPY64

TORCH32 = CallSpec("float32", "torch")

CASES = [  # (probe, the one-line defect of its class, the kind its failure is)
    (P.q_above_one, "no_fallback", "support"),
    (P.inf_in_q, "no_finite_check", "policy"),
    (P.tile_tail, "clamp_count", "support"),
    (P.padded_vocab, "uniform_fallback", "support"),
    (P.far_tail, "f32_cumsum", "law"),
    (P.q_other_logits, "bf16_q", "law"),
]


@pytest.mark.parametrize(("probe", "defect", "kind"), CASES, ids=[c[1] for c in CASES])
def test_a_one_line_defect_fails_its_probe_and_the_rule_passes(probe, defect, kind) -> None:
    bad = probe(toy(defect), NUMPY64)
    assert bad.verdict == "FAIL" and bad.kind == kind, bad
    good = probe(toy(), NUMPY64)  # the same code with that line right
    assert not good.failed, good


SPECS = [NUMPY64, TORCH32, CallSpec("bfloat16", "torch"), CallSpec("float32", "numpy", "cpu", "flat")]


@pytest.mark.parametrize("spec", SPECS, ids=["float64-numpy", "float32-torch", "bfloat16-torch", "float32-flat"])
@pytest.mark.parametrize("probe", P.PROBES_2026, ids=[p.__name__ for p in P.PROBES_2026])
def test_the_engine_passes_every_2026_probe(probe, spec) -> None:
    got = probe(verify_flat if spec.layout == "flat" else verify, spec)
    assert got.verdict in ("ok", "info"), got


def test_far_tail_catches_a_float32_exponential_race_through_interception() -> None:
    bad = P.far_tail(Supplied(torch_own(sampler="race_f32")), NUMPY64)
    assert bad.verdict == "FAIL" and bad.kind == "law" and "a race over the vocabulary" in bad.detail
    assert "come out at 0 x their rate" in bad.detail
    good = P.far_tail(Supplied(torch_own(sampler="race")), NUMPY64)  # exponential_ in float64
    assert good.verdict == "ok", good


def test_the_design_brief_verifier_fails_the_tile_tail_with_its_clamp() -> None:
    # The brief's inverse CDF clamps the count to V - 1: with a zero tail that id has p = 0.
    got = P.tile_tail(toy("clamp_count"), NUMPY64)
    assert "token 128 with p = 0" in got.detail


def test_far_tail_is_skipped_in_float16_which_cannot_hold_its_tokens() -> None:
    assert P.far_tail(verify, CallSpec("float16", "numpy")).verdict == "skipped"
