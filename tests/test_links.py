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


def test_a_predictions_answer_never_goes_in_the_link_and_a_link_never_restores_it():
    ran, measured = links.Result("ran", answers_prediction=True), links.Result("measured")
    state: dict = {links.PAGE_KEY: "x", links.ARRIVED_KEY: True}
    params = [links.int_param("seed", 0, 0)]
    ui = _Ui({}, state)
    links.open_page(ui, params, "x.", results=(ran, measured)).show_in_link({"seed": 3}, [ran, measured])
    query = dict(ui.query_params)
    assert query == {"seed": "3", "measured": "1"}  # the measurement is marked, the prediction's answer is not
    state[links.WRITTEN_KEY] = {}  # arrive again, from that link
    again = links.open_page(_Ui({**query, "ran": "1"}, state), params, "x.", results=(ran, measured))
    assert again.from_link and again.restores(measured) and not again.restores(ran)
    with pytest.raises(links.InputError, match="result"):
        again.restores(links.Result("other"))


class _Ui:
    def __init__(self, query: dict, state: dict) -> None:
        self.query_params, self.session_state = _Query(query), state

    def warning(self, body: str, *, icon: str | None = None) -> None:
        raise AssertionError(body)


class _Query(dict):
    def to_dict(self) -> dict:
        return dict(self)


# --- the rule for links, on every page (AppTest) ---------------------------------------------------
#
# docs/tour.md: a link reproduces everything the page showed, results included, except a result
# that answers a prediction the visitor has not made yet (Bug lab, Find the bug): there the link
# restores the settings and the prediction step, and the result appears once the visitor runs it.
# Each page is opened, made to show its result, and its address bar opened in a fresh session.

PREDICTION_PAGES = {"bug-lab", "find-the-bug"}


def _open(page: str, query: dict[str, str] | None = None):
    """A fresh session opened from a link to ``page`` (AppTest runs the default page first)."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=120)
    at.query_params.update(query or {})
    at.run()
    at.switch_page(page)
    return _run(at)


def _run(at):
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _do(element):
    """Run the app after an interaction with ``element``; no exception allowed."""
    at = element.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _answer_first_question(at) -> None:
    radios = [r for r in at.radio if str(r.key).startswith("interview.in.")]
    if radios:
        radios[0].set_value(radios[0].options[0])
    else:
        next(n for n in at.number_input if str(n.key).startswith("interview.in.")).set_value(0.5)
    at.button(key="interview.check").click()


# url path -> (the link the test starts from, what shows the page's result)
SHOW_RESULT = {
    "": ({}, lambda at: None),  # Home shows no result: its link reproduces the page as it is
    "one-round": ({}, lambda at: [_do(at.button(key="round.step").click()) for _ in range(4)]),
    "why-exact": ({}, lambda at: [_do(at.button(key=f"exact.sample{n}").click()) for n in (1000, 1, 1000)]),
    "bug-lab": ({"seed": "515151", "n": "3000"}, lambda at: [
        _do(at.selectbox(key="buglab.bug").select("resample_from_p")),
        _do(at.radio(key="buglab.prediction").set_value("the test will fail")),
        _do(at.button(key="buglab.run").click())]),
    "find-the-bug": ({"seed": "7", "n": "200"}, lambda at: [
        _do(at.selectbox(key="findbug.guess").select("3")), _do(at.button(key="findbug.reveal").click())]),
    "tokens-per-step": ({"n": "2000"}, lambda at: _do(at.slider(key="tokens.a").set_value(0.8))),
    "verifiers": ({"n": "100"}, lambda at: [
        _do(at.button(key="verifiers.measure").click()), _do(at.button(key="verifiers.certify").click())]),
    "batch": ({"B": "8", "K": "2", "V": "9", "seed": "3"}, lambda at: _do(at.button(key="batch.run").click())),
    "sampling-settings": ({}, lambda at: _do(at.slider(key="settings.K").set_value(2))),
    "real-text": ({"n": "2000"}, lambda at: [
        _do(at.button(key="text.step").click()), _do(at.button(key="text.check").click())]),
    "interview": ({}, lambda at: [_answer_first_question(at), _run(at)]),
}


def _result(at) -> dict[str, list]:
    """What a page shows as numbers and verdicts: metrics, boxes, tables (run times left out)."""
    def timed(text: str) -> bool:
        return " s " in text or "seconds" in text or " ms" in text or "time" in text.lower()

    return {
        "metrics": [(m.label, m.value) for m in at.metric if not timed(m.label)],
        "boxes": [str(b.value) for kind in ("success", "error", "info", "warning") for b in getattr(at, kind)
                  if not timed(str(b.value))],  # fmt: skip
        "tables": [d.value.to_csv() for d in at.dataframe
                   if not any(timed(str(c)) for c in d.value.columns)],  # fmt: skip
        "markdown": [str(m.value) for m in at.markdown if not timed(str(m.value))],
    }


def _link(at) -> dict[str, str]:
    return {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}


@pytest.mark.parametrize("lesson", __import__("specviz.app.flow", fromlist=["LESSONS"]).LESSONS,
                         ids=lambda lesson: lesson.url_path or "home")  # fmt: skip
def test_a_link_reproduces_what_the_page_showed_except_a_predictions_answer(lesson):
    start, show = SHOW_RESULT[lesson.url_path]
    at = _open(lesson.file, start)
    show(at)
    shown, link = _result(at), _link(at)
    again = _open(lesson.file, link)
    assert _link(again) == link
    if lesson.url_path not in PREDICTION_PAGES:
        assert _result(again) == shown
        return
    # the prediction's answer is in neither the link nor the page until the visitor runs it
    if lesson.url_path == "bug-lab":
        assert "ran" not in link
        assert any("Verdict:" in b for b in shown["boxes"])
        assert not any("Verdict:" in b for b in _result(again)["boxes"])
        for key in ("bug", "scenario"):  # the settings
            assert again.selectbox(key=f"buglab.{key}").value == at.selectbox(key=f"buglab.{key}").value
        for key in ("seed", "n"):
            assert again.number_input(key=f"buglab.{key}").value == at.number_input(key=f"buglab.{key}").value
        assert again.radio(key="buglab.prediction").value == "the test will fail"  # the prediction step
        _do(again.button(key="buglab.run").click())
    else:
        assert "revealed" not in link
        assert any("Histogram" in b or "histogram" in b for b in shown["boxes"])
        assert _result(again)["boxes"] == [] and not again.dataframe  # no reveal, no table
        assert again.selectbox(key="findbug.mistake").value == at.selectbox(key="findbug.mistake").value
        for key in ("n", "seed"):
            assert again.number_input(key=f"findbug.{key}").value == at.number_input(key=f"findbug.{key}").value
        assert again.selectbox(key="findbug.guess").value == "no guess yet"  # the guess is the visitor's to make
        _do(again.selectbox(key="findbug.guess").select("3"))
        _do(again.button(key="findbug.reveal").click())
    assert _result(again) == shown  # once run, the same result
