"""Calibration of the joint test (slow: run with `python -m pytest -m slow`)."""

from __future__ import annotations

import pytest

from specviz.bugs import BUGS
from specviz.prove import calibrate


@pytest.mark.slow
def test_correct_verifier_rejection_rate_is_consistent_with_alpha():
    cal = calibrate("reference", seeds=range(100), n=100_000, alpha=0.01)
    assert cal.consistent, cal  # two-sided binomial test at 0.001


@pytest.mark.slow
def test_negative_control_a_broken_verifier_is_not_calibrated():
    cal = calibrate("reference", seeds=range(10), n=100_000, alpha=0.01, bug=BUGS["resample_from_p"])
    assert not cal.consistent and cal.rejections == 10, cal
