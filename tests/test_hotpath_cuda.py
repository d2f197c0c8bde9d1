"""CUDA returns NumPy's tokens bit for bit, for every verifier (skips cleanly without a GPU).

Run by ``benchmarks/gpu_check.sh`` on a machine with a GPU. Each public verifier, and each
deliberate bug that is the same code with one step swapped, is called on NumPy arrays and on CUDA
tensors with the same explicit uniforms: acceptance is the same IEEE float64 arithmetic and the
draw sums exact integers, so every output field must be equal, and the CUDA outputs must stay on
the device. Sizes cover the one-level draw (V <= 256), the two-level draw (V = 300, 9000) and a
real vocabulary (V = 128256), ragged rows, zeros, and the deterministic drafter.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import random_batch

from specviz import InputError, Uniforms, verify, verify_flat, verify_greedy
from specviz.verifiers.block import verify_block
from specviz.verifiers.layout import padded_to_flat

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

SIZES = [(257, 4, 5), (99, 3, 300), (31, 4, 9000), (7, 4, 128256)]  # (B, K, V)


def cuda(*arrays):
    return [None if a is None else torch.as_tensor(np.asarray(a), device="cuda") for a in arrays]


def assert_same(cpu, gpu, label):
    for name, x, y in zip(cpu._fields, cpu, gpu, strict=True):
        assert y.device.type == "cuda", (label, name)
        np.testing.assert_array_equal(np.asarray(x), y.cpu().numpy(), err_msg=f"{label}: {name}")


def case(B, K, V, dtype=np.float32):
    rng = np.random.default_rng(B * 1000 + V)
    target, draft, tokens, num = random_batch(rng, B, K, V, zero_fraction=0.2, dtype=dtype)
    ua, us = rng.random((B, K)), rng.random(B)
    ua[rng.random((B, K)) < 0.3] = 0.0  # some rows accept everything: bonus rows
    return target, draft, tokens, num, ua, us


@pytest.mark.parametrize(("B", "K", "V"), SIZES, ids=[f"V{s[2]}" for s in SIZES])
@pytest.mark.parametrize("deterministic", [False, True], ids=["sampled_q", "one_hot_q"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_verify_and_verify_flat_on_cuda_equal_numpy(B, K, V, deterministic, dtype):
    target, draft, tokens, num, ua, us = case(B, K, V, dtype)
    if deterministic:
        draft = None
    u = Uniforms(ua, us)
    for validate in (True, False):
        cpu = verify(target, draft, tokens, num, uniforms=u, validate=validate)
        gpu = verify(*cuda(target, draft, tokens, num), uniforms=Uniforms(*cuda(ua, us)), validate=validate)
        assert_same(cpu, gpu, f"verify validate={validate}")
    flat = padded_to_flat(target, draft, tokens, num)
    valid = np.arange(K)[None, :] < num[:, None]
    cpu = verify_flat(*flat, uniforms=Uniforms(ua[valid], us))
    gpu = verify_flat(*cuda(*flat), uniforms=Uniforms(*cuda(ua[valid], us)))
    assert_same(cpu, gpu, "verify_flat")


def test_greedy_and_block_verifiers_on_cuda_equal_numpy():
    B, K, V = 99, 4, 300
    target, draft, tokens, num, ua, us = case(B, K, V)
    assert_same(verify_greedy(target, tokens, num), verify_greedy(*cuda(target, tokens, num)), "greedy")
    cpu = verify_block(target, draft, tokens, num, uniforms=Uniforms(ua, us))
    gpu = verify_block(*cuda(target, draft, tokens, num), uniforms=Uniforms(*cuda(ua, us)))
    assert_same(cpu, gpu, "verify_block")


def test_every_rule_bug_on_cuda_equals_numpy():
    # The bugs that are the reference with one step swapped run the reference on CUDA tensors (it
    # copies them to the host): the same tokens as on NumPy inputs. The pipeline mistakes that first
    # reprocess p or q (exp, powers) need not agree in the last bit.
    from specviz.proof.bugs import BUGS
    from specviz.verifiers.reference import swapped_step

    B, K, V = 64, 3, 300
    target, draft, tokens, num, ua, us = case(B, K, V)
    rule_bugs = {
        name: bug
        for name, bug in BUGS.items()
        if swapped_step(bug.verifier) is not None
    }
    assert len(rule_bugs) >= 5
    for name, bug in rule_bugs.items():
        cpu = bug.verifier(target, draft, tokens, num, uniforms=Uniforms(ua, us))
        gpu = bug.verifier(*cuda(target, draft, tokens, num), uniforms=Uniforms(*cuda(ua, us)))
        assert_same(cpu, gpu, name)


def test_guards_raise_on_cuda_as_on_numpy():
    B, K, V = 8, 2, 9000
    target, draft, tokens, num, ua, us = case(B, K, V)
    target[:, :, :256] = np.nan
    for args in ((target, draft, tokens, num, ua, us), cuda(target, draft, tokens, num, ua, us)):
        with pytest.raises(InputError, match="target_probs: expected finite"):
            verify(*args[:4], uniforms=Uniforms(*args[4:]), validate=False)
