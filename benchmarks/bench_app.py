"""How fast the app answers, in a real browser: page loads and clicks at default settings.

    python benchmarks/bench_app.py [--repeat 3] [--present]

Starts `streamlit run app.py` on loopback and drives Debian's Chromium with Playwright (the
harness of tests/browser.py). Each figure is the time from the action to the moment the
answer's text is on screen and the script has stopped running, median of the repeats. The
target is about one second at default settings; the bound printed beside each time is that
second, so the ratio reads "fraction of the budget used". The first load of a fresh server
also pays for Python imports and is reported separately. --present times the same steps in
presenter mode (?present=1: every chart restyled, larger fonts), as a projected demo runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import browser  # noqa: E402

BUDGET_S = 1.0

WAIT_JS = (
    "t => { const m = document.querySelector('[data-testid=\"stMain\"]');"
    " const s = document.querySelector('[data-testid=\"stStatusWidget\"]');"
    " return m && m.innerText.includes(t) && !(s && s.innerText.includes('Running')); }"
)


def timed(page, action, text: str, timeout_ms: int = 60_000) -> float:
    t0 = time.perf_counter()
    action()
    page.wait_for_function(WAIT_JS, arg=text, timeout=timeout_ms)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--present", action="store_true", help="presenter mode (?present=1)")
    args = ap.parse_args()
    mode = "present=1" if args.present else ""

    def at(url: str) -> str:
        return url if not mode else url + ("&" if "?" in url else "?") + mode

    if browser.missing():
        sys.exit(f"cannot run: {browser.missing()}")
    rows: dict[str, list[float]] = {}
    with browser.streamlit_server() as url, browser.browser_page() as page:
        first = timed(page, lambda: page.goto(at(url)), "Where to start")
        for r in range(args.repeat):
            steps = [
                ("load Home", lambda: page.goto(at(url)), "Where to start"),
                ("load Why it is exact", lambda: page.goto(at(f"{url}/why-exact")), "largest |output − p|"),
                ("Why: pick bug resample_from_p", lambda: browser.choose(page, "Bug", "resample_from_p"),
                 "Resample from p after a rejection."),
                ("Why: Sample x100,000", lambda: browser.click_button(page, "Sample x100,000"),
                 "100,000 rows"),
                ("load Batch", lambda: page.goto(at(f"{url}/batch")), "Run batch"),
                ("Batch: Run batch", lambda: browser.click_button(page, "Run batch"), "mean tokens per row"),
                ("load Bug lab", lambda: page.goto(at(f"{url}/bug-lab")), "Run the test"),
                ("Bug lab: Run the test (N = 100,000)", lambda: browser.click_button(page, "Run the test"),
                 "Verdict:"),
                ("load Tokens per step", lambda: page.goto(at(f"{url}/tokens-per-step")), "speedup at K"),
            ]  # fmt: skip
            for name, action, text in steps:
                # Vary the seed-free inputs per repeat so cached answers are not what is timed.
                if name.startswith("Bug lab: Run") and r:
                    page.goto(at(f"{url}/bug-lab?seed={r}"))
                    page.wait_for_function(WAIT_JS, arg="Run the test", timeout=60_000)
                rows.setdefault(name, []).append(timed(page, action, text))
                print(f"  {name}: {rows[name][-1]:.2f} s", file=sys.stderr)
    print(f"{'presenter mode' if args.present else 'normal mode'}; first load after server start: {first:.2f} s "
          "(imports included)")  # fmt: skip
    print(f"{'step':42s} {'median s':>9} {'max s':>7} {'/ budget':>9}")
    for name, ts in rows.items():
        med = statistics.median(ts)
        print(f"{name:42s} {med:9.2f} {max(ts):7.2f} {med / BUDGET_S:9.2f}")


if __name__ == "__main__":
    main()
