"""Serving many visitors: no visitor clears the others' caches; serve/hall.sh behind nginx (skipped without it).

Servers listen on loopback only, and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import browser  # noqa: E402
import load  # noqa: E402
from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402

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


def test_a_visitor_cannot_clear_every_visitors_caches() -> None:
    with browser.streamlit_server() as url:
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
