"""Every page on a classroom projector (issue 19.2): 1280 x 720 in presenter mode, and at 150 % zoom.

For each page of specviz.app.flow.LESSONS, opened fresh, (Bug lab, Batch, Real text) from a link that
restores a result, and (Why it is exact, Verifiers, Find the bug) after the click that shows one, the
audit below checks in Chromium that

- no text is cut by its box (an element that clips, or an input, narrower than its text; chart text
  past the chart's edge; a cell or header of an st.dataframe grid, every row, wider than its column,
  or a column past the grid's right edge);
- no two pieces of text overlap, chart labels included (rotated tick labels as rotated boxes);
- every chart label is at least 14 px;
- the page's primary button is wholly in view without scrolling (fresh open).

Negative controls build a page with one of each fault, and an app with cut grids, and require the
audit to flag them all. Find the bug's revealed row must be on screen with the table's top.
Screenshots of every view land in artifacts/screenshots/projector/.
"""

from __future__ import annotations

import json
from contextlib import closing

import browser
import pytest

from specviz.app import find_bug as fb
from specviz.app import flow

pytestmark = [pytest.mark.browser, pytest.mark.skipif(browser.missing() is not None, reason=str(browser.missing()))]

SHOTS = browser.ROOT / "artifacts" / "screenshots" / "projector"
MIN_CHART_PX = 14.0
OVERLAP_SHARE = 0.15  # boxes sharing more than this share of the smaller one overlap (kerning touches are fine)

# The props of the glide-data-grid that draws a canvas (columns with their widths, rows, getCellContent,
# theme): read from React's fiber, as the canvas holds pixels and its accessibility table only the rows in view.
GRID = """cv => {
  const key = Object.keys(cv).find(k => k.startsWith('__reactFiber$'));
  for (let f = key ? cv[key] : null; f; f = f.return) {
    const p = f.memoizedProps;
    if (p && Array.isArray(p.columns) && typeof p.getCellContent === 'function' && p.theme) return p;
  }
  return null;
}"""

