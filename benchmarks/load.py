"""What one `streamlit run app.py` holds: concurrent sessions driven over the app's own websocket.

    python benchmarks/load.py [--sessions 10] [--idle 50] [--soak-s 60] [--batch-cap]

Starts the app on a free loopback port (tests/browser.py) and talks to it the way a browser
tab does, without a browser: each simulated visitor opens the websocket at /_stcore/stream,
asks for a page (a BackMsg rerun_script with the page's url path and query string), reads
ForwardMsgs until the script has finished, and clicks a button by sending its widget id with
a trigger value. Nothing is drawn, so the client costs little and the two cores measure the
server. Figures:

- page load: from the request to the end of the page's script run (a fresh session each time);
- Bug-lab run: from the click on "Run the test" (N = 100,000, a seed per visitor so the cache
  does not answer) to the end of the run, all visitors clicking at once;
- memory: the server's resident set (/proc/PID/status VmRSS) at start, with --idle sessions
  open, and after a soak of --soak-s seconds of visitors loading every page and running the
  Bug lab with fresh seeds (bounded by time and by a cap on rounds).

--batch-cap times one Batch click at the row cap and one at the element cap (limits.py).

--cpu measures what each action costs the server in CPU seconds (/proc/PID/stat, user + system,
every thread), one visitor at a time: a fresh load of every page at default settings and a
Bug-lab click, beside the same figure for a hello-world app (benchmarks/hello.py) served in the
same run twice: with Streamlit's defaults (a full garbage collection after every run), the floor
the ratio is taken against, and with the app's own config, which turns that collection off.
The machine may be shared: every figure is printed with the load average beside it.

--crowd N has N students open a page from their own link at once and click its heavy button
(--heavy bug-lab, the default, real-text, or tokens: Tokens per step at its cap, heavy on load):
page-load and click p50/p95, whether each saw only their own settings (the link the server wrote
back) and was shown a place in the queue, peak RSS and CPU. With --url and --pids it drives an app
already running, e.g. behind serve/hall.sh, and
--kill-after S kills the last of those processes S seconds in, then reconnects the students it
dropped with their links. docs/serving.md has the figures.
Loopback only, every count and duration bounded; printed as medians and p95 with the bound
or baseline they are compared with.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import browser  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402
from streamlit.proto.WidgetStates_pb2 import WidgetState  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from specviz.app import limits, warm  # noqa: E402

PAGES = ["", "why-exact", "batch", "bug-lab", "tokens-per-step"]
MAX_SESSIONS = 200  # bounds on what the script may open, whatever it is asked
MAX_SOAK_S = 600
MAX_SOAK_ROUNDS = 500
TIMEOUT_S = 300.0  # one script run


class Visitor:
    """One browser tab's worth of protocol: a session, page loads, button clicks."""

    def __init__(self, url: str) -> None:
        self.ws_url = url.replace("http://", "ws://") + "/_stcore/stream"
        self.ws = None
        self.buttons: dict[str, str] = {}  # label -> widget id, from the last run
        self.texts: list[str] = []  # markdown and alert bodies of the last run
        self.numbers: dict[str, float] = {}  # number_input label -> the value the server sent
        self.link = ""  # the query string the server last put in the address bar
        self.page = ""
        self.query = ""

    async def open(self) -> None:
        self.ws = await connect(self.ws_url, subprotocols=["streamlit"], max_size=2**26)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def _run(self, widgets: list[WidgetState]) -> float:
        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_name = self.page
        msg.rerun_script.widget_states.widgets.extend(widgets)
        self.buttons, self.texts, self.numbers = {}, [], {}
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        while True:
            raw = await asyncio.wait_for(self.ws.recv(), TIMEOUT_S)
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                which = el.WhichOneof("type")
                if which == "button":
                    self.buttons[el.button.label] = el.button.id
                elif which == "number_input":
                    ni = el.number_input
                    self.numbers[ni.label] = ni.value if ni.HasField("value") else ni.default
                elif which == "markdown":
                    self.texts.append(el.markdown.body)
                elif which == "alert":
                    self.texts.append(el.alert.body)
                elif which == "metric":
                    self.texts.append(el.metric.label)
                elif which == "exception":
                    raise RuntimeError(f"the page raised: {el.exception.type}: {el.exception.message}")
            elif kind == "page_info_changed":
                self.link = fwd.page_info_changed.query_string
            elif kind == "script_finished":
                if fwd.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    return time.perf_counter() - t0

    async def load(self, page: str, query: dict[str, str] | None = None) -> float:
        self.page, self.query = page, urlencode(query or {})
        return await self._run([])

    async def click(self, label: str, expect: str) -> float:
        ws = WidgetState(id=self.buttons[label], trigger_value=True)
        seconds = await self._run([ws])
        if not any(expect in t for t in self.texts):
            raise RuntimeError(f"after clicking {label!r} the page did not show {expect!r}")
        return seconds


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def load_average() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def show(name: str, xs: list[float], baseline: float | None = None) -> None:
    med = statistics.median(xs)
    ratio = f"{med / baseline:9.2f}" if baseline else f"{'':9s}"
    print(f"{name:52s} {len(xs):5d} {med:9.2f} {p95(xs):8.2f} {ratio}  load {load_average()}")


