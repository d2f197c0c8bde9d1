"""specviz.app.serving: the per-process bound on heavy work, its queue places, one flight per key."""

from __future__ import annotations

import gc
import sys
import threading
import types
from pathlib import Path

import pytest

from specviz import InputError
from specviz.app import serving

JOIN_S = 30  # threads must finish well within this (they only wait on events)


class Gate:
    """A computation that blocks until released, counting how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def compute(self, value: object):
        def run() -> object:
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            self.started.release()
            assert self.release.wait(JOIN_S)
            with self.lock:
                self.now -= 1
            return value

        return run


def start(target, *args) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def wait_for(cond, what: str) -> None:
    deadline = threading.Event()
    for _ in range(3000):
        if cond():
            return
        deadline.wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_at_most_slots_at_once_and_places_in_arrival_order() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=2, max_waiting=10, keep=10)
    gate = Gate()
    messages: dict[int, list[str]] = {i: [] for i in range(6)}
    results: dict[int, object] = {}

    def visitor(i: int) -> None:
        results[i] = q.run(("key", i), gate.compute(i), on_wait=messages[i].append)

    threads = [start(visitor, 0), start(visitor, 1)]
    gate.started.acquire(timeout=JOIN_S)
    gate.started.acquire(timeout=JOIN_S)
    for i in range(2, 6):  # four more arrive one after another while both slots are taken
        threads.append(start(visitor, i))
        wait_for(lambda i=i: q.status() == (2, i - 1), f"visitor {i} in the queue")
    # Places are refreshed every WAIT_POLL_S: the first message may predate later arrivals.
    wait_for(lambda: all(messages[i] and "of 4" in messages[i][-1] for i in range(2, 6)), "every place refreshed")
    assert q.status() == (2, 4)
    for i in range(2, 6):
        assert f"place {i - 1} of 4 in the queue" in messages[i][-1], messages[i]
    assert not messages[0] and not messages[1]  # a free slot: no wait, no message
    gate.release.set()
    for t in threads:
        t.join(JOIN_S)
    assert results == {i: i for i in range(6)}
    assert gate.peak == 2 and q.peak_running == 2
    assert q.status() == (0, 0) and q.computed == 6


def test_one_flight_per_key_shared_by_every_visitor() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=2)
    gate = Gate()
    out: list[object] = []
    threads = [start(lambda: out.append(q.run("same", gate.compute(object()))))]
    gate.started.acquire(timeout=JOIN_S)
    threads += [start(lambda: out.append(q.run("same", gate.compute(object())))) for _ in range(4)]
    wait_for(lambda: threading.active_count() >= 6, "four joiners")
    gate.release.set()
    for t in threads:
        t.join(JOIN_S)
    assert len(out) == 5 and q.computed == 1
    assert all(r is out[0] for r in out)  # the one result, not five
    assert q.run("same", lambda: pytest.fail("a kept result was computed again")) is out[0]


def test_negative_control_distinct_keys_each_compute() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=2)
    for i in range(5):
        assert q.run(i, lambda i=i: i * 10) == i * 10
    assert q.computed == 5


def test_a_closed_tab_leaves_the_queue_and_a_joiner_takes_over() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=1)
    gate = Gate()
    first = start(lambda: q.run("busy", gate.compute("busy")))
    gate.started.acquire(timeout=JOIN_S)
    closed = threading.Event()

    class TabClosed(Exception):
        pass

    def leaving(message: str) -> None:
        if closed.is_set():
            raise TabClosed(message)  # what Streamlit raises in a stopped script at its next st call

    errors: list[BaseException] = []

    def owner() -> None:
        try:
            q.run("later", lambda: "computed by the owner", on_wait=leaving)
        except TabClosed as e:
            errors.append(e)

    joined: list[object] = []
    t_owner = start(owner)
    wait_for(lambda: q.status() == (1, 1), "the owner in the queue")
    t_join = start(lambda: joined.append(q.run("later", lambda: "computed by the joiner")))
    wait_for(lambda: threading.active_count() >= 3, "the joiner")
    closed.set()
    t_owner.join(JOIN_S)
    assert errors and "place 1 of 1" in str(errors[0])
    wait_for(lambda: q.status() == (1, 1), "the joiner queued in the owner's place")
    gate.release.set()
    first.join(JOIN_S)
    t_join.join(JOIN_S)
    assert joined == ["computed by the joiner"]
    assert q.status() == (0, 0) and q.computed == 2


def test_an_error_reaches_every_visitor_and_is_not_kept() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=1)

    def boom() -> int:
        raise InputError("n", "an integer >= 1", "0")

    with pytest.raises(InputError, match="n: expected"):
        q.run("k", boom)
    assert q.run("k", lambda: 7) == 7 and q.computed == 2


def test_results_kept_are_bounded_least_recent_first() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=1, keep=2)
    for k in "abc":
        q.run(k, lambda k=k: k)
    assert list(q._results) == ["b", "c"]


def test_a_full_queue_says_so() -> None:
    q: serving.HeavyQueue = serving.HeavyQueue(slots=1, max_waiting=1)
    gate = Gate()
    first = start(lambda: q.run("a", gate.compute("a")))
    gate.started.acquire(timeout=JOIN_S)
    second = start(lambda: q.run("b", lambda: "b"))
    wait_for(lambda: q.status() == (1, 1), "one waiting")
    with pytest.raises(serving.QueueFull, match="1 visitors are already waiting"):
        q.run("c", lambda: "c")
    gate.release.set()
    first.join(JOIN_S)
    second.join(JOIN_S)


@pytest.mark.parametrize("kw", [{"slots": 0}, {"max_waiting": -1}, {"keep": 1.5}])
def test_bad_sizes_are_input_errors(kw: dict) -> None:
    with pytest.raises(InputError, match=f"{next(iter(kw))}: expected an integer"):
        serving.HeavyQueue(**kw)


def test_freeze_heap_once_per_page_and_again_after_new_imports() -> None:
    before = gc.get_freeze_count()
    try:
        assert serving.freeze_heap("test-page-a") is True
        frozen = gc.get_freeze_count()
        assert frozen > before
        assert serving.freeze_heap("test-page-a") is False  # negative control: nothing new, nothing frozen
        assert gc.get_freeze_count() == frozen
        sys.modules["_test_serving_new_import"] = types.ModuleType("_test_serving_new_import")
        try:
            assert serving.freeze_heap("test-page-a") is True  # an import since: the page's next run freezes
            assert serving.freeze_heap("test-page-a") is False
        finally:
            del sys.modules["_test_serving_new_import"]
    finally:
        gc.unfreeze()


def test_a_stopped_script_does_not_stop_the_visitors_who_joined_it() -> None:
    """Streamlit stops a closed tab's script with a BaseException: whoever joined computes it themselves."""

    class ScriptStopped(BaseException):  # Streamlit's StopException derives from BaseException, not Exception
        pass

    q: serving.HeavyQueue = serving.HeavyQueue(slots=1)
    release = threading.Event()
    joined: list[object] = []
    stopped: list[BaseException] = []

    def owner_compute() -> str:
        assert release.wait(JOIN_S)
        raise ScriptStopped

    def owner() -> None:
        try:
            q.run("k", owner_compute)
        except ScriptStopped as e:
            stopped.append(e)

    t_owner = start(owner)
    wait_for(lambda: q.status() == (1, 0), "the owner computing")
    t_join = start(lambda: joined.append(q.run("k", lambda: "the joiner's own")))
    wait_for(lambda: threading.active_count() >= 3, "the joiner")
    release.set()
    t_owner.join(JOIN_S)
    t_join.join(JOIN_S)
    assert stopped and joined == ["the joiner's own"] and q.computed == 2


