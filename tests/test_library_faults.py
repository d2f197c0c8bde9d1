"""Library faults of issue 21, point 7: a greedy row with no finite logit, tensors without data."""

from __future__ import annotations

import numpy as np
import pytest

from specviz import verify, verify_greedy
from specviz.errors import InputError

torch = pytest.importorskip("torch")


def test_verify_greedy_rejects_a_row_of_all_minus_inf_it_reads():
    T = np.log(np.array([[[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]]]))  # (1, 2, 3)
    T[0, 1] = -np.inf  # the bonus row: read when the draft is accepted
    with pytest.raises(InputError, match=r"^target: expected a finite logit .* all -inf at row 0, position 1"):
        verify_greedy(T, np.array([[1]]), np.array([1]))  # was: token 0 emitted silently
    with pytest.raises(InputError, match=r"^target: "):
        verify_greedy(torch.from_numpy(T), torch.tensor([[1]]), torch.tensor([1]))


def test_verify_greedy_ignores_rows_past_num_draft():
    # Positions past num_draft[b] are documented as ignored: they may hold anything, -inf rows too.
    T = np.log(np.array([[[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]]]))  # (1, 3, 3)
    T[0, 2] = -np.inf
    res = verify_greedy(T, np.array([[1, 0]]), np.array([1]))
    assert res.tokens.tolist() == [[1, 2, -1]]
    T[0, 1, 2] = -np.inf  # -inf entries are fine while the row keeps one finite logit
    assert verify_greedy(T, np.array([[1, 0]]), np.array([1])).tokens.tolist() == [[1, 0, -1]]


def _ids():
    return torch.zeros((1, 1), dtype=torch.int64), torch.ones(1, dtype=torch.int64)


@pytest.mark.parametrize(
    "make",
    [
        lambda shape: torch.empty(shape, dtype=torch.float64, device="meta"),
        lambda shape: torch.full(shape, 1 / 3, dtype=torch.float64).to_sparse(),
    ],
    ids=["meta", "sparse"],
)
def test_tensors_without_dense_data_get_an_input_error(make):
    from specviz.verifiers.processing import process_logits

    dense_p, dense_q = (
        torch.full((1, 2, 3), 1 / 3, dtype=torch.float64),
        torch.full((1, 1, 3), 1 / 3, dtype=torch.float64),
    )
    rng = torch.Generator().manual_seed(0)
    with pytest.raises(InputError, match=r"^target_probs: expected a dense tensor"):
        verify(make((1, 2, 3)), dense_q, *_ids(), rng=rng)  # a meta table raised RuntimeError from .item()
    with pytest.raises(InputError, match=r"^draft_probs: expected a dense tensor"):
        verify(dense_p, make((1, 1, 3)), *_ids(), rng=rng)
    with pytest.raises(InputError, match=r"^target: expected a dense tensor"):
        verify_greedy(make((1, 2, 3)), *_ids())
    with pytest.raises(InputError, match=r"^logits: expected a dense tensor"):
        process_logits(make((2, 3)))  # was NotImplementedError: Cannot copy out of meta tensor
    assert verify(dense_p, dense_q, *_ids(), rng=rng).tokens.shape == (1, 2)  # the dense ones still run
