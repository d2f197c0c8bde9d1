"""Every page on a classroom projector (issue 19.2): 1280 x 720 in presenter mode, and at 150 % zoom.

For each page of specviz.app.flow.LESSONS, opened fresh and (Bug lab, Batch) from a link that
restores a result, the audit below checks in Chromium that

- no text is cut by its box (an element that clips, or an input, narrower than its text; chart text
  past the chart's edge);
- no two pieces of text overlap, chart labels included (rotated tick labels as rotated boxes);
- every chart label is at least 14 px;
- the page's primary button is wholly in view without scrolling (fresh open).

A negative control builds a page with one of each fault and requires the audit to flag them all.
Screenshots of every view land in artifacts/screenshots/projector/.
"""

from __future__ import annotations

import json
from contextlib import closing

import browser
import pytest

from specviz.app import flow

pytestmark = [pytest.mark.browser, pytest.mark.skipif(browser.missing() is not None, reason=str(browser.missing()))]

SHOTS = browser.ROOT / "artifacts" / "screenshots" / "projector"
MIN_CHART_PX = 14.0
OVERLAP_SHARE = 0.15  # boxes sharing more than this share of the smaller one overlap (kerning touches are fine)

AUDIT = """
([root, minPx, share]) => {
  const main = document.querySelector(root);
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
"""


def audit(pg) -> dict:
    return pg.evaluate(AUDIT, ["[data-testid='stMain']", MIN_CHART_PX, OVERLAP_SHARE])


TITLES = {"": "lossless speculative sampling", "verifiers": "Verifiers side by side"}
# Views with results, opened from a link (a link reruns them): what the class sees after a click.
RESULTS = {"bug-lab": "bug=resample_from_p&n=20000", "batch": "B=16&K=4"}


@pytest.fixture(scope="module")
def app_url():
    with browser.streamlit_server() as url:
        yield url


def titles() -> dict[str, str]:
    return {**{lesson.url_path: lesson.title for lesson in flow.LESSONS}, **TITLES}


def open_view(pg, url: str, path: str, query: str, text: str) -> None:
    pg.goto(f"{url}/{path}?{query + '&' if query else ''}present=1")
    browser.wait_idle(pg, text, 120_000)
    pg.evaluate("() => document.querySelector('[data-testid=stMain]').scrollTo(0, 0)")
    pg.wait_for_timeout(300)


@pytest.mark.parametrize("zoom", [1.0, 1.5], ids=["1280x720", "zoom150"])
def test_every_page_fits_a_projector_in_presenter_mode(app_url, zoom):
    SHOTS.mkdir(parents=True, exist_ok=True)
    names = titles()
    faults = {}
    with browser.browser_page(1280, 720, zoom) as pg:
        views = [(lesson.url_path, "") for lesson in flow.LESSONS] + list(RESULTS.items())
        for path, query in views:
            open_view(pg, app_url, path, query, "Verdict:" if path == "bug-lab" and query else names[path])
            tag = f"{path or 'home'}{'-results' if query else ''}-z{zoom:g}"
            pg.screenshot(path=str(SHOTS / f"{tag}.png"))
            assert browser.exceptions(pg) == [], tag
            found = audit(pg)
            problems = {k: found[k] for k in ("cut", "overlaps", "small") if found[k]}
            if not query and found["hidden"]:  # a fresh page: its primary button in view without scrolling
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
