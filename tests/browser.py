"""A real browser on the real app: `streamlit run app.py` driven by Playwright in Debian's Chromium.

Used by tests/test_browser.py (what AppTest cannot see: navigation, charts, screenshots) and
by benchmarks/bench_app.py (click-to-answer timings). Nothing leaves the machine: the server
listens on loopback and Chromium's background networking is off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
PAGES = {  # url path -> a text the page must show once rendered
    "": "lossless speculative sampling",
    "why-exact": "Why it is exact",
    "batch": "Batch",
    "bug-lab": "Bug lab",
    "tokens-per-step": "Tokens per step",
    "verifiers": "Verifiers",
    "sampling-settings": "Sampling settings",
    "interview": "Interview walkthrough",
    "real-text": "Real text",
    "one-round": "One round, step by step",
    "find-the-bug": "Find the bug",
}


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return "Debian's chromium is not installed (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PIDS: dict[str, int] = {}  # base URL -> pid of the server started by streamlit_server
_LOGS: dict[str, str] = {}  # base URL -> its log file


def server_log(url: str) -> str:
    """What the server at ``url`` has logged so far (tracebacks land here, not in the page)."""
    return Path(_LOGS[url]).read_text()


def server_pid(url: str) -> int:
    """The process id of the server :func:`streamlit_server` started at ``url`` (for its memory)."""
    return _PIDS[url]


@contextlib.contextmanager
def streamlit_server(timeout: float = 60.0, extra_args: Sequence[str] = (), script: str = "app.py") -> Iterator[str]:
    """Start `streamlit run <script>` (with ``extra_args``) on a free loopback port; yield its base URL.

    ``script`` is relative to the repository root, which is the server's working directory, so
    any script (benchmarks/hello.py, the floor load.py measures against) reads the same
    .streamlit/config.toml as the app.
    """
    port = free_port()
    # No --server.address: .streamlit/config.toml's loopback default is what the tests exercise.
    cmd = [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false", *extra_args]  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # The server's log goes to a file, not a pipe: a pipe nobody reads fills up and stalls a long run.
    log = tempfile.NamedTemporaryFile("w+", prefix="streamlit-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    _PIDS[url] = proc.pid
    _LOGS[url] = log.name
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                out = Path(log.name).read_text()
                raise RuntimeError(f"streamlit did not start: {out[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        _PIDS.pop(url, None)
        _LOGS.pop(url, None)
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        Path(log.name).unlink(missing_ok=True)


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1000, zoom: float = 1.0) -> Iterator[object]:
    """A Chromium page whose window is ``width`` x ``height`` screen pixels at ``zoom``.

    Browser zoom is emulated as it works: the page sees a viewport of width/zoom x height/zoom
    CSS pixels drawn with ``zoom`` device pixels each (150 % of 1280 x 720 leaves 853 x 480).
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield new_page(browser, width, height, zoom)
        finally:
            browser.close()


def new_page(browser: object, width: int = 1400, height: int = 1000, zoom: float = 1.0) -> object:
    """Another page (own cookies, own Streamlit session) in a running browser; see :func:`browser_page`."""
    viewport = {"width": round(width / zoom), "height": round(height / zoom)}
    return browser.new_context(viewport=viewport, device_scale_factor=zoom).new_page()  # type: ignore[attr-defined]


def main_text(page: object) -> str:
    """The text of the page's main area (not the sidebar)."""
    return page.inner_text("[data-testid='stMain']")  # type: ignore[attr-defined]


def wait_idle(page: object, text: str | None = None, timeout_ms: int = 30_000) -> None:
    """Wait until the main area shows ``text`` (if given) and the script has stopped running."""
    page.wait_for_selector("[data-testid='stMain']", timeout=timeout_ms)  # type: ignore[attr-defined]
    if text:
        page.wait_for_function(  # type: ignore[attr-defined]
            "t => (document.querySelector('[data-testid=\"stMain\"]') || {innerText: ''})"
            ".innerText.toLowerCase().includes(t)",
            arg=text.lower(),
            timeout=timeout_ms,
        )
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => !document.querySelector('[data-testid=\"stSkeleton\"]')"
        " && !(document.querySelector('[data-testid=\"stStatusWidget\"]') || {innerText: ''})"
        ".innerText.includes('Running')",
        timeout=timeout_ms,
    )
    # Widgets and charts fill in after the script's messages arrive: wait for a quiet page.
    last, stable, deadline = None, 0, time.monotonic() + timeout_ms / 1000
    while stable < 3 and time.monotonic() < deadline:
        page.wait_for_timeout(300)  # type: ignore[attr-defined]
        now = page.inner_html("[data-testid='stMain']")  # type: ignore[attr-defined]
        stable = stable + 1 if now == last else 0
        last = now


def dialogs(page: object) -> list[str]:
    """Texts of any modal dialogs (e.g. Streamlit's "Page not found")."""
    return [d.inner_text() for d in page.query_selector_all("[role='dialog']")]  # type: ignore[attr-defined]


def exceptions(page: object) -> list[str]:
    """Texts of any exception boxes Streamlit shows."""
    return [e.inner_text() for e in page.query_selector_all("[data-testid='stException']")]  # type: ignore[attr-defined]


def choose(page: object, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` (a combobox in Streamlit 1.67)."""
    box = page.get_by_role("combobox", name=label)  # type: ignore[attr-defined]
    box.click()
    box.fill(option)  # typing filters the list; it also opens it where a click alone did not
    page.get_by_role("option", name=option, exact=True).click()  # type: ignore[attr-defined]


def click_button(page: object, text: str) -> None:
    page.get_by_role("button", name=text).first.click()  # type: ignore[attr-defined]


def outside_viewport(page: object, selector: str) -> list[str]:
    """Elements matching ``selector`` that are not wholly inside the viewport, as "text @ box"."""
    return page.evaluate(  # type: ignore[attr-defined]
        """sel => [...document.querySelectorAll(sel)].filter(e => {
              const r = e.getBoundingClientRect();
              return r.top < 0 || r.left < 0 || r.bottom > innerHeight + 0.5 || r.right > innerWidth + 0.5;
           }).map(e => { const r = e.getBoundingClientRect();
              return `${e.innerText.slice(0, 40)} @ (${r.left|0},${r.top|0})-(${r.right|0},${r.bottom|0})`; })""",
        selector,
    )


def truncated(page: object, selector: str) -> list[str]:
    """Texts under ``selector`` cut by their box (ellipsis or clipping): wider than they are shown."""
    return page.evaluate(  # type: ignore[attr-defined]
        """sel => [...document.querySelectorAll(sel)].flatMap(e => [e, ...e.querySelectorAll('*')])
              .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible'
                           && e.innerText.trim())
              .map(e => e.innerText.slice(0, 40))""",
        selector,
    )


def pointers(page: object, needle: str) -> list[str]:
    """Attributes of any element that make the browser fetch or link to a URL containing ``needle``."""
    return page.evaluate(  # type: ignore[attr-defined]
        """needle => {
             const out = [];
             for (const e of document.querySelectorAll('*')) {
               for (const a of e.attributes) {
                 const v = a.value.toLowerCase();
                 if (['href', 'src', 'srcset', 'xlink:href', 'action', 'formaction', 'poster', 'data',
                      'background', 'style'].includes(a.name) && v.includes(needle))
                   out.push(`<${e.tagName.toLowerCase()} ${a.name}="${a.value.slice(0, 80)}">`);
               }
             }
             return out; }""",
        needle.lower(),
    )
