"""The app in a real browser: every page renders, navigation works, the bug lab flips its verdict.

Streamlit is started with `streamlit run app.py` on loopback and driven by Playwright in
Debian's Chromium. Screenshots of every page land in artifacts/screenshots/ (README shows
one). Skips, saying why, where Chromium or Playwright is missing.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from urllib.parse import urlparse

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


def shot(page, name: str, full_page: bool = True) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
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


# --- settings kept across navigation ---------------------------------------------------------------


def nav(page, title: str, path: str, text: str) -> None:
    page.locator("[data-testid='stSidebarNav'] a").filter(has_text=title).first.click()
    page.wait_for_url(f"**/{path}*")
    browser.wait_idle(page, text)


def test_settings_and_results_survive_sidebar_navigation(page, app_url):
    page.goto(f"{app_url}/tokens-per-step?a=0.9&K=5&seed=3")
    browser.wait_idle(page, "speedup at K")
    nav(page, "Bug lab", "bug-lab", "Run the test")
    browser.choose(page, "Bug", "resample_from_p")
    browser.wait_idle(page, "Make your prediction")
    browser.click_button(page, "Run the test")
    browser.wait_idle(page, "Verdict: caught")
    nav(page, "Tokens per step", "tokens-per-step", "speedup at K")
    assert "E[tokens], K = 5" in browser.main_text(page)
    assert "a=0.9" in page.url and "K=5" in page.url and "seed=3" in page.url  # the address bar shows them
    nav(page, "Bug lab", "bug-lab", "Verdict: caught")  # the result is back without a click
    assert page.get_by_role("combobox", name="Bug").input_value() == "resample_from_p"
    assert "bug=resample_from_p" in page.url


# --- presenter mode --------------------------------------------------------------------------------

# name -> (path, button to click or None, text once ready, metric labels and charts the presenter sees first)
VIEWS = {
    "why-exact": ("why-exact", None, "largest |output", ["acceptance rate a", "TV(p, q) = 1 − a"], 1),
    "bug-lab": ("bug-lab?bug=resample_from_p", "Run the test", "Verdict:", ["chi-square", "joint test"], 0),
    "batch": ("batch", "Run batch", "mean tokens per row", ["rows verified", "mean tokens per row"], 0),
    "tokens-per-step": ("tokens-per-step", None, "speedup at K", [], 1),
}
NEVER_CUT = "[data-testid='stMetricValue'], [data-testid='stMetricLabel'], .stButton button"


def open_view(page, app_url: str, name: str, present: bool) -> None:
    path, button, text, _, _ = VIEWS[name]
    page.goto(f"{app_url}/{path}{'&' if '?' in path else '?'}present={int(present)}")
    browser.wait_idle(page, "Run" if button else text)
    if button:
        browser.click_button(page, button)
        browser.wait_idle(page, text)
    page.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
    page.wait_for_timeout(300)


def sidebar_right_edge(page) -> float:
    box = page.locator("[data-testid='stSidebar']").bounding_box()
    return 0.0 if box is None else box["x"] + box["width"]


def in_view(page, box: dict | None) -> bool:
    vp = page.viewport_size
    return (
        box is not None
        and box["y"] >= 0
        and box["x"] >= 0
        and (box["y"] + box["height"] <= vp["height"] + 1 and box["x"] + box["width"] <= vp["width"] + 1)
    )


@pytest.mark.parametrize("present", [False, True], ids=["normal", "presenter"])
def test_1280x720_screens_key_elements_first_and_nothing_truncated(page, app_url, present):
    mode = "presenter" if present else "normal"
    with closing(browser.new_page(page.context.browser, 1280, 720)) as pg:
        for name, (_, _, _, labels, charts) in VIEWS.items():
            open_view(pg, app_url, name, present)
            shot(pg, f"1280x720-{mode}-{name}", full_page=False)
            assert browser.exceptions(pg) == []
            assert browser.truncated(pg, NEVER_CUT) == [], name
            if not present:
                assert sidebar_right_edge(pg) > 100  # the laptop layout shows the sidebar (the control)
                continue  # ... and is checked for nothing cut, with screenshots
            if name == "bug-lab":
                assert in_view(pg, pg.locator("[data-testid='stAlert']").filter(has_text="Verdict:").bounding_box())
            for label in labels:
                box = pg.locator("[data-testid='stMetric']").filter(has_text=label).first.bounding_box()
                assert in_view(pg, box), (name, label, box)
            for i in range(charts):
                box = pg.locator("[data-testid='stPlotlyChart']").nth(i).bounding_box()
                assert in_view(pg, box), (name, "chart", i, box)
            assert sidebar_right_edge(pg) <= 1  # collapsed: off screen


def test_150_percent_zoom_presenter_cuts_nothing(page, app_url):
    with closing(browser.new_page(page.context.browser, 1280, 720, zoom=1.5)) as pg:
        for name in VIEWS:
            open_view(pg, app_url, name, True)
            shot(pg, f"1280x720-zoom150-presenter-{name}", full_page=False)
            assert browser.truncated(pg, NEVER_CUT) == [], name
        open_view(pg, app_url, "why-exact", True)
        grid = pg.locator("[data-testid='stDataFrame']").first  # the p/q editor: both columns in its box
        scroller = grid.locator(".dvn-scroller").first
        assert scroller.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), scroller.evaluate(
            "e => [e.scrollWidth, e.clientWidth]"
        )


# --- safe to serve ---------------------------------------------------------------------------------

HOST = "evil.invalid"
HOSTILE = [  # (link, a text the page shows once it has read the link)
    (f"bug-lab?bug=![x](http://{HOST}/pixel.png)&seed=[click me](http://{HOST}/a)", "is not valid"),
    (f"why-exact?bug=<img src=http://{HOST}/i.png>&K=$\\color{{red}}x$ :red[red]", "is not valid"),
    (f"batch?counts=typed&typed=![t](http://{HOST}/t.png)&B=1", "draft counts: expected"),
    (f"tokens-per-step?a=www.{HOST}&seed=mailto:me@{HOST}", "is not valid"),
]


def test_negative_control_the_pointer_check_sees_an_injected_image(page):
    requests: list[str] = []
    with closing(browser.new_page(page.context.browser)) as pg:
        pg.on("request", lambda r: requests.append(r.url))
        pg.set_content(f'<img src="http://{HOST}/x.png"><a href="http://{HOST}/">x</a>')
        pg.wait_for_timeout(300)
        assert len(browser.pointers(pg, HOST)) == 2 and any(HOST in u for u in requests)


@pytest.mark.parametrize("path, shown", HOSTILE)
def test_hostile_links_make_nothing_that_points_where_the_user_typed(page, app_url, path, shown):
    requests: list[str] = []
    with closing(browser.new_page(page.context.browser)) as pg:
        pg.on("request", lambda r: requests.append(r.url))
        pg.goto(f"{app_url}/{path}")
        browser.wait_idle(pg, shown)
        assert browser.pointers(pg, HOST) == []
        assert [u for u in requests if HOST in (urlparse(u).hostname or "")] == []  # nothing fetched from it
        main = pg.locator("[data-testid='stMain']")
        # The page's own LaTeX (the derivation) is fine; none may come from a link's text.
        assert main.locator("[data-testid='stAlert'] .katex, a[href*='invalid'], img[src*='invalid']").count() == 0
        assert HOST in browser.main_text(pg)  # shown, as text
        if ":red[red]" in path:
            assert ":red[red]" in browser.main_text(pg)  # the directive is text, not colour
        assert browser.exceptions(pg) == []


def test_streamlit_run_listens_on_loopback_only(app_url):
    port = int(app_url.rsplit(":", 1)[1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).exists():
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                listening.append(address)
    assert listening == ["0100007F"]  # 127.0.0.1, nothing else (no 0.0.0.0, no ::)


def test_presenter_toggle_in_the_sidebar_goes_into_the_link_and_collapses_the_sidebar(page, app_url):
    with closing(browser.new_page(page.context.browser, 1280, 720)) as pg:
        pg.goto(f"{app_url}/tokens-per-step?a=0.8")
        browser.wait_idle(pg, "speedup at K")
        assert sidebar_right_edge(pg) > 100 and "present" not in pg.url
        pg.locator("[data-testid='stSidebar']").get_by_text("Presenter mode").click()
        browser.wait_idle(pg, "speedup at K")
        pg.wait_for_url("**present=1*")
        assert "a=0.8" in pg.url
        pg.wait_for_timeout(1000)  # the collapse animates
        assert sidebar_right_edge(pg) <= 1
        assert pg.evaluate("() => getComputedStyle(document.documentElement).fontSize") == "20px"
