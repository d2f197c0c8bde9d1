"""The two step-by-step lessons in a real browser, at 1280x720 in presenter mode, as a class sees them.

Play really ticks (a fragment with run_every), the primary buttons are in view without scrolling,
and the screenshots docs/ shows are taken here: docs/one-round.png, docs/find-the-bug.png (with
SPECVIZ_DOCS_SCREENSHOTS=1; otherwise in artifacts/screenshots/lessons/).
Skips, saying why, where Chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import re

import browser
import pytest

from specviz.app import find_bug as fb

pytestmark = [pytest.mark.browser, pytest.mark.skipif(browser.missing() is not None, reason=str(browser.missing()))]

# Screenshots land in artifacts/; with SPECVIZ_DOCS_SCREENSHOTS=1 they also replace the ones docs/ shows
# (a plain test run leaves the working tree as it was).
SHOTS = browser.ROOT / "artifacts" / "screenshots" / "lessons"
DOCS = browser.ROOT / "docs" if os.environ.get("SPECVIZ_DOCS_SCREENSHOTS") == "1" else SHOTS
WIDTH, HEIGHT = 1280, 720  # a classroom projector
LOADED = "tokens emitted"  # a counter the fragment draws: the page is there once it shows


@pytest.fixture(scope="module")
def app_url():
    with browser.streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def page(app_url):
    with browser.browser_page(WIDTH, HEIGHT) as pg:
        yield pg


def round_number(page) -> int:
    text = browser.main_text(page)
    m = re.search(r"round\s*\n\s*([\d,]+)", text)
    assert m, text[:400]
    return int(m.group(1).replace(",", ""))


def test_one_round_steps_plays_and_is_photographed(page, app_url):
    page.goto(f"{app_url}/one-round?present=1&seed=2&rounds=1")
    browser.wait_idle(page, LOADED)
    assert browser.exceptions(page) == [] and browser.dialogs(page) == []
    assert browser.outside_viewport(page, ".st-key-round-step button") == []
    assert round_number(page) == 1 and "Round 1: no coin tested yet." in browser.main_text(page)  # before any coin
    browser.click_button(page, "Step")
    browser.wait_idle(page, LOADED)
    assert round_number(page) == 1 and "Round 1: draft 1 of 3 tested" in browser.main_text(page)
    for _ in range(5):  # draft by draft to the end of round 1 (at most 3 coins and the draw), then round 2
        if round_number(page) == 2:
            break
        browser.click_button(page, "Step")
        browser.wait_idle(page, LOADED)
    assert round_number(page) == 2 and "Round 2: draft 1 of 3 tested" in browser.main_text(page)
    browser.click_button(page, "Play")
    page.wait_for_timeout(4000)  # about four ticks of one second
    playing = round_number(page)
    assert playing >= 4
    browser.click_button(page, "Pause")
    browser.wait_idle(page, LOADED)
    page.wait_for_timeout(2500)
    paused = round_number(page)
    page.wait_for_timeout(2500)
    assert round_number(page) == paused  # the timer stopped
    page.goto(f"{app_url}/one-round?present=1&seed=2&rounds=40&event=2")  # mid-round: draft 2 of round 40 tested
    browser.wait_idle(page, LOADED)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
    page.wait_for_timeout(1500)
    assert browser.exceptions(page) == []
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / "one-round.png"))
    assert (DOCS / "one-round.png").stat().st_size > 10_000
    # The round: shared_uniform beside the rule, seed 0, round 4, two coins in (artifacts only).
    page.goto(f"{app_url}/one-round?present=1&seed=0&rounds=4&event=2&compare=1&mistake=shared_uniform")
    browser.wait_idle(page, LOADED)
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
    page.wait_for_timeout(1500)
    assert browser.exceptions(page) == []
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "one-round-shared-uniform.png"))


def test_find_the_bug_reveals_and_is_photographed(page, app_url):
    page.goto(f"{app_url}/find-the-bug?present=1&mistake=shared_noise_stream&n=300&seed=0")
    browser.wait_idle(page, "your guess")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
    page.wait_for_timeout(1500)
    assert browser.exceptions(page) == [] and browser.dialogs(page) == []
    assert browser.outside_viewport(page, ".st-key-findbug-reveal button") == []
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / "find-the-bug.png"))
    assert (DOCS / "find-the-bug.png").stat().st_size > 10_000
    browser.click_button(page, "Reveal")
    browser.wait_idle(page, "the eye picks it out from N")
    text = browser.main_text(page)
    assert "the eye picks it out from N" in text
    assert f"The mistake is histogram {fb.place(0) + 1} (no guess was made)." in text
    assert browser.exceptions(page) == []
