"""Error messages show the value that is wrong with every digit needed to see it (issue 21, point 6).

``.6g`` printed a row summing to 1 + 2e-9 as "a row summing to 1": the message rounded away its
own problem.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from specviz import verify
from specviz.errors import InputError, digits
from specviz.proof import markov, stats, theory


def test_digits_tells_a_value_from_its_neighbours():
    for x in (1.0, 1 + 2e-9, 0.9999999999999999, -1e-300, 5e-324, 1e308, 1 / 3):
        assert float(digits(x)) == x
    assert digits(np.float32(1.0000001)) == repr(float(np.float32(1.0000001)))
    assert f"{1 + 2e-9:.6g}" == "1"  # the old format: the problem disappears


def summed(e: pytest.ExceptionInfo) -> float:
    """The number after "summing to" or "sum" in the message."""
    m = re.search(r"(?:summing to|sum) (\S+)$", e.value.got)
    assert m, e.value.got
    return float(m.group(1))


@pytest.mark.parametrize("validate_path", ["padded", "numba_or_sample"])
def test_verify_shows_the_row_sum_past_the_tolerance(validate_path):
    V = 4 if validate_path == "padded" else 600  # V > 256: the two-level draw's exact-sum check
    p = np.full((1, 2, V), 1 / (V - 1))
    p[0, 0, 0] = 0.0  # the draft (token 0) is rejected: the residual draw reads the whole q row
    q = np.full((1, 1, V), 1 / V)
    q[0, 0, 0] += 1e-4 + 1e-9  # just past SUM_ATOL = 1e-4: .6g showed "1.0001", the tolerance itself
    with pytest.raises(InputError, match="draft_probs") as e:
        verify(p, q, np.zeros((1, 1), int), np.ones(1, int), rng=np.random.default_rng(0), validate=True)
    assert summed(e) == pytest.approx(q[0, 0].sum(), abs=1e-12)
    assert f"{summed(e):.6g}" == "1.0001"  # what the old message showed


@pytest.mark.parametrize(
    "call",
    [
        lambda r: markov.make_chain(r, "table"),
        lambda r: theory.as_dist(r[0], "p"),
        lambda r: stats.chi_square(np.ones(3), r[0]),
    ],
    ids=["markov", "theory", "stats"],
)
def test_proof_checks_show_a_sum_off_by_2e_9(call):
    row = np.array([0.5, 0.25, 0.25 + 2e-9])  # past the tolerance 1e-9: .6g showed 1
    table = np.stack([row, row, row, row])
    with pytest.raises(InputError) as e:
        call(table)
    assert summed(e) == row.sum() and summed(e) != 1.0, e.value.got


def test_uniforms_just_past_one_are_shown_past_one():
    p = np.full((1, 2, 3), 1 / 3)
    u = verify.__globals__["Uniforms"](np.array([[1 + 1e-12]]), np.array([0.5]))
    with pytest.raises(InputError, match="uniforms.accept") as e:
        verify(p, p[:, :1], np.zeros((1, 1), int), np.ones(1, int), uniforms=u)
    assert "1.000000000001" in e.value.got