def app_pages() -> list[str]:
    """Every page's url path, from the page table ("" for Home, the default page)."""
    from specviz.app.flow import LESSONS

    return [lesson.url_path for lesson in LESSONS]


SETTLE_S = 0.5  # after the last action of a measurement: the server finishes closing sessions


QUIET_CPU_S = 0.02  # CPU seconds per QUIET_WINDOW_S below which the server is idle
QUIET_WINDOW_S = 0.5
QUIET_MAX_S = 60.0


async def quiet(pid: int) -> None:
    """Wait (at most QUIET_MAX_S) until the server is idle: a background warm-up must not count."""
    deadline = time.monotonic() + QUIET_MAX_S
    while time.monotonic() < deadline:
        before = cpu_s(pid)
        await asyncio.sleep(QUIET_WINDOW_S)
        if cpu_s(pid) - before < QUIET_CPU_S:
            return
    print(f"(server {pid} still busy after {QUIET_MAX_S:.0f} s: figures include its background work)")


async def cpu_of(pid: int, actions: list) -> tuple[float, list[float]]:
    """Server CPU seconds per action and the wall times of ``actions`` (coroutines), run one by one."""
    await quiet(pid)
    before = cpu_s(pid)
    walls = [await a for a in actions]
    await asyncio.sleep(SETTLE_S)
    return (cpu_s(pid) - before) / len(walls), walls


async def cpu_table(url: str, pid: int, floors: list[tuple[str, str, int]], repeats: int) -> None:
    """Per page and per click: server CPU per action beside the hello-world floors, one visitor at a time.

    ``floors``: (name, url, pid) of hello-world servers; the ratio is against the first of them.
    """
    cpus = []
    for name, floor_url, floor_pid in floors:
        for _ in range(3):  # warm-up
            await fresh_load(floor_url, "")
        cpus.append((name, *await cpu_of(floor_pid, [fresh_load(floor_url, "") for _ in range(repeats)])))
    floor = cpus[0][1]
    print(f"{'action (one visitor at a time)':40s} {'n':>3s} {'wall med s':>10s} {'CPU s':>7s} {'/ floor':>8s}  load")
    for name, cpu, walls in cpus:
        print(f"{name:40s} {repeats:3d} {statistics.median(walls):10.3f} {cpu:7.3f} {cpu / floor:8.2f}  "
              f"{load_average()}")  # fmt: skip
    for page in app_pages():
        for _ in range(2):  # this page's first runs: imports, caches
            await fresh_load(url, page)
        cpu, walls = await cpu_of(pid, [fresh_load(url, page) for _ in range(repeats)])
        print(f"{'page load, ' + (page or 'home'):40s} {repeats:3d} {statistics.median(walls):10.3f} {cpu:7.3f} "
              f"{cpu / floor:8.2f}  {load_average()}")  # fmt: skip
    await bug_lab_visitor(url, 90_000)  # warm-up of the click
    visitors = []
    for i in range(repeats):
        v = Visitor(url)
        await v.open()
        await v.load("bug-lab", {"seed": str(90_001 + i)})  # a fresh seed: the cache cannot answer
        visitors.append(v)
    cpu, walls = await cpu_of(pid, [v.click("Run the test", "Verdict:") for v in visitors])
    for v in visitors:
        await v.close()
    print(f"{'Bug-lab run (N = 100,000, fresh seed)':40s} {repeats:3d} {statistics.median(walls):10.3f} {cpu:7.3f} "
          f"{cpu / floor:8.2f}  {load_average()}")  # fmt: skip


