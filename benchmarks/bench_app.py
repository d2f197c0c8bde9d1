"""How fast the app answers a class: the server's CPU seconds and the wall time of every click.

    python benchmarks/bench_app.py [--repeat 1] [--present] [--skip-missing] [--write-doc]

Starts `streamlit run app.py` on loopback and drives Debian's Chromium with Playwright (the
harness of tests/browser.py) through a scripted class walk: every page in class order
(specviz.app.flow.LESSONS), at default and preset settings, with the clicks a lesson makes.
For each step it prints

- the server's CPU seconds (user + system time of the streamlit process from /proc, every
  thread: the script runs, Plotly's JSON, the websocket), the figure the budget is about: on a
  loaded machine wall time waits for other processes, CPU time does not;
- the wall time from the action to the answer's text on screen with the script stopped;
- the ratio of CPU to the step's budget: 1 s per click, 2 s for the Real-text check.

Then every step over its budget, listed. The walk starts on Home, as a class does, and waits
10 s untimed after it (the teacher introduces the lesson) before the first click: a fresh
server's warm-up (specviz.app.warm: torch, the court's first enumeration) runs then, and its CPU
counts in the steps it overlaps. Steps marked [cold] are the first walk of a fresh server;
later walks (--repeat) meet Streamlit's caches. --present walks in
presenter mode (?present=1). --skip-missing skips steps whose page or control an older
checkout lacks (for before/after figures from one script). --write-doc writes the table into
the bench_app section of docs/speed.md (benchmarks/speed_doc.py) with the command, the date and
the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import browser  # noqa: E402
import speed_doc  # noqa: E402  (benchmarks/ is on the path when this file runs)

CLICK_BUDGET_S = 1.0  # server CPU per click at default and preset settings
CHECK_BUDGET_S = 2.0  # the Real-text exactness check, which shows progress
TICKS = os.sysconf("SC_CLK_TCK")
PAUSE_S = 10  # after the first page of a fresh server, before the first click: the server's warm-up runs here

WAIT_JS = (
    "t => { const m = document.querySelector('[data-testid=\"stMain\"]');"
    " const s = document.querySelector('[data-testid=\"stStatusWidget\"]');"
    " return m && m.innerText.includes(t) && !(s && s.innerText.includes('Running')); }"
)


def server_cpu(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime: fields 14 and 15 of stat


def timed(page, pid: int, action: Callable[[], None], text: str, timeout_ms: int = 120_000) -> tuple[float, float]:
    """(server CPU s, wall s) from the action to ``text`` on screen with the script stopped."""
    page.wait_for_timeout(300)  # let the previous answer's trailing messages settle
    c0, t0 = server_cpu(pid), time.perf_counter()
    action()
    page.wait_for_function(WAIT_JS, arg=text, timeout=timeout_ms)
    wall = time.perf_counter() - t0
    page.wait_for_timeout(200)  # CPU the server spends sending the rest of the answer counts too
    return server_cpu(pid) - c0, wall


def walk(url: str, at: Callable[[str], str], page) -> list[tuple[str, Callable[[], None], str, float]]:
    """The class walk: (step, action, text on screen once answered, budget in CPU seconds)."""

    def go(path: str) -> Callable[[], None]:
        return lambda: page.goto(at(f"{url}/{path}"))

    def click(name: str) -> Callable[[], None]:
        return lambda: browser.click_button(page, name)

    def choose(label: str, option: str) -> Callable[[], None]:
        return lambda: browser.choose(page, label, option)

    def answer(value: str) -> Callable[[], None]:
        def act() -> None:
            box = page.get_by_label("Your answer").first
            box.fill(value)
            box.press("Enter")
            page.wait_for_function(WAIT_JS, arg="Check", timeout=60_000)
            browser.click_button(page, "Check")

        return act

    c, k = CLICK_BUDGET_S, CHECK_BUDGET_S
    return [
        ("load Home", go(""), "Where to start", c),
        ("load One round", go("one-round"), "One round", c),
        ("One round: Step", click("Step"), "round", c),
        ("load Why it is exact", go("why-exact"), "largest |output", c),
        ("Why: pick bug resample_from_p", choose("Bug", "resample_from_p"), "Resample from p after a rejection.", c),
        ("Why: Sample x100,000", click("Sample x100,000"), "100,000 rows", c),
        ("load Bug lab", go("bug-lab"), "Run the test", c),
        ("Bug lab: Run the test (N = 100,000)", click("Run the test"), "Verdict:", c),
        ("Bug lab: pick resample_from_p", choose("Bug", "resample_from_p"), "Resample from p", c),
        ("Bug lab: Run the test (bug)", click("Run the test"), "Verdict: caught", c),
        # A link restores the settings and the prediction step, never the verdict (docs/tour.md): Run shows it.
        ("Bug lab: open from a link", go("bug-lab?bug=shared_uniform&n=100000&seed=1"), "Run the test", c),
        ("Bug lab: Run the test from the link", click("Run the test"), "Verdict:", c),
        ("load Find the bug", go("find-the-bug"), "Reveal", c),
        ("Find the bug: Reveal", click("Reveal"), "chi-square", c),
        ("load Tokens per step", go("tokens-per-step"), "speedup at K", c),
        ("load Verifiers (toy example)", go("verifiers"), "accepted drafts per step", c),
        ("Verifiers: own p and q, K = 3", go("verifiers?source=pq&p=0.5,0.3,0.15,0.05&q=0.25,0.25,0.25,0.25&K=3"),
         "accepted drafts per step", c),
        ("load Batch (first visit: torch)", go("batch"), "Run batch", c),
        ("Batch: Run batch", click("Run batch"), "mean tokens per row", c),
        ("load Sampling settings", go("sampling-settings"), "Sampling settings", c),
        ("load Real text", go("real-text"), "Run the check", c),
        ("Real text: Step", click("Step"), "Round 1", c),
        ("Real text: Run the check", click("Run the check"), "critical value", k),
        ("load Interview", go("interview"), "Check", c),
        ("Interview: answer 0.7 and Check", answer("0.7"), "Right:", c),
    ]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="walks after the first (the first is cold)")
    ap.add_argument("--present", action="store_true", help="presenter mode (?present=1)")
    ap.add_argument("--skip-missing", action="store_true", help="skip steps an older checkout cannot do")
    ap.add_argument(speed_doc.FLAG, action="store_true", help=speed_doc.FLAG_HELP)
    args = ap.parse_args()
    doc = speed_doc.Section("bench_app")
    table: list[list[str]] = []
    mode = "present=1" if args.present else ""

    def at(url: str) -> str:
        return url if not mode else url + ("&" if "?" in url else "?") + mode

    if browser.missing():
        sys.exit(f"cannot run: {browser.missing()}")
    rows: dict[str, list[tuple[float, float]]] = {}
    budgets: dict[str, float] = {}
    skipped: list[str] = []
    with browser.streamlit_server(timeout=120) as url, browser.browser_page(1280, 720) as page:
        pid = browser.server_pid(url)
        for r in range(1 + args.repeat):
            for name, action, text, budget in walk(url, at, page):
                key = f"{name}{' [cold]' if r == 0 else ''}"
                try:
                    cpu, wall = timed(page, pid, action, text)
                except Exception as e:  # an older checkout: a page or control it lacks
                    if not args.skip_missing:
                        raise
                    skipped.append(f"{key}: {type(e).__name__}")
                    continue
                rows.setdefault(key, []).append((cpu, wall))
                budgets[key] = budget
                print(f"  {key}: cpu {cpu:.2f} s, wall {wall:.2f} s", file=sys.stderr)
                if r == 0 and name == "load Home":
                    page.wait_for_timeout(PAUSE_S * 1000)  # untimed: the teacher introduces the lesson
    print(f"{'presenter mode' if args.present else 'normal mode'}, 1280x720; server CPU (user + system, all threads) "
          f"and wall time per step; budget {CLICK_BUDGET_S:g} s of CPU per click, {CHECK_BUDGET_S:g} s for the "
          "Real-text check")  # fmt: skip
    print(f"{'step':48s} {'cpu s':>7} {'wall s':>7} {'cpu / budget':>13}")
    over = []
    for name, ts in rows.items():
        cpu = statistics.median(t[0] for t in ts)
        wall = statistics.median(t[1] for t in ts)
        print(f"{name:48s} {cpu:7.2f} {wall:7.2f} {cpu / budgets[name]:13.2f}")
        table.append([name, f"{cpu:.2f}", f"{wall:.2f}", f"{budgets[name]:g}", f"{cpu / budgets[name]:.2f}"])
        if cpu > budgets[name]:
            over.append(f"{name}: {cpu:.2f} s of CPU against {budgets[name]:g} s")
    print("over budget:" if over else "over budget: none")
    for line in over:
        print(f"  {line}")
    for line in skipped:
        print(f"  skipped {line}")
    if args.write_doc:
        doc.note(f"{'presenter mode' if args.present else 'normal mode'}, 1280x720; medians over the walks; "
                 f"over budget: {'; '.join(over) if over else 'none'}")  # fmt: skip
        for line in skipped:
            doc.note(f"skipped {line}")
        doc.table("Each step of the class walk: the server's CPU seconds (user + system, all threads) against the "
                  "step's budget, and the wall time until the answer is on screen",
                  ["step", "cpu s", "wall s", "budget s", "cpu / budget"], table)  # fmt: skip
        doc.write()


if __name__ == "__main__":
    main()
