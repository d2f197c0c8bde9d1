"""Serving many visitors: no visitor clears the others' caches; serve/hall.sh behind nginx (skipped without it).

Servers listen on loopback only, and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import browser  # noqa: E402
import load  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402

from specviz.app import serving  # noqa: E402

pytestmark = pytest.mark.heavy  # nginx and app processes: left out of the quick subset

WAIT_S = 15.0


def cached_functions(url: str) -> set[str]:
    """The st.cache_data / st.cache_resource functions holding values, from /_stcore/metrics."""
    with urllib.request.urlopen(url + "/_stcore/metrics", timeout=10) as r:
        text = r.read().decode()
    return set(re.findall(r'^cache_memory_bytes\{cache_type="[^"]+",cache="([^"]+)"\} [1-9]', text, re.M))


async def send_clear_cache(url: str) -> None:
    """What the "Clear cache" menu item sends, from a visitor who has loaded a page."""
    v = load.Visitor(url)
    await v.open()
    try:
        await v.load("")
        msg = BackMsg()
        msg.clear_cache = True
        await v.ws.send(msg.SerializeToString())
        await asyncio.sleep(0.5)
    finally:
        await v.close()


@pytest.fixture(scope="module")
def app_url() -> Iterator[str]:
    """One app server for the tests below that need app.py itself (a server start and its first page cost
    seconds of CPU each); each test leaves it idle, and none of them needs it cold."""
    with browser.streamlit_server() as url:
        yield url


def test_a_visitor_cannot_clear_every_visitors_caches(app_url: str) -> None:
    url = app_url
    asyncio.run(load.fresh_load(url, "sampling-settings"))  # a page that fills st.cache_data at load
    before = cached_functions(url)
    assert before, "the page filled no cache: the test would prove nothing"
    asyncio.run(send_clear_cache(url))
    deadline = time.monotonic() + WAIT_S
    while "clear_cache: refused" not in browser.server_log(url):  # the message was handled
        assert time.monotonic() < deadline, browser.server_log(url)[-2000:]
        time.sleep(0.2)
    assert cached_functions(url) == before


def test_negative_control_without_the_guard_the_message_clears_them() -> None:
    with browser.streamlit_server(script="tests/apps/cache_unguarded.py") as url:
        asyncio.run(load.fresh_load(url, ""))
        assert cached_functions(url)
        asyncio.run(send_clear_cache(url))
        deadline = time.monotonic() + WAIT_S
        while cached_functions(url):
            assert time.monotonic() < deadline, "clear_cache did not clear an unguarded app's cache"
            time.sleep(0.2)


def test_negative_control_one_visitor_alone_is_never_told_to_wait(app_url: str) -> None:
    # Run before the crowd below, so this lone check also trains the two models: the slowest a check gets.
    # Its own prompt (visitor 400): the crowd's prompts (500-504) must not find their answers cached.
    seen = [asyncio.run(load.crowd_visitor(app_url, "real-text", 400))]
    assert seen[0]["error"] is None and not seen[0]["waited"], seen


def test_heavy_clicks_queue_and_each_waiting_visitor_sees_a_place(app_url: str) -> None:
    """Five Real-text checks with their own prompts at once: two run, the others are told their place."""
    url = app_url
    asyncio.run(load.crowd_visitor(url, "real-text", 99))  # warm-up: the two models trained (once per server)
    seen = asyncio.run(gather(url, "real-text", 5))
    assert all(r["error"] is None and r["mine"] for r in seen), seen
    assert sum(r["waited"] for r in seen) >= 5 - serving.HEAVY_SLOTS, seen  # each check takes seconds: > a poll


def test_serving_docs_state_the_code_s_bounds() -> None:
    text = " ".join((ROOT / "docs" / "serving.md").read_text().split())
    assert f"`serving.HEAVY_SLOTS` = {serving.HEAVY_SLOTS} heavy computations" in text
    assert f"`serving.GC_INTERVAL_S` = {serving.GC_INTERVAL_S:g} seconds" in text
    assert f"`MALLOC_MMAP_THRESHOLD_={serving.MMAP_THRESHOLD}`" in text  # what app.py asks glibc for


def test_serving_docs_state_the_script_s_settings() -> None:
    docs = " ".join((ROOT / "docs" / "serving.md").read_text().split())
    script = HALL.read_text()
    for said, coded in (
        ("`MALLOC_MMAP_THRESHOLD_=4194304`", 'MALLOC_MMAP_THRESHOLD_:-4194304'),
        ("`max_fails=1 fail_timeout=10s`", "max_fails=1 fail_timeout=10s"),
        ("`HALL_APP_BASE`, 8601 and up", 'HALL_APP_BASE:-8601'),
        ("(default 127.0.0.1:8501)", 'HALL_ADDRESS:-127.0.0.1}"\nPORT="${HALL_PORT:-8501'),
        ("(default `/tmp/specviz-hall`)", "HALL_DIR:-/tmp/specviz-hall"),
        ("one-hour idle timeouts", "proxy_read_timeout 1h"),
    ):
        assert said in docs, said
        assert coded in script, coded


async def gather(url: str, heavy: str, n: int) -> list[dict]:
    return list(await asyncio.gather(*(load.crowd_visitor(url, heavy, 500 + i) for i in range(n))))


# --- the docs' command for a class on a LAN, against a loopback copy of a LAN address -------------------

LAN = "192.168.1.20"  # the address docs/serving.md uses in its example
LAN_COPY = "127.0.0.2"  # a loopback address standing in for it: nothing leaves the machine


def docs_command() -> list[str]:
    """The one-laptop command in docs/serving.md, as the words of its line."""
    text = (ROOT / "docs" / "serving.md").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("streamlit run app.py --server.address")]
    assert len(lines) == 1, lines
    return lines[0].split()


def upgrade_status(address: str, port: int, host: str) -> int:
    """The HTTP status of a websocket handshake on /_stcore/stream with this Host header (101: accepted)."""
    conn = http.client.HTTPConnection(address, port, timeout=10)
    try:
        conn.request("GET", "/_stcore/stream", headers={
            "Host": host, "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(), "Sec-WebSocket-Protocol": "streamlit",
        })  # fmt: skip
        return conn.getresponse().status
    finally:
        conn.close()


def loopback_copy_missing() -> bool:
    """Whether LAN_COPY cannot be bound here (Linux routes all of 127.0.0.0/8 to loopback; macOS only .1)."""
    with socket.socket() as s:
        try:
            s.bind((LAN_COPY, 0))
        except OSError:
            return True
    return False


@pytest.mark.skipif(loopback_copy_missing(), reason=f"{LAN_COPY} is not a loopback address on this machine")
def test_the_docs_lan_command_binds_one_address_and_answers_both_names() -> None:
    words = docs_command()
    assert "0.0.0.0" not in words and words.count(LAN) == 2, words  # bound to and allowed as the LAN address
    assert words[words.index("--server.address") + 1] == LAN
    allowed = [words[i + 1] for i, w in enumerate(words) if w == "--server.allowedHosts"]
    assert sorted(allowed) == sorted([LAN, "localhost"]), allowed
    port = browser.free_port()
    cmd = [sys.executable, "-m", *[LAN_COPY if w == LAN else w for w in words], "--server.port", str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://{LAN_COPY}:{port}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the docs' command did not start"
                time.sleep(0.3)
        assert upgrade_status(LAN_COPY, port, f"{LAN_COPY}:{port}") == 101  # students, by the LAN address
        assert upgrade_status(LAN_COPY, port, f"localhost:{port}") == 101  # the teacher's localhost name
        assert upgrade_status(LAN_COPY, port, "evil.example") == 403  # any other name (DNS rebinding)
        with pytest.raises(ConnectionRefusedError):  # bound to one address, not every interface
            upgrade_status("127.0.0.1", port, f"localhost:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


# --- serve/hall.sh: N processes behind nginx ---------------------------------------------------------------

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install -y nginx)")
HALL = ROOT / "serve" / "hall.sh"


def free_pair() -> int:
    """A port p with p and p + 1 free on loopback."""
    for _ in range(50):
        p = browser.free_port()
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p + 1))
            except OSError:
                continue
        return p
    raise RuntimeError("no two free consecutive ports")


def hall(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(HALL), *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def upstreams(log: Path) -> list[str]:
    return re.findall(r"upstream=(\S+)", log.read_text())


def test_hall_refuses_a_bad_count(tmp_path: Path) -> None:
    r = hall({"HALL_DIR": str(tmp_path)}, "up", "0")
    assert r.returncode != 0 and "N: expected an integer in [1, 64], got '0'" in r.stderr


@needs_nginx
def test_hall_two_processes_behind_nginx(tmp_path: Path) -> None:
    port, base = browser.free_port(), free_pair()
    env = {"HALL_DIR": str(tmp_path / "hall"), "HALL_PORT": str(port), "HALL_APP_BASE": str(base)}
    url = f"http://127.0.0.1:{port}"
    up = hall(env, "up", "2")
    try:
        assert up.returncode == 0, up.stderr
        pids = [int((tmp_path / "hall" / f"app-{base + i}.pid").read_text()) for i in range(2)]
        with urllib.request.urlopen(url + "/_stcore/health", timeout=10) as r:
            assert r.status == 200
            cookies = r.headers.get_all("Set-Cookie")
        (cookie,) = [c for c in cookies if c.startswith("specviz_hall=")]
        with pytest.raises(urllib.error.HTTPError, match="404"):  # the metrics stay behind the proxy
            urllib.request.urlopen(url + "/_stcore/metrics", timeout=10)
        bad_host = urllib.request.Request(url + "/_stcore/health", headers={"Host": "evil.example"})
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
            urllib.request.urlopen(bad_host, timeout=10)  # nginx closes it without an answer

        log = tmp_path / "hall" / "nginx-access.log"
        n0 = len(upstreams(log))
        for _ in range(8):  # one visitor (one cookie): one process
            req = urllib.request.Request(url + "/_stcore/health", headers={"Cookie": cookie.split(";")[0]})
            urllib.request.urlopen(req, timeout=10).close()
        assert len(set(upstreams(log)[n0:])) == 1, upstreams(log)[n0:]
        n0 = len(upstreams(log))
        for _ in range(24):  # new visitors (no cookie yet): both processes
            urllib.request.urlopen(url + "/_stcore/health", timeout=10).close()
        assert len(set(upstreams(log)[n0:])) == 2, upstreams(log)[n0:]

        # Students over the proxy's websockets, each with their own link, see their own settings.
        seen = asyncio.run(crowd(url, 6))
        assert all(r["error"] is None and r["mine"] for r in seen), seen

        os.kill(pids[1], signal.SIGKILL)  # one process dies: the proxy sends every new visitor to the other
        seen = asyncio.run(crowd(url, 6))
        assert all(r["error"] is None and r["mine"] for r in seen), seen
        status = hall(env, "status").stdout
        assert f"127.0.0.1:{base}: health 200" in status and f"127.0.0.1:{base + 1}: health 000" in status, status
        # Called with only HALL_DIR, status still names where up started nginx (not the default port).
        only_dir = hall({"HALL_DIR": env["HALL_DIR"], "HALL_PORT": "", "HALL_APP_BASE": ""}, "status").stdout
        assert f"on 127.0.0.1:{port}\n" in only_dir, only_dir
    finally:
        down = hall(env, "down")
    assert down.returncode == 0 and not list((tmp_path / "hall").glob("*.pid"))
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/_stcore/health", timeout=5)


async def crowd(url: str, n: int) -> list[dict]:
    return await gather(url, "bug-lab", n)