async def fresh_load(url: str, page: str, query: dict[str, str] | None = None) -> float:
    v = Visitor(url)
    await v.open()
    try:
        return await v.load(page, query)
    finally:
        await v.close()


async def bug_lab_visitor(url: str, seed: int) -> tuple[float, float]:
    v = Visitor(url)
    await v.open()
    try:
        load = await v.load("bug-lab", {"seed": str(seed)})
        run = await v.click("Run the test", "Verdict:")
        return load, run
    finally:
        await v.close()


async def main_async(args: argparse.Namespace, url: str, pid: int) -> None:
    sessions = min(args.sessions, MAX_SESSIONS)
    print(f"server pid {pid}, {url}; RSS at start {rss_mb(pid):.0f} MB")
    for page in PAGES:  # warm-up: imports, first runs of every page
        await fresh_load(url, page)
    rss_warm = rss_mb(pid)
    print(f"{'figure':52s} {'n':>5s} {'median s':>9s} {'p95 s':>8s} {'/ single':>9s}")

    # One visitor alone: the baseline the concurrent figures are compared with.
    single_load = [await fresh_load(url, "bug-lab", {"seed": str(10_000 + i)}) for i in range(3)]
    single_run = [(await bug_lab_visitor(url, 20_000 + i))[1] for i in range(3)]
    show("page load, Bug lab, one visitor", single_load)
    if args.only_loads:
        loads = await asyncio.gather(*(fresh_load(url, "bug-lab", {"seed": str(60_000 + i)}) for i in range(sessions)))
        show(f"page load, Bug lab, {sessions} visitors at once", list(loads), statistics.median(single_load))
        return
    show("Bug-lab run (N = 100,000), one visitor", single_run)

    # All visitors at once: each opens a session, loads the Bug lab, clicks Run.
    results = await asyncio.gather(*(bug_lab_visitor(url, 30_000 + i) for i in range(sessions)))
    show(f"page load, Bug lab, {sessions} visitors at once", [r[0] for r in results], statistics.median(single_load))
    show(f"Bug-lab run, {sessions} visitors clicking at once", [r[1] for r in results], statistics.median(single_run))
    loads = await asyncio.gather(*(fresh_load(url, PAGES[i % len(PAGES)]) for i in range(sessions)))
    show(f"page load, every page, {sessions} visitors at once", list(loads))

    # Sessions held open, idle, after one page load each.
    idle = [Visitor(url) for _ in range(min(args.idle, MAX_SESSIONS))]
    for i, v in enumerate(idle):
        await v.open()
        await v.load(PAGES[i % len(PAGES)])
    rss_idle = rss_mb(pid)
    per = (rss_idle - rss_warm) / max(len(idle), 1)
    print(
        f"{len(idle)} idle sessions open: RSS {rss_idle:.0f} MB ({per:.1f} MB per session over {rss_warm:.0f} MB warm)"
    )

    # Soak: visitors cycle through every page and a fresh Bug-lab run, bounded in time and rounds.
    deadline = time.monotonic() + min(args.soak_s, MAX_SOAK_S)
    rounds = 0
    while time.monotonic() < deadline and rounds < MAX_SOAK_ROUNDS:
        batch = [fresh_load(url, p, {"seed": str(40_000 + rounds)}) for p in PAGES]
        batch += [bug_lab_visitor(url, 50_000 + rounds)]
        await asyncio.gather(*batch)
        rounds += 1
    for v in idle:
        await v.close()
    await asyncio.sleep(2)
    print(f"after a {args.soak_s:.0f} s soak ({rounds} rounds of 5 page loads + 1 Bug-lab run, fresh seeds): "
          f"RSS {rss_mb(pid):.0f} MB")  # fmt: skip

    if args.batch_cap:
        for query, what in (
            ({"B": str(limits.MAX_BATCH_ROWS), "K": "16", "V": "2"}, "row cap (K = 16, V = 2)"),
            ({"B": "1", "K": "0", "V": str(limits.MAX_BATCH_ELEMENTS)}, "element cap (B = 1, K = 0)"),
            ({"B": "20000000", "K": "0", "V": "1"}, "B = 20,000,000, K = 0, V = 1 (capped)"),
        ):
            v = Visitor(url)
            await v.open()
            await v.load("batch", {**query, "counts": "all K", "seed": str(int(time.time()))})
            before = rss_mb(pid)
            t = await v.click("Run batch", "rows verified")
            print(f"Batch click at the {what}: {t:.2f} s, server RSS {before:.0f} -> {rss_mb(pid):.0f} MB")
            await v.close()


