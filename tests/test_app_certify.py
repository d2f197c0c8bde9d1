"""The Verifiers page's certified bound (issue 18.7): the paired test of the engine against the reference.

The number shown is -ln(0.05)/n for the n shown, computed here from the page's own text; the
negative control is the chain reference with one step swapped (specviz.verifiers.reference.with_step),
which must give mismatches and no certificate, on the page and in specviz.app.certify.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from specviz import verify
from specviz.app import certify
from specviz.proof import court
from specviz.verifiers import reference

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "app_pages" / "verifiers.py")
CERTIFIED = re.compile(r"(\d+) mismatches in ([\d,]+) rows .*-ln\(0\.05\)/n = [\d.]+ / ([\d,]+) = ([\d.e+-]+) at 95%",
                       re.S)  # fmt: skip


def replacement_from_p(p, q, x, u):
    """The negative control's step: after a rejection the token comes from p, not from the residual."""
    return reference.inverse_cdf(p, u)


FROM_P = reference.with_step(reference.verify, "resample_from_p", replacement=replacement_from_p)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def click_certify(at: AppTest) -> AppTest:
    at.button(key="verifiers.certify").click()
    return run(at)


def shown_bound(text: str) -> tuple[int, float]:
    m = CERTIFIED.search(text)
    assert m, text
    mismatches, n, n_again, bound = m.groups()
    assert int(mismatches) == 0 and n == n_again
    return int(n.replace(",", "")), float(bound)


def test_the_page_shows_minus_ln_005_over_n_for_the_n_it_shows():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    assert not at.success  # nothing runs before the button: page loads stay cheap
    click_certify(at)
    assert len(at.success) == 1 and not at.error
    n, bound = shown_bound(at.success[0].value)
    assert n == certify.ROWS
    assert bound == pytest.approx(-math.log(0.05) / n, rel=5e-4)  # printed to 4 significant figures
    assert f"V * 2^-48 = {2 * 2.0**-48:.2g} from" in at.success[0].value  # the toy pair: V = 2
    assert any("this dtype (float64 NumPy) and this layout (padded)" in c.value for c in at.caption)


def test_the_bound_follows_the_problem_a_scenario_too():
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    at.selectbox(key="verifiers.source").set_value("ragged")
    click_certify(at)
    n, bound = shown_bound(at.success[0].value)
    assert bound == pytest.approx(-math.log(0.05) / n, rel=5e-4)
    assert f"V * 2^-48 = {4 * 2.0**-48:.2g} from" in at.success[0].value  # V = 4
    assert any("draft counts" in c.value and "(ragged)" in c.value for c in at.caption)


def test_negative_control_on_the_page_mismatches_and_certifies_nothing(monkeypatch):
    monkeypatch.setattr(certify, "ENGINE", ("resample_from_p (a swapped step)", FROM_P))
    at = run(AppTest.from_file(PAGE, default_timeout=120))
    click_certify(at)
    assert not at.success and len(at.error) == 1
    text = at.error[0].value
    m = re.search(r"([\d,]+) mismatches in ([\d,]+) rows", text)
    assert m and int(m.group(1).replace(",", "")) > 0
    assert "No certificate" in text and "Certified" not in text


@pytest.mark.parametrize("source", ["toy", "reference", "deterministic", "zeros", "ragged"])
def test_engine_certified_and_swapped_step_caught_on_every_problem(source):
    pb = court.toy_problem() if source == "toy" else court.problem(source)
    good = certify.certify(verify, "engine", pb, rows=20_000, seed=3)
    assert good.certified and good.rows == 20_000
    assert good.bound == pytest.approx(-math.log(0.05) / 20_000)
    bad = certify.certify(FROM_P, "from p", pb, rows=20_000, seed=3)
    assert bad.mismatches > 0 and not bad.certified and bad.bound > 1e-3
    assert "No certificate" in bad.lines()[1]


def test_rows_follow_the_problem():
    pb = court.problem("ragged")
    (P, Q, x, num), (ua, us), drafts = certify.problem_round(pb, 2000, np.random.default_rng(0))
    assert P.shape == (2000, pb.K + 1, 4) and Q.shape == (2000, pb.K, 4) and ua.shape == (2000, pb.K)
    assert set(np.unique(num)) == set(pb.num_draft) and drafts == num.sum()
    valid = np.arange(pb.K)[None, :] < num[:, None]
    assert ((x >= 0) == valid).all()
    b, i = np.nonzero(valid)
    assert (Q[b, i, x[b, i]] > 0).all()  # drafts come from q's support
    # each next row is the chain's row after the draft: the context is the prefix
    b, i = np.nonzero(valid[:, :-1] & valid[:, 1:])
    assert np.array_equal(P[b, i + 1], pb.target.probs(x[b, i]))


def test_rows_are_checked():
    with pytest.raises(ValueError, match="rows"):
        certify.certify(verify, "engine", court.toy_problem(), rows=0)
