"""The app on the faults of issue 21: extreme settings from a link or typed, bounded text, no torch."""

from __future__ import annotations

import math

import pytest
from apptest import metric, open_page, texts

ESCAPED_KEY = "app.escaped_input_error"


def escaped(at) -> str | None:
    return at.session_state[ESCAPED_KEY] if ESCAPED_KEY in at.session_state else None


def test_sampling_settings_link_with_an_underflowing_temperature_shows_finite_numbers():
    # Was: acceptance nan, tokens per step 4.0000, and "InputError escaped page" in the log.
    at = open_page("app_pages/settings.py", {"rT": "1e-320"})
    acceptance = float(metric(at, "acceptance rate Σ min(p, q)"))
    per_step = float(metric(at, "tokens per step, K = 3"))
    assert 0 <= acceptance <= 1 and math.isfinite(per_step)
    # K = 3 drafts at acceptance a: (1 - a^4) / (1 - a) tokens per step, to the 4 decimals shown.
    assert per_step == pytest.approx((1 - acceptance**4) / (1 - acceptance), abs=2e-4)
    assert not at.error and escaped(at) is None


def test_real_text_link_with_an_underflowing_temperature_writes_text():
    at = open_page("app_pages/text.py", {"T": "1e-320", "rounds": "5"})
    assert metric(at, "target calls (rounds)") == "5"
    assert int(metric(at, "characters generated")) >= 5
    assert math.isfinite(float(metric(at, "tokens per target call")))
    assert not at.error and escaped(at) is None


def test_typed_logits_at_the_ends_of_float64_give_disjoint_p_and_q():
    # p = softmax([1e308, 0] / 0.5) = [1, 0] and q = [0, 1]: nothing in common, acceptance 0.
    query = {"source": "typed", "tl": "1e308, 0", "dl": "0, 1e308", "rT": "0.5", "dT": "0.5"}
    at = open_page("app_pages/settings.py", query)
    assert metric(at, "acceptance rate Σ min(p, q)") == "0.0000"
    assert metric(at, "tokens per step, K = 3") == "1.0000"
    assert not at.error and escaped(at) is None, texts(at.error)
