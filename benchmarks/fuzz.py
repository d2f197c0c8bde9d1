"""A bounded fuzz run over every page's link parameters and widgets, through streamlit's AppTest.

    python benchmarks/fuzz.py [--budget 600] [--seed 0] [--slow 5] [--json out.json]

Each page of the page table (specviz.app.flow.LESSONS) is opened with hostile values in its link parameters (read from
the page's ``links.*_param`` calls): one parameter at a time over every edge value, then random
combinations until the time budget is spent; then each widget of the opened page is set to edge
values (number boxes: NaN excluded for integer boxes, which Streamlit itself cannot hold, see
tests/test_app_faults.py) and every button clicked. For each run it counts:

- tracebacks: an exception Streamlit caught (the visitor would see its generic error);
- escaped errors: an InputError that reached app.py's last-resort handler (a page let it through);
- payloads rendered: a markup or script payload that reached the page as live Markdown;
- slow answers: a run (page load, widget change or click) over ``--slow`` seconds of wall time.

Not a test (tests/test_safety.py and tests/test_links.py are): a count to report, printed with the
command, the date and the runs behind each number. Wall times depend on the machine's load.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from streamlit.testing.v1 import AppTest  # noqa: E402
from test_safety import PAYLOADS, live_markdown, rendered_markdown  # noqa: E402

ESCAPED_KEY = "app.escaped_input_error"
NUMBERS = ["", " ", "nan", "NaN", "inf", "-inf", "1e-320", "-1e-320", "1e308", "-1e308", "1e400", "-1", "0", "0.5",
           "1", "3", "18446744073709551617", "9" * 400, "0x10", "1_000", " 7 ", "1e3", "2**31", "+4"]  # fmt: skip
TEXTS = [*PAYLOADS, "", "x" * 5000, "1, 2, 3", "0.5, 0.5", "1/0, 50%", "\u202e\u0000\ufeff", "🎯" * 100, "-inf, -inf"]


def pages_and_params() -> dict[str, dict[str, str]]:
    """{page file: {link parameter: kind}} from the page table and each page's *_param calls."""
    from specviz.app.flow import LESSONS

    out = {}
    for page in (lesson.file for lesson in LESSONS):
        params = {}
        for c in ast.walk(ast.parse((ROOT / page).read_text())):
            kind = getattr(c.func, "attr", "") if isinstance(c, ast.Call) else ""
            if kind.endswith("_param") and c.args and isinstance(c.args[0], ast.Constant):
                params[str(c.args[0].value)] = kind
        out[page] = params
    return out


def values_for(kind: str) -> list[str]:
    if kind in ("int_param", "float_param"):
        return NUMBERS
    if kind == "bool_param":
        return ["0", "1", "true", "yes", "2", "", *PAYLOADS[:2]]
    return NUMBERS[:6] + TEXTS  # choices, texts, float lists


class Tally:
    def __init__(self, slow: float) -> None:
        self.slow = slow
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def note(self, what: str, example: str) -> None:
        self.counts[what] += 1
        self.examples.setdefault(what, [])
        if len(self.examples[what]) < 5:
            self.examples[what].append(example[:300])

    def judge(self, at: AppTest, seconds: float, label: str, *, kind: str) -> None:
        self.counts[kind] += 1
        if at.exception:
            self.note("tracebacks", f"{label}: {[str(e.value)[:150] for e in at.exception]}")
        if ESCAPED_KEY in at.session_state:
            self.note("escaped errors", f"{label}: {at.session_state[ESCAPED_KEY]}")
        live = [b for b in rendered_markdown(at) if live_markdown(b)]
        if live:
            self.note("payloads rendered", f"{label}: {live[0][:150]}")
        if seconds > self.slow:
            self.note("slow answers", f"{label}: {seconds:.1f} s")


def timed_run(at: AppTest) -> float:
    t0 = time.perf_counter()
    at.run()
    return time.perf_counter() - t0


def open_with(page: str, query: dict[str, str]) -> tuple[AppTest, float]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page(page)
    at.query_params.update(query)
    return at, timed_run(at)


