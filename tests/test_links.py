"""Settings in the link (specviz.app.links): bad values fall back with a note, good ones round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from specviz.app import links


def test_link_params_fall_back_to_defaults_with_a_note():
    params = [
        links.int_param("K", 1, 1, 8),
        links.float_param("a", 0.7, 0, 1),
        links.choice_param("bug", "none", ["none"]),
    ]
    d = links.decode_params({"K": "99", "a": "0.25", "bug": ["x", "none"]}, params)
    assert d.values == {"K": 1, "a": 0.25, "bug": "none"}  # a repeated key: the last one wins
    assert d.notes == ["The link's setting K='99' is not valid (expected an integer in [1, 8]); using the default 1."]
    assert links.decode_params(links.encode_params(d.values, params), params) == (d.values, [])


def test_floats_param_round_trips_what_was_typed_including_empty_cells():
    p = links.floats_param("p", [0.5])
    text = p.fmt([0.1, 1 / 3, float("nan")])
    back = p.parse(text)
    assert back[:2] == [0.1, pytest.approx(1 / 3, rel=1e-12)] and np.isnan(back[2])


def test_init_state_seeds_only_settings_the_session_does_not_hold():
    params = [links.int_param("K", 1, 1, 8), links.int_param("seed", 0, 0)]
    state = {"x.K": 5}
    notes = links.init_state({"K": "3", "seed": "oops"}, state, params, "x.")
    assert state == {"x.K": 5, "x.seed": 0}
    assert len(notes) == 1 and "seed='oops'" in notes[0]