CLICKS = {  # the heaviest clicks: page, the link a student opens, the button, a text the answer shows
    "bug-lab": ("bug-lab", lambda i: {"seed": str(100_000 + i), "n": "100000"}, "Run the test", "Verdict:"),
    "real-text": (  # a fresh prompt per student: nothing to share, the case the issue measured at 2.5 GB for 6
        "real-text",
        lambda i: {"prompt": f"The {chr(97 + i % 26)}{'aeiou'[i // 26 % 5]} ", "seed": str(i)},
        "Run the check",
        "for the correct verifier",
    ),
    # No button: the page measures on load. At the cap, each student with their own seed.
    "tokens": ("tokens-per-step", lambda i: {"n": str(limits.MAX_TOKENS_N), "seed": str(i)}, None, None),
}


FIRST_STUDENT = 1_000_000  # the crowd's student numbers start here (the warm-up's are below)


async def crowd_visitor(url: str, heavy: str, i: int) -> dict:
    """One student: open a page from a link with their own settings, click its heavy button, check what they see."""
    page, query_of, button, expect = CLICKS[heavy]
    query = query_of(i)
    v = Visitor(url)
    t0 = time.perf_counter()
    try:
        await v.open()
        load_s = await v.load(page, query)
        mine = all(v.numbers.get(k) == int(x) for k, x in (("Seed", query.get("seed")),) if x and k in v.numbers)
        run_s = await v.click(button, expect) if button else 0.0
        shown = parse_qs(v.link)  # the address bar the server wrote holds this student's settings, not another's
        mine = mine and all(shown.get(k) == [x] for k, x in query.items())
        waited = [t for t in v.texts if t.startswith("Waiting for a turn")]
        return {"load": load_s, "run": run_s, "mine": mine, "waited": bool(waited), "error": None, "i": i}
    except Exception as e:  # a dropped websocket (a killed process): counted, then reconnected with the link
        error = f"{type(e).__name__} after {time.perf_counter() - t0:.1f} s: {str(e)[:160]}"
        return {"load": None, "run": None, "mine": None, "waited": False, "error": error, "i": i}
    finally:
        await v.close()


