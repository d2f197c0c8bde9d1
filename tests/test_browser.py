"""The app in a real browser: every page renders, navigation works, the bug lab flips its verdict.

Streamlit is started with `streamlit run app.py` on loopback and driven by Playwright in
Debian's Chromium. Screenshots of every page land in artifacts/screenshots/ (README shows
one). Skips, saying why, where Chromium or Playwright is missing.
"""

from __future__ import annotations

from pathlib import Path

import browser
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.skipif(browser.missing() is not None, reason=str(browser.missing()))]

SHOTS = browser.ROOT / "artifacts" / "screenshots"


@pytest.fixture(scope="module")
def app_url():
    with browser.streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def page(app_url):
    with browser.browser_page() as pg:
        yield pg


def shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a real picture, not a blank page
    return path


def test_a_shared_link_opens_its_page_in_a_fresh_server():
    # The first session of a server is where a "Page not found" dialog would appear.
    with browser.streamlit_server() as url, browser.browser_page() as pg:
        pg.goto(f"{url}/bug-lab?bug=shared_uniform&seed=3")
        browser.wait_idle(pg, "Bug lab")
        pg.wait_for_timeout(1500)
        assert browser.dialogs(pg) == []
        assert pg.get_by_role("combobox", name="Bug").input_value() == "shared_uniform"


@pytest.mark.parametrize("path, text", list(browser.PAGES.items()))
def test_every_page_renders_without_exception(page, app_url, path, text):
    page.goto(f"{app_url}/{path}")
    browser.wait_idle(page, text)
    assert text.lower() in browser.main_text(page).lower()
    assert browser.exceptions(page) == []
    assert browser.dialogs(page) == []
    shot(page, path or "home")


def test_sidebar_navigation_reaches_every_page(page, app_url):
    page.goto(app_url)
    browser.wait_idle(page)
    for path, text in browser.PAGES.items():
        if not path:
            continue
        page.locator("[data-testid='stSidebarNav'] a").filter(has_text=text).first.click()
        page.wait_for_url(f"**/{path}*")
        browser.wait_idle(page, text)
        assert browser.exceptions(page) == []


def test_charts_are_drawn(page, app_url):
    page.goto(f"{app_url}/why-exact")
    browser.wait_idle(page, "Why it is exact")
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
    assert page.locator(".js-plotly-plot").count() >= 1


def test_bug_lab_switching_a_bug_on_turns_the_verdict(page, app_url):
    page.goto(f"{app_url}/bug-lab")
    browser.wait_idle(page, "Bug lab")
    browser.click_button(page, "Run the test")
    browser.wait_idle(page, "Verdict: pass")
    shot(page, "bug-lab-correct")
    browser.choose(page, "Bug", "resample_from_p")
    browser.wait_idle(page, "Make your prediction")
    page.get_by_text("the test will fail").click()
    browser.click_button(page, "Run the test")
    browser.wait_idle(page, "Verdict: caught")
    assert "You were right" in browser.main_text(page)
    assert browser.exceptions(page) == []
    assert "bug=resample_from_p" in page.url  # the link reproduces the demo
    shot(page, "bug-lab-resample_from_p")