AUDIT = """
([root, minPx, share]) => {
  const main = document.querySelector(root);
  const grid = GRID;
  const shown = e => {
    const shut = e.closest('details:not([open])');
    if (shut && !e.closest('summary')) return false;  // a closed expander's body is not on screen
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'
      && parseFloat(s.opacity) > 0;
  };
  const skip = '.katex-mathml, [data-testid="stDataFrame"], [data-testid="stTooltipIcon"]';
  // 1. text cut by its box
  const cut = [];
  for (const e of main.querySelectorAll('*')) {
    if (e.closest(skip + ', svg, textarea, [data-testid="stCode"]') || !shown(e)) continue;
    const s = getComputedStyle(e);
    const text = (e.value !== undefined && e.tagName === 'INPUT') ? e.value : e.innerText;
    if (!text || !text.trim()) continue;
    const clips = e.tagName === 'INPUT' || s.overflowX !== 'visible' || s.textOverflow === 'ellipsis';
    const where = ` [${e.tagName.toLowerCase()} ${e.closest('[data-testid]')?.getAttribute('data-testid') || ''}]`;
    if (clips && e.scrollWidth > e.clientWidth + 1) cut.push(text.slice(0, 60).replace(/\\n/g, ' ') + where);
  }
  // Table cells drawn on a canvas (st.dataframe is a glide-data-grid): no box holds their text, so each
  // cell's text, every row's, is measured in the grid's own font against its column's width less padding.
  const ruler = document.createElement('canvas').getContext('2d');
  for (const frame of main.querySelectorAll('[data-testid="stDataFrame"]')) {
    const cv = frame.querySelector('canvas[data-testid="data-grid-canvas"]');
    if (!shown(frame)) continue;
    const g = cv && grid(cv);
    if (!g) { cut.push('table: its grid cannot be read [stDataFrame]'); continue; }
    const t = g.theme, pad = t.cellHorizontalPadding;
    const wider = (text, style, room) => {
      ruler.font = `${style} ${t.fontFamily}`;
      return ruler.measureText(text).width + 2 * pad > room + 1;
    };
    let x = 0;  // where the column starts, the grid scrolled to its left edge as a page opens
    g.columns.forEach((col, c) => {
      x += col.width;
      if (x > g.width + pad) cut.push(`table: column ${col.title} past the table's right edge (${x} > ${g.width} px)`);
      const room = col.width - (col.icon ? t.headerIconSize + pad : 0);
      if (col.title && wider(col.title, t.headerFontStyle, room)) cut.push(`table header: ${col.title.slice(0, 60)}`);
      for (let r = 0; r < g.rows; r++) {
        const cell = g.getCellContent([c, r]), text = cell.displayData;
        if (typeof text === 'string' && text.trim() && wider(text, t.baseFontStyle, col.width))
          cut.push(`table: ${text.slice(0, 60)} [column ${col.title}]`);
      }
    });
  }
  for (const t of main.querySelectorAll('.stPlotlyChart svg text')) {  // chart text past the chart's edge
    if (!t.textContent.trim() || !shown(t)) continue;
    const r = t.getBoundingClientRect(), box = t.closest('.stPlotlyChart').getBoundingClientRect();
    // 3 px: a text box includes the font's ascent above the glyphs (a title at the top edge rises 2 px past it)
    if (r.left < box.left - 3 || r.right > box.right + 3 || r.top < box.top - 3 || r.bottom > box.bottom + 3)
      cut.push('chart: ' + t.textContent.slice(0, 60));
  }
  // 2. overlapping text: HTML text as line boxes, SVG text as (possibly rotated) boxes
  const items = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n; (n = walker.nextNode());) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || el.closest(skip + ', .katex') || !shown(el)) continue;
    if (el.closest('svg')) {
      if (el.tagName.toLowerCase() !== 'text' && el.tagName.toLowerCase() !== 'tspan') continue;
      const t = el.closest('text');
      if (items.some(i => i.el === t)) continue;
      const m = t.getScreenCTM(), b = t.getBoundingClientRect();
      const scale = Math.hypot(m.a, m.b), len = t.getComputedTextLength() * scale;
      const h = parseFloat(getComputedStyle(t).fontSize) * scale * 0.75;
      const d = [m.a / scale, m.b / scale];
      items.push({t: t.textContent.trim().slice(0, 30), el: t, c: [b.left + b.width / 2, b.top + b.height / 2],
                  d, hw: len / 2, hh: h / 2});
      continue;
    }
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects())
      if (r.width > 1 && r.height > 1)
        items.push({t: n.textContent.trim().slice(0, 30), el, c: [r.left + r.width / 2, r.top + r.height / 2],
                    d: [1, 0], hw: r.width / 2, hh: r.height / 2});
  }
  const corners = i => {
    const [dx, dy] = i.d, nx = -dy, ny = dx, out = [];
    for (const [a, b] of [[1, 1], [1, -1], [-1, 1], [-1, -1]])
      out.push([i.c[0] + a * i.hw * dx + b * i.hh * nx, i.c[1] + a * i.hw * dy + b * i.hh * ny]);
    return out;
  };
  const depth = (i, j) => {  // separating-axis test: the smallest penetration over the four axes (0: apart)
    let best = Infinity;
    const ci = corners(i), cj = corners(j);
    for (const [ax, ay] of [i.d, [-i.d[1], i.d[0]], j.d, [-j.d[1], j.d[0]]]) {
      const pi = ci.map(p => p[0] * ax + p[1] * ay), pj = cj.map(p => p[0] * ax + p[1] * ay);
      const gap = Math.min(Math.max(...pi), Math.max(...pj)) - Math.max(Math.min(...pi), Math.min(...pj));
      if (gap <= 0) return 0;
      best = Math.min(best, gap);
    }
    return best;
  };
  const overlaps = [];
  for (let a = 0; a < items.length; a++) for (let b = a + 1; b < items.length; b++) {
    const i = items[a], j = items[b];
    if (i.el === j.el || i.el.contains(j.el) || j.el.contains(i.el)) continue;
    const pen = depth(i, j);
    if (pen > 2 && pen > share * 2 * Math.min(i.hh, j.hh, i.hw, j.hw)) overlaps.push(`${i.t} <> ${j.t}`);
  }
  // 3. chart labels
  const small = [];
  for (const t of main.querySelectorAll('.stPlotlyChart svg text')) {
    if (!t.textContent.trim() || !shown(t)) continue;
    const px = parseFloat(getComputedStyle(t).fontSize);
    if (px < minPx) small.push(`${t.textContent.slice(0, 25)} ${px}px`);
  }
  // 4. primary buttons
  const hidden = [...main.querySelectorAll('button[data-testid="stBaseButton-primary"]')].filter(b => {
    const r = b.getBoundingClientRect();
    return !(r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight + 1 && r.right <= innerWidth + 1);
  }).map(b => b.innerText);
  const primary = main.querySelectorAll('button[data-testid="stBaseButton-primary"]').length;
  return {cut, overlaps: [...new Set(overlaps)], small: [...new Set(small)], hidden, primary};
}
""".replace("GRID", GRID)