def test_the_slots_a_deployment_sets() -> None:
    assert serving.slots_from_env({}) == serving.HEAVY_SLOTS
    assert serving.slots_from_env({serving.SLOTS_ENV: "1"}) == 1
    for bad in ("0", "two", "-1", ""):
        with pytest.raises(InputError, match=f"{serving.SLOTS_ENV}: expected an integer >= 1"):
            serving.slots_from_env({serving.SLOTS_ENV: bad})


def test_collect_garbage_runs_at_most_once_per_interval() -> None:
    clock = [1000.0]
    serving._LAST_GC[0] = float("-inf")
    collected = []
    gc.callbacks.append(lambda phase, info: collected.append(info["generation"]) if phase == "start" else None)
    try:
        assert serving.collect_garbage(lambda: clock[0]) is True
        assert collected == [2]  # a full collection
        clock[0] += serving.GC_INTERVAL_S / 2
        assert serving.collect_garbage(lambda: clock[0]) is False  # negative control: too soon, nothing ran
        assert collected == [2]
        clock[0] += serving.GC_INTERVAL_S
        assert serving.collect_garbage(lambda: clock[0]) is True
        assert collected == [2, 2]
    finally:
        gc.callbacks.pop()
        serving._LAST_GC[0] = float("-inf")


def test_streamlit_no_longer_collects_after_every_run() -> None:
    """The app collects after a page run (rate-limited); Streamlit's own full collection after each run is off."""
    import tomllib

    from apptest import open_page

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
    serving._LAST_GC[0] = float("-inf")
    open_page(None)
    assert serving._LAST_GC[0] > float("-inf")  # a run of the app collected (serving.after_run)


def test_compiled_pages_are_kept_without_a_file_watcher(tmp_path: Path) -> None:
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    script = tmp_path / "page.py"
    script.write_text("x = 1\n")
    watched, kept = ScriptCache(), ScriptCache()
    for cache in (watched, kept):
        cache.get_bytecode(str(script))
    assert serving.keep_compiled_pages(watched, "auto") is False  # a watcher: Streamlit's behaviour
    assert serving.keep_compiled_pages(kept, "none") is True
    assert serving.keep_compiled_pages(kept, "none") is True  # twice: still one replacement
    watched.clear()
    kept.clear()  # what Streamlit calls when the process's last visitor leaves
    assert str(script) not in watched._cache  # negative control: the watched cache forgot it
    assert str(script) in kept._cache


def test_return_freed_memory_sets_glibc_threshold() -> None:
    """On glibc, mallopt(M_MMAP_THRESHOLD) accepts the setting (returns 1); elsewhere it says False."""
    import platform

    result = serving.return_freed_memory.__wrapped__(environ=())
    assert result is (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    # An operator's own value (glibc read it at start-up) is not overridden.
    assert serving.return_freed_memory.__wrapped__(environ=((serving.MMAP_ENV, "65536"),)) is False
