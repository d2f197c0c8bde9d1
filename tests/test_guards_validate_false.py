"""What every verifier refuses whatever `validate` says (found by an outside review).

verify raises on an out-of-range draft id and on a negative entry in a row it draws from even
with validate=False; block verification, sample-and-match and the tree chain must do the same,
and verify must do it on the small-vocabulary path too, when an empty residual falls back to p.
"""

from __future__ import annotations

import numpy as np
import pytest

import specviz
from specviz.errors import InputError
from specviz.verifiers.block import verify_block
from specviz.verifiers.sample_match import verify_sample_match
from specviz.verifiers.tree import verify_tree_chain

torch = pytest.importorskip("torch")

VERIFIERS = [specviz.verify, verify_block, verify_sample_match, verify_tree_chain]
U = (np.array([[0.3]]), np.array([0.5]))


def call(fn, P, Q, x, kind):
    if kind == "torch":
        P, Q, x = torch.tensor(P), torch.tensor(Q), torch.tensor(x)
        u = (torch.tensor(U[0]), torch.tensor(U[1]))
        return fn(P, Q, x, torch.tensor([1]), uniforms=u, validate=False)
    return fn(P, Q, x, np.array([1]), uniforms=U, validate=False)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("fn", VERIFIERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad_id", [-1, 4])
def test_out_of_range_draft_ids_raise_with_validate_false(fn, bad_id, kind):
    P, Q = np.full((1, 2, 4), 0.25), np.full((1, 1, 4), 0.25)
    with pytest.raises(InputError, match="^draft_tokens"):
        call(fn, P, Q, np.array([[bad_id]]), kind)
    res = call(fn, P, Q, np.array([[2]]), kind)  # control: an id in range is verified
    assert int(np.asarray(res.num_tokens)[0]) >= 1


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("fn", VERIFIERS, ids=lambda f: f.__name__)
def test_a_negative_entry_in_the_bonus_row_raises_with_validate_false(fn, kind):
    P = np.full((1, 2, 4), 0.25)
    P[0, 1] = [0.6, 0.25, 0.25, -0.1]  # still sums to 1: only the sign is wrong
    Q = P[:, :1].copy()  # q = p at the draft: accepted, then the bonus is drawn from row 1
    with pytest.raises(InputError, match="^target_probs"):
        call(fn, P, Q, np.array([[0]]), kind)
    good = P.copy()
    good[0, 1] = [0.5, 0.25, 0.25, 0.0]  # control
    assert int(np.asarray(call(fn, good, Q, np.array([[0]]), kind).num_tokens)[0]) >= 1


@pytest.mark.parametrize("V", [4, 300])  # one block (V <= 256) and the two-level search
def test_an_empty_residual_falls_back_to_a_p_that_is_checked(V):
    p, q = np.zeros(V), np.zeros(V)
    p[:4], q[:4] = [0.5, 0.5, 0.7, -0.7], [0.9, 0.5, 0.7, -0.1]  # q >= p everywhere: no residual mass
    P, Q = np.stack([p, np.full(V, 1 / V)])[None], q[None, None]
    with pytest.raises(InputError, match="^target_probs: expected non-negative"):
        specviz.verify(P, Q, np.array([[0]]), np.array([1]), uniforms=(np.array([[0.99]]), np.array([0.5])),
                       validate=False)  # fmt: skip