def widget_values(w) -> list:
    kind = type(w).__name__
    if kind == "NumberInput":
        lo = w.min if w.min is not None else -1e9
        hi = w.max if w.max is not None else 1e9
        integer = float(w.step).is_integer() and float(lo).is_integer()
        vals = [lo, hi, (lo + hi) / 2, 10**12]
        return [int(v) if integer else v for v in vals] + ([] if integer else [math.inf, -1e-320])
    if kind in ("TextInput", "TextArea"):
        return TEXTS
    if kind in ("Selectbox", "Radio"):
        return list(w.options)[:6]
    if kind in ("Checkbox", "Toggle"):
        return [True, False]
    if kind == "Slider":
        return [w.min, w.max] if not isinstance(w.value, tuple) else []
    return []


def fuzz_widgets(page: str, tally: Tally, rng: random.Random, deadline: float) -> None:
    at, _ = open_with(page, {})
    for kind in ("number_input", "text_input", "text_area", "selectbox", "radio", "checkbox", "toggle", "slider"):
        for w in list(getattr(at, kind)):
            for v in widget_values(w):
                if time.perf_counter() > deadline:
                    return
                try:
                    at2, _ = open_with(page, {})
                    getattr(at2, kind)(key=w.key).set_value(v) if w.key else None
                    seconds = timed_run(at2)
                except Exception as e:  # noqa: BLE001 - AppTest refusing the value is not the app's fault
                    tally.note("harness refused", f"{page} {w.key}={v!r}: {type(e).__name__}: {e}")
                    continue
                tally.judge(at2, seconds, f"{page} widget {w.key}={str(v)[:40]!r}", kind="widget runs")
    for b in list(at.button):
        if time.perf_counter() > deadline:
            return
        at2, _ = open_with(page, {})
        try:
            at2.button(key=b.key).click()
            seconds = timed_run(at2)
        except Exception as e:  # noqa: BLE001
            tally.note("harness refused", f"{page} click {b.key}: {type(e).__name__}: {e}")
            continue
        tally.judge(at2, seconds, f"{page} click {b.key}", kind="clicks")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=600.0, help="seconds of fuzzing in all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=5.0, help="an answer over this many seconds counts as slow")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tally = Tally(args.slow)
    start = time.perf_counter()
    deadline = start + args.budget
    plan = pages_and_params()
    # 1. One parameter at a time, every edge value (each page gets an equal share of half the budget).
    share = args.budget / 2 / len(plan)
    for page, params in plan.items():
        page_end = min(deadline, time.perf_counter() + share)
        single = [(p, v) for p, kind in params.items() for v in values_for(kind)]
        rng.shuffle(single)
        for p, v in single:
            if time.perf_counter() > page_end:
                break
            at, seconds = open_with(page, {p: v})
            tally.judge(at, seconds, f"{page}?{p}={v[:40]!r}", kind="page loads")
    # 2. Widgets and clicks, page by page (a quarter of the budget).
    share = args.budget / 4 / len(plan)
    for page in plan:
        fuzz_widgets(page, tally, rng, min(deadline, time.perf_counter() + share))
    # 3. Random combinations of link parameters until the budget is spent.
    pages = [p for p in plan if plan[p]]
    while time.perf_counter() < deadline:
        page = rng.choice(pages)
        query = {p: rng.choice(values_for(kind)) for p, kind in plan[page].items() if rng.random() < 0.5}
        at, seconds = open_with(page, query)
        tally.judge(at, seconds, f"{page}?{query}", kind="page loads")
    elapsed = time.perf_counter() - start
    report = {
        "command": "python " + " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(elapsed, 1),
        "pages": len(plan),
        "runs": {k: tally.counts[k] for k in ("page loads", "widget runs", "clicks")},
        "found": {k: tally.counts[k] for k in ("tracebacks", "escaped errors", "payloads rendered", "slow answers")},
        "harness refused": tally.counts["harness refused"],
        "examples": tally.examples,
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    bad = sum(report["found"][k] for k in ("tracebacks", "escaped errors", "payloads rendered"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