async def crowd(url: str, pids: list[int], sessions: int, kill_after: float | None, heavy: str = "bug-lab") -> None:
    """``sessions`` students at once, each opening ``heavy``'s page from their own link and clicking its button."""
    sessions = min(sessions, MAX_SESSIONS)
    for i in range(2 * len(pids) + 2):  # warm-up (imports, trained models): every process gets some of these
        await crowd_visitor(url, heavy, 10_000 + i)
    # The class arrives after the teacher opened the app: the background warm-up (specviz/app/warm.py
    # imports torch warm.DELAY_S after a process's first page) has finished by then, so wait for it.
    await asyncio.sleep(warm.DELAY_S + QUIET_WINDOW_S)
    for p in pids:
        await quiet(p)
    rss0 = sum(rss_mb(p) for p in pids)
    cpu0 = sum(cpu_s(p) for p in pids)
    peak = {"rss": rss0}
    alive = list(pids)

    async def watch() -> None:
        while True:
            peak["rss"] = max(peak["rss"], sum(rss_mb(p) for p in alive if Path(f"/proc/{p}").exists()))
            await asyncio.sleep(0.2)

    async def killer() -> None:
        await asyncio.sleep(kill_after)
        os.kill(pids[-1], 9)
        alive.remove(pids[-1])
        print(f"killed process {pids[-1]} {kill_after:.1f} s into the run")

    watcher = asyncio.ensure_future(watch())
    # Settings no earlier run asked for: the server keeps results per setting and shares them, so a second
    # run with the same students' links would be answered from memory (a class that reloads, not a new one).
    first = FIRST_STUDENT + secrets.randbelow(10**9) * MAX_SESSIONS
    tasks = [crowd_visitor(url, heavy, first + i) for i in range(sessions)]
    if kill_after is not None:
        tasks.append(killer())
    t0 = time.perf_counter()
    results = [r for r in await asyncio.gather(*tasks) if r is not None]
    wall = time.perf_counter() - t0
    ok = [r for r in results if r["error"] is None]
    lost = [r for r in results if r["error"] is not None]
    print(f"{sessions} students at once over {url} ({len(pids)} processes): {wall:.1f} s in all, load {load_average()}")
    print(f"{'figure':52s} {'n':>5s} {'median s':>9s} {'p95 s':>8s}")
    if ok:
        show(f"page load, {heavy} from a link", [r["load"] for r in ok])
        if CLICKS[heavy][2]:
            show(f"{CLICKS[heavy][2]!r} click, own settings", [r["run"] for r in ok])
    print(f"saw only their own settings: {sum(bool(r['mine']) for r in ok)} of {len(ok)}; shown a place in the "
          f"queue: {sum(r['waited'] for r in ok)}; lost: {len(lost)}"
          + (f" ({lost[0]['error']})" if lost else ""))  # fmt: skip
    if lost:  # the students whose process died open their link again
        again = await asyncio.gather(*(crowd_visitor(url, heavy, r["i"]) for r in lost))  # the same link
        print(f"reconnected with their link: {sum(r['error'] is None and bool(r['mine']) for r in again)} of "
              f"{len(lost)} back with their own settings and a verdict")  # fmt: skip
    watcher.cancel()
    cpu = "" if kill_after is not None else f"; server CPU {sum(cpu_s(p) for p in pids) - cpu0:.1f} s"
    print(f"server RSS (all processes) {rss0:.0f} MB after the warm-up, peak {peak['rss']:.0f} MB{cpu}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=10, help="visitors acting at once")
    ap.add_argument("--idle", type=int, default=50, help="sessions held open while idle")
    ap.add_argument("--soak-s", type=float, default=60.0)
    ap.add_argument("--batch-cap", action="store_true", help="also time a Batch click at each cap")
    ap.add_argument("--only-loads", action="store_true", help="just the single-visitor and concurrent page loads")
    ap.add_argument("--cpu", action="store_true", help="only the server CPU per page load and click, with the floor")
    ap.add_argument("--repeats", type=int, default=5, help="actions per --cpu figure")
    ap.add_argument("--crowd", type=int, default=0, help="this many students at once on the Bug lab, each with a link")
    ap.add_argument("--heavy", choices=sorted(CLICKS), default="bug-lab", help="with --crowd: the click they make")
    ap.add_argument("--url", help="an app already running (e.g. serve/hall.sh up 2: http://127.0.0.1:8501)")
    ap.add_argument("--pids", default="", help="with --url: the app processes' ids, comma-separated (memory, CPU)")
    ap.add_argument("--kill-after", type=float, help="with --crowd: kill the last of --pids this many seconds in")
    ap.add_argument("--server-args", default="", help="flags for streamlit run, e.g. '--server.fileWatcherType auto'")
    args = ap.parse_args()
    if args.crowd:
        if args.url:
            pids = [int(p) for p in args.pids.split(",") if p]
            asyncio.run(crowd(args.url, pids, args.crowd, args.kill_after, args.heavy))
            return
        with browser.streamlit_server(extra_args=args.server_args.split()) as url:
            asyncio.run(crowd(url, [browser.server_pid(url)], args.crowd, args.kill_after, args.heavy))
        return
    if args.cpu:
        extra = args.server_args.split()
        # Two floors: hello-world with Streamlit's own collection after every run (its default, the floor the
        # issue measured), and with the app's flags (.streamlit/config.toml turns that collection off).
        gc_on = [*extra, "--runner.postScriptGC", "true"]
        with browser.streamlit_server(extra_args=extra) as url, browser.streamlit_server(
            extra_args=gc_on, script="benchmarks/hello.py"
        ) as floor_url, browser.streamlit_server(extra_args=extra, script="benchmarks/hello.py") as same_url:
            print(f"app {url}, floors {floor_url} and {same_url}, flags {extra or 'from .streamlit/config.toml'}")
            repeats = max(1, min(args.repeats, 50))
            floors = [("hello-world, Streamlit's defaults (floor)", floor_url, browser.server_pid(floor_url)),
                      ("hello-world, the app's config", same_url, browser.server_pid(same_url))]  # fmt: skip
            asyncio.run(cpu_table(url, browser.server_pid(url), floors, repeats))
        return
    with browser.streamlit_server(extra_args=args.server_args.split()) as url:
        pid = browser.server_pid(url)
        try:
            asyncio.run(main_async(args, url, pid))
        except RuntimeError:
            print("server log, last lines:\n" + "\n".join(browser.server_log(url).splitlines()[-40:]))
            raise


if __name__ == "__main__":
    main()
