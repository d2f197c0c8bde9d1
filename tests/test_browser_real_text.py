"""Real text on SmolLM2-135M in a real browser at 1280x720 in presenter mode: it streams rounds, shows the
position chart and the exactness check, and is photographed (docs/real-text.png, docs/real-text-round.png and
docs/real-text-exact.png with SPECVIZ_DOCS_SCREENSHOTS=1; otherwise in artifacts/screenshots/lessons/).
"""

from __future__ import annotations

import os

import browser
import pytest

from specviz import models

pytestmark = [
    pytest.mark.browser,
    pytest.mark.heavy,
    pytest.mark.skipif(browser.missing() is not None, reason=str(browser.missing())),
    pytest.mark.skipif(models.missing() is not None, reason=f"the real model is not installed: {models.missing()}"),
]
SHOTS = browser.ROOT / "artifacts" / "screenshots" / "lessons"
DOCS = browser.ROOT / "docs" if os.environ.get("SPECVIZ_DOCS_SCREENSHOTS") == "1" else SHOTS
WIDTH, HEIGHT = 1280, 720
RUN = ("present=1&src=SmolLM2-135M+%28the+real+model%29&prompt=A+hash+table+is&K=4&T=1&tp=0.95&drafter=early"
       "&L=24&dT=1&seed=3")  # fmt: skip
LONG_MS = 240_000  # the model's first load and a dozen rounds on a busy 2-core machine


def shot(page, name: str) -> None:
    page.wait_for_timeout(1500)
    assert browser.exceptions(page) == [] and browser.dialogs(page) == []
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / name))
    assert (DOCS / name).stat().st_size > 10_000


def test_real_text_on_the_real_model_is_photographed():
    with browser.streamlit_server() as url, browser.browser_page(WIDTH, HEIGHT) as page:
        page.goto(f"{url}/real-text?{RUN}&rounds=0")
        browser.wait_idle(page, "rounds (target passes)", timeout_ms=LONG_MS)
        browser.click_button(page, "Run 10 more rounds")
        browser.wait_idle(page, "Position of the last round", timeout_ms=LONG_MS)
        assert "tokens generated" in browser.main_text(page)
        page.evaluate("window.scrollTo(0, 0)")
        shot(page, "real-text.png")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        page.get_by_text("Position of the last round").evaluate("e => e.scrollIntoView({block: 'start'})")
        shot(page, "real-text-round.png")
        page.goto(f"{url}/real-text?{RUN}&rounds=10&xbug=resample_from_p&xn=20000&xchecked=1")
        browser.wait_idle(page, "Fail for the first token with the mistake resample_from_p", timeout_ms=LONG_MS)
        page.get_by_text("Check exactness", exact=True).evaluate("e => e.scrollIntoView({block: 'start'})")
        shot(page, "real-text-exact.png")