def audit(pg) -> dict:
    # A grid draws its canvas once it has been on screen: bring each into view, then go back to where the page was.
    y = pg.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTop")
    for frame in pg.query_selector_all("[data-testid='stMain'] [data-testid='stDataFrame']"):
        frame.scroll_into_view_if_needed()
        pg.wait_for_function("f => f.querySelector('canvas[data-testid=data-grid-canvas]')", arg=frame, timeout=20_000)
    pg.evaluate("y => document.querySelector('[data-testid=stMain]').scrollTo(0, y)", y)
    return pg.evaluate(AUDIT, ["[data-testid='stMain']", MIN_CHART_PX, OVERLAP_SHARE])


TITLES = {"": "lossless speculative sampling", "verifiers": "Verifiers side by side"}
# Views with results, opened from a link (a link reruns them): what the class sees after a click.
RESULTS = {"batch": "B=16&K=4", "real-text": "rounds=3"}
# A link that restores the settings and the prediction, whose result waits for its button (docs/tour.md's
# rule for a result that answers a prediction): (url path, link query, button, a text its result shows).
LINKED_CLICKS = [("bug-lab", "bug=resample_from_p&n=20000", "Run the test", "Verdict:")]
# Results no link restores: the button a teacher clicks on the fresh page, and a text its result shows.
CLICKS = {
    "why-exact": ("Sample x1", "the last single verification, traced"),
    "verifiers": ("Measure every rule", "seeded sequences per rule"),
    "find-the-bug": ("Reveal", "the eye picks it out from N"),
}


@pytest.fixture(scope="module")
def app_url():
    with browser.streamlit_server() as url:
        yield url


def titles() -> dict[str, str]:
    return {**{lesson.url_path: lesson.title for lesson in flow.LESSONS}, **TITLES}


def settle(pg, text: str) -> None:
    browser.wait_idle(pg, text, 120_000)
    pg.wait_for_function("() => !document.querySelector('[data-testid=stSpinner]')", timeout=120_000)  # a run's spinner


def open_view(pg, url: str, path: str, query: str, text: str) -> None:
    pg.goto(f"{url}/{path}?{query + '&' if query else ''}present=1")
    settle(pg, text)
    pg.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
    pg.wait_for_timeout(300)


def views() -> list[tuple[str, str, str, str | None]]:
    """(url path, link query, a text the view shows, button to click first or None) for each view audited."""
    names = titles()
    fresh = [(lesson.url_path, "", names[lesson.url_path], None) for lesson in flow.LESSONS]
    linked = [(path, query, names[path], None) for path, query in RESULTS.items()]
    clicked = [(path, "", text, button) for path, (button, text) in CLICKS.items()]
    return fresh + linked + clicked + [(path, query, text, button) for path, query, button, text in LINKED_CLICKS]


@pytest.mark.parametrize("zoom", [1.0, 1.5], ids=["1280x720", "zoom150"])
def test_every_page_fits_a_projector_in_presenter_mode(app_url, zoom):
    SHOTS.mkdir(parents=True, exist_ok=True)
    names = titles()
    faults = {}
    with browser.browser_page(1280, 720, zoom) as pg:
        for path, query, text, button in views():
            open_view(pg, app_url, path, query, names[path] if button else text)
            if button:
                browser.click_button(pg, button)
                settle(pg, text)
            tag = f"{path or 'home'}{'-results' if query else ''}{'-clicked' if button else ''}-z{zoom:g}"
            pg.screenshot(path=str(SHOTS / f"{tag}.png"))
            assert browser.exceptions(pg) == [], tag
            found = audit(pg)
            problems = {k: found[k] for k in ("cut", "overlaps", "small") if found[k]}
            if not (query or button) and found["hidden"]:  # a fresh page: its primary button in view without scrolling
                problems["primary button below the fold"] = found["hidden"]
            if problems:
                faults[tag] = problems
    (SHOTS / f"faults-z{zoom:g}.json").write_text(json.dumps(faults, indent=1, ensure_ascii=False))
    assert faults == {}


def test_negative_control_the_audit_flags_each_fault():
    page = """
    <div data-testid="stMain" style="width: 600px">
      <div style="width: 80px; overflow: hidden; white-space: nowrap">a sentence far wider than its box</div>
      <input type="text" style="width: 40px" value="a value wider than the input">
      <p style="position: absolute; top: 200px; left: 10px">overlapping words</p>
      <p style="position: absolute; top: 204px; left: 14px">words overlapping</p>
      <div class="stPlotlyChart" style="width: 300px"><svg width="400" height="100">
        <text x="280" y="20" style="font-size: 16px">a title past the edge</text>
        <text x="10" y="50" style="font-size: 9px">tiny label</text>
        <text x="100" y="80" transform="rotate(-45 100 80)" style="font-size: 16px">rotated one</text>
        <text x="108" y="80" transform="rotate(-45 108 80)" style="font-size: 16px">rotated two</text>
        <text x="200" y="80" transform="rotate(-45 200 80)" style="font-size: 16px">apart a</text>
        <text x="240" y="80" transform="rotate(-45 240 80)" style="font-size: 16px">apart b</text>
      </svg></div>
      <button data-testid="stBaseButton-primary" style="position: absolute; top: 2000px">Run</button>
    </div>"""
    with browser.browser_page(1280, 720) as pg, closing(pg.context):
        pg.set_content(page)
        found = audit(pg)
    assert any("a sentence far wider" in c for c in found["cut"])
    assert any("a value wider" in c for c in found["cut"])
    assert "chart: a title past the edge" in found["cut"]
    assert "overlapping words <> words overlapping" in found["overlaps"]
    assert "rotated one <> rotated two" in found["overlaps"]
    assert not any("apart a" in o for o in found["overlaps"])  # rotated side by side: their boxes overlap, not them
    assert found["small"] == ["tiny label 9px"]
    assert found["hidden"] == ["Run"]



def test_negative_control_the_audit_reads_every_cell_of_a_grid():
    """A grid's cells are pixels: the audit must still flag a cut cell (one below the rows drawn), a cut
    header and columns past the grid's right edge, and pass a grid that fits."""
    with browser.streamlit_server(script="tests/apps/cut_tables.py") as url, browser.browser_page(1280, 720) as pg:
        pg.goto(url)
        browser.wait_idle(pg, "Cut tables", 120_000)
        found = audit(pg)
    assert "table: a sentence far wider than its column [column text]" in found["cut"]
    assert "table header: a header far wider than its column" in found["cut"]
    assert any(c.startswith("table: column column 11 past the table's right edge") for c in found["cut"])
    assert not any("short" in c or "fits" in c or "column column 0 " in c for c in found["cut"]), found["cut"]


# Where a row of a grid is, once the page is scrolled to put the grid's top under the app's header bar:
# drawn in the grid without scrolling it (the grid's own scroll at its top), and inside the window.
ROW_IN_VIEW = """([frame, text]) => {
  const cv = frame.querySelector('canvas[data-testid="data-grid-canvas"]');
  const g = (GRID)(cv);
  const rowH = r => typeof g.rowHeight === 'number' ? g.rowHeight : g.rowHeight(r);
  const rows = [];
  for (let r = 0; r < g.rows; r++)
    if (g.columns.some((_, c) => String(g.getCellContent([c, r]).displayData) === text)) rows.push(r);
  if (rows.length !== 1) return {error: `${rows.length} rows show ${text}`};
  const r = rows[0];
  // The app's header bar stays over the page's top: the window a class sees starts below it.
  const below = document.querySelector('[data-testid="stHeader"]').getBoundingClientRect().bottom;
  const main = document.querySelector('[data-testid="stMain"]');
  main.scrollTop += frame.getBoundingClientRect().top - below;
  let top = g.headerHeight;
  for (let i = 0; i < r; i++) top += rowH(i);
  const box = cv.getBoundingClientRect(), bottom = top + rowH(r);
  return {row: r, scrolled: (g.cellYOffset || 0) !== 0 || (g.translateY || 0) !== 0,
          inGrid: bottom <= cv.clientHeight + 0.5,
          inWindow: box.top + top >= below - 0.5 && box.top + bottom <= innerHeight + 0.5};
}""".replace("GRID", GRID)


@pytest.mark.parametrize("seed", [0, 7])  # the mistake is histogram 18, then 20 (the last)
def test_find_the_bug_reveal_shows_the_mistakes_row_in_view(app_url, seed):
    """After Reveal at 1280 x 720 in presenter mode, the mistake's row of the table is on screen with the table.

    Negative control in the same view: histogram 20, or 19 where 20 is the mistake, lies below the window.
    """
    mistake = "shared_noise_stream"
    odd = fb.place(seed) + 1
    with browser.browser_page(1280, 720) as pg, closing(pg.context):
        open_view(pg, app_url, "find-the-bug", f"mistake={mistake}&n=300&seed={seed}", "your guess")
        browser.click_button(pg, "Reveal")
        settle(pg, "the eye picks it out from N")
        frame = pg.query_selector("[data-testid='stMain'] [data-testid='stDataFrame']")
        frame.scroll_into_view_if_needed()
        pg.wait_for_function("f => f.querySelector('canvas[data-testid=data-grid-canvas]')", arg=frame, timeout=20_000)
        where = pg.evaluate(ROW_IN_VIEW, [frame, mistake])
        pg.wait_for_timeout(300)
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"find-the-bug-revealed-seed{seed}.png"))
        other = pg.evaluate(ROW_IN_VIEW, [frame, str(20 if odd != 20 else 19)])
    assert where == {**where, "scrolled": False, "inGrid": True, "inWindow": True}, where
    assert not (other["inGrid"] and other["inWindow"]), other  # the check can fail: a far row is out of view
