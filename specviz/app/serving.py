"""What one server process does so that many visitors can share it: a cheap rerun, bounded heavy work.

No Streamlit import here: app.py hands :func:`install` the Streamlit classes it patches, and calls
:func:`after_run` after every page run; the pages call :func:`heavy`.

- :func:`install`, once per process, before any page runs: :func:`preload` (every module a page
  imports, in one thread), :func:`refuse_clear_cache`, :func:`return_freed_memory`,
  :func:`keep_compiled_pages`, and the background warm-up (:mod:`specviz.app.warm`).
- :func:`preload`: on a fresh process several visitors' scripts (and the warm-up) would otherwise
  import the same libraries at once, and a library that reads a half-imported module breaks:
  plotly's validators read ``sys.modules["pandas"]`` while another thread is still importing
  pandas ("partially initialized module 'pandas' has no attribute 'Series'"), and a failed import
  in one thread shows in another that waited for it as "cannot import name 'results' from
  'specviz.app'" (issue 29.8; tests/test_serving_install.py reproduces it).

- :func:`collect_garbage` after every script run, in place of Streamlit's own collection
  (``runner.postScriptGC``, off in .streamlit/config.toml): a full collection walks every live
  object, every other visitor's session included, so with 30 visitors at once Streamlit's
  collection after each of their runs cost a third of the process's CPU (py-spy, --gil). Here the
  app asks for a full collection at most once per :data:`GC_INTERVAL_S` per process, whoever is
  visiting (CPython's own automatic collections still run, as they always did).
- :func:`freeze_heap` once per page per process: a full collection walks every object
  the process holds: with NumPy, SciPy, torch and Plotly imported that is ~280,000 objects and
  0.2-0.25 s of CPU, 3-5x the whole cost of a hello-world page load. Objects alive after the
  first run of a page (modules, their functions and constants) are moved out of the
  collector's reach with :func:`gc.freeze`; what one visitor's run leaves behind is still
  collected, by the next :func:`collect_garbage`. Freezing happens at most once per page url path, so at most that
  many sessions' live objects are frozen with it (they are freed by reference counting when
  the session ends; only a reference cycle among them would stay), and once more after any run
  that follows new imports.
- :func:`keep_compiled_pages`: Streamlit forgets every compiled page script whenever the last
  visitor of the process disconnects, so that a visitor who arrives alone recompiles app.py and
  the page (a fifth of a fresh page load). Without a file watcher nothing would tell it of an
  edit anyway: the compiled scripts are kept for the life of the process.
- :func:`return_freed_memory`: glibc's allocator keeps memory that NumPy freed in pieces the next
  computation cannot reuse; asked once per process, it maps every block of 4 MB or more on its own
  and gives it back to the system when it is freed (Tokens per step, 30 visitors at once:
  2.3 GB at the peak without it, 1.2 GB with it on a plain ``streamlit run``; docs/serving.md).
- :class:`HeavyQueue`: at most ``slots`` heavy computations at once per process, the others
  wait in arrival order and can read their place; one result per parameter set is shared by
  every visitor who asks for it while it is being computed (single flight), so a tab that is
  closed or reloaded and asks again joins the computation it started instead of adding one.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import importlib
import logging
import os
import pkgutil
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from ..errors import InputError
from . import warm

log = logging.getLogger("specviz.app")
R = TypeVar("R")
OnWait = Callable[[str], object] | None  # told, every WAIT_POLL_S while waiting, why and where the visitor waits

_FROZEN: set[str] = set()
_FREEZE_LOCK = threading.Lock()


_MODULES_AT_FREEZE = [0]  # len(sys.modules) when the heap was last frozen
_LAST_GC = [float("-inf")]  # time.monotonic() of the last full collection the app asked for


def freeze_heap(page: str) -> bool:
    """After the first run of ``page`` in this process, or after new imports: collect, then freeze.

    Imports are what fills the heap with long-lived objects; a module imported since the last
    freeze (by a page, or by a warm-up thread that finished after every page had run) triggers
    one more. Returns True when it froze, False otherwise.
    """
    with _FREEZE_LOCK:
        if page in _FROZEN and len(sys.modules) <= _MODULES_AT_FREEZE[0]:
            return False
        _FROZEN.add(page)
        gc.collect()
        _LAST_GC[0] = time.monotonic()  # that was a full collection: collect_garbage need not run another now
        gc.freeze()
        _MODULES_AT_FREEZE[0] = len(sys.modules)
        return True


GC_INTERVAL_S = 10.0  # at most one full collection per this many seconds per process (0.27 s each with 30 visitors)
_GC_LOCK = threading.Lock()


def after_run(page: str) -> None:
    """What app.py does after every page run: :func:`freeze_heap` the page's first time, then :func:`collect_garbage`.

    Streamlit's own collection after every run is off (``runner.postScriptGC`` in
    .streamlit/config.toml): a full collection walks every visitor's objects.
    """
    freeze_heap(page)
    collect_garbage()


def collect_garbage(now: Callable[[], float] = time.monotonic) -> bool:
    """A full collection, unless one ran in this process less than :data:`GC_INTERVAL_S` ago.

    Reference counting frees almost everything a run leaves behind; the collection is for
    reference cycles (a figure and its parent links, a traceback), and one every few seconds
    bounds what they hold however many visitors there are. Returns True when it collected.
    """
    t = now()
    with _GC_LOCK:
        if t - _LAST_GC[0] < GC_INTERVAL_S:
            return False
        _LAST_GC[0] = t
    gc.collect()
    return True


class _CompiledScripts(Protocol):
    """Streamlit's ScriptCache: compiled page scripts by path."""

    def clear(self) -> None: ...


def keep_compiled_pages(cache: _CompiledScripts, file_watcher: str) -> bool:
    """Make ``cache.clear`` keep the compiled scripts when no file watcher runs; True once it does.

    With a watcher (``--server.fileWatcherType auto`` while editing the app) nothing changes:
    Streamlit clears the cache on every edit and when the last visitor leaves.
    """
    if file_watcher != "none":
        return False
    if not getattr(cache.clear, "keeps", False):

        def keep() -> None:  # an edit needs a restart, as it already does without a watcher
            return None

        keep.keeps = True  # type: ignore[attr-defined]
        cache.clear = keep  # type: ignore[method-assign]
    return True


MMAP_THRESHOLD = 4 * 2**20  # glibc: blocks of this many bytes or more get their own mapping, freed at once
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


MMAP_ENV = "MALLOC_MMAP_THRESHOLD_"  # glibc reads it at start-up; an operator who sets it keeps their value


@functools.cache
def return_freed_memory(threshold: int = MMAP_THRESHOLD, environ: tuple[tuple[str, str], ...] | None = None) -> bool:
    """Ask glibc to map every block of ``threshold`` bytes or more on its own; True when it was set here.

    The same as starting the process with ``MALLOC_MMAP_THRESHOLD_=4194304`` (serve/hall.sh does),
    for a plain ``streamlit run app.py``. Setting it also stops glibc from raising the
    threshold by itself after large blocks are freed, which is what let the heap grow. False
    where there is no glibc (musl, macOS), and where ``MALLOC_MMAP_THRESHOLD_`` is already in
    the environment (``environ``: its items, default os.environ): the operator's value stands.
    """
    if MMAP_ENV in (dict(environ) if environ is not None else os.environ):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: glibc's, where it is glibc
    except (OSError, AttributeError):  # no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


HEAVY_SLOTS = 2  # heavy computations at once per process: one per core of the 2-core laptop this was measured on
SLOTS_ENV = "SPECVIZ_HEAVY_SLOTS"  # a deployment's own bound, e.g. 1 where memory is short (docs/serving.md)
HEAVY_WAITING = 64  # visitors that may wait at once; one more is told to come back rather than queued
HEAVY_RESULTS = 64  # results kept, shared by every visitor (least recently used dropped first)
WAIT_POLL_S = 0.5  # how often a waiting visitor's place is refreshed


class QueueFull(RuntimeError):
    """More visitors are waiting than the queue holds."""


class _Abandoned(Exception):
    """The visitor who queued this computation left before its turn: whoever joined it queues anew."""


class _Flight:
    """One computation in progress: its result, or its exception, once ``done`` is set."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.started = False  # it left the queue and is computing
        self.result: object = None
        self.error: BaseException | None = None


class HeavyQueue(Generic[R]):
    """At most ``slots`` computations at once; the others wait first come, first served.

    :meth:`run` answers a parameter set (``key``) from the results it keeps, or joins the
    computation of the same key that is already running (single flight), or takes a ticket
    and waits for one of the ``slots``. While it waits it calls ``on_wait`` with a sentence
    giving the visitor's place; that callback may raise (Streamlit stops a closed tab's
    script at its next call into Streamlit) and the ticket is then handed back, so a closed
    tab leaves the queue. A computation that has started runs to its end and its result is
    kept: the same parameters asked again are never computed twice.
    """

    def __init__(self, slots: int = HEAVY_SLOTS, max_waiting: int = HEAVY_WAITING, keep: int = HEAVY_RESULTS) -> None:
        for name, value, low in (("slots", slots, 1), ("max_waiting", max_waiting, 0), ("keep", keep, 0)):
            if not isinstance(value, int) or value < low:
                raise InputError(name, f"an integer >= {low}", repr(value))
        self.slots, self.max_waiting, self.keep = slots, max_waiting, keep
        self._cond = threading.Condition()
        self._running = 0
        self._waiting: list[int] = []  # tickets in arrival order
        self._next_ticket = 0
        self._flights: dict[Hashable, _Flight] = {}
        self._results: OrderedDict[Hashable, R] = OrderedDict()
        self.computed = 0  # computations started, for tests and benchmarks
        self.peak_running = 0

    def place(self, ticket: int) -> int:
        """1 for the next visitor to get a slot; 0 once ``ticket`` is no longer waiting."""
        with self._cond:
            return self._waiting.index(ticket) + 1 if ticket in self._waiting else 0

    def status(self) -> tuple[int, int]:
        """(computations running, visitors waiting) right now."""
        with self._cond:
            return self._running, len(self._waiting)

    def run(self, key: Hashable, compute: Callable[[], R], on_wait: OnWait = None) -> R:
        """``compute()``'s result for ``key``, computed at most once while it is kept."""
        while True:
            try:
                return self._run_once(key, compute, on_wait)
            except _Abandoned:
                continue

    def _run_once(self, key: Hashable, compute: Callable[[], R], on_wait: OnWait) -> R:
        with self._cond:
            if key in self._results:
                self._results.move_to_end(key)
                return self._results[key]
            flight = self._flights.get(key)
            if flight is None:
                if len(self._waiting) >= self.max_waiting:
                    raise QueueFull(
                        f"{len(self._waiting)} visitors are already waiting for a heavy computation on this server: "
                        "try again in a minute"
                    )
                flight = self._flights[key] = _Flight()
                ticket = self._next_ticket
                self._next_ticket += 1
                self._waiting.append(ticket)
                owner = True
            else:
                owner = False
        if not owner:
            self._join(flight, on_wait)
        else:
            self._compute(key, flight, ticket, compute, on_wait)
        if flight.error is not None:
            raise flight.error
        return flight.result  # type: ignore[return-value]

    def _join(self, flight: _Flight, on_wait: OnWait) -> None:
        while not flight.done.wait(WAIT_POLL_S):
            if on_wait is not None:
                on_wait(
                    "The same computation is already running for another visitor: its result is shared."
                    if flight.started
                    else "Another visitor asked for the same computation and is waiting for a turn: you share it."
                )

    def _compute(
        self, key: Hashable, flight: _Flight, ticket: int, compute: Callable[[], R], on_wait: OnWait
    ) -> None:
        started = False
        try:
            with self._cond:
                while not (self._waiting.index(ticket) < self.slots - self._running):
                    place = self._waiting.index(ticket) + 1 - (self.slots - self._running)
                    message = (
                        f"Waiting for a turn: place {place} of {len(self._waiting) - (self.slots - self._running)} "
                        f"in the queue ({self.slots} heavy computations run at once on this server)."
                    )
                    self._cond.release()
                    try:
                        if on_wait is not None:
                            on_wait(message)
                    finally:
                        self._cond.acquire()
                    self._cond.wait(WAIT_POLL_S)
                self._waiting.remove(ticket)
                self._running += 1
                self.computed += 1
                self.peak_running = max(self.peak_running, self._running)
                started = flight.started = True
                self._cond.notify_all()
            try:
                flight.result = compute()
            except Exception as e:  # handed to every visitor who joined this flight, and raised here
                flight.error = e
            except BaseException:  # Streamlit stopping this visitor's script: the others must not stop too
                flight.error = _Abandoned()
                raise
        finally:
            with self._cond:
                if started:
                    self._running -= 1
                    if flight.error is None:  # kept, shared: never computed twice while it is kept
                        self._results[key] = flight.result  # type: ignore[assignment]
                        while len(self._results) > self.keep:
                            self._results.popitem(last=False)
                else:  # left the queue before its turn (a closed tab): whoever joined must ask again
                    self._waiting.remove(ticket)
                    flight.error = _Abandoned()
                self._flights.pop(key, None)
                flight.done.set()
                self._cond.notify_all()


class Placeholder(Protocol):
    """What :func:`heavy` writes the visitor's place into: Streamlit's ``st.empty()``."""

    def info(self, body: str, *, icon: str | None = None) -> object: ...

    def empty(self) -> object: ...


WAIT_ICON = ":material/hourglass_top:"


def heavy(key: Hashable, compute: Callable[[], R], placeholder: Placeholder, queue: HeavyQueue | None = None) -> R:
    """``queue.run`` (the process's :data:`HEAVY` by default) showing the place in ``placeholder``, cleared after.

    A page writes ``serving.heavy(("page", *settings), lambda: cached_function(*settings), st.empty())``:
    the key names the page and every setting the result depends on.
    """
    try:
        return (queue or HEAVY).run(key, compute, on_wait=lambda message: placeholder.info(message, icon=WAIT_ICON))
    finally:
        placeholder.empty()


def slots_from_env(environ: Mapping[str, str]) -> int:
    """The bound ``SPECVIZ_HEAVY_SLOTS`` sets, or :data:`HEAVY_SLOTS` when it is unset."""
    text = environ.get(SLOTS_ENV)
    if text is None:
        return HEAVY_SLOTS
    if not text.strip().isdigit() or int(text) < 1:
        raise InputError(SLOTS_ENV, "an integer >= 1", repr(text))
    return int(text)


HEAVY: HeavyQueue = HeavyQueue(slots_from_env(os.environ))  # the process's one queue, shared by every page


# --- install: app.py's set-up, once per process ----------------------------------------------------

# What the pages import beside specviz.app (libraries that plotly and Streamlit read from sys.modules, and
# prove, which no module of specviz.app imports): tests/test_serving_install.py checks nothing is missing.
# specviz.models: Real text asks it whether the model is installed (it imports no torch until a model is used).
PRELOAD = (
    "numpy", "pandas", "scipy.stats", "plotly.graph_objects", "plotly.io", "specviz.proof.prove", "specviz.models",
)  # fmt: skip
_INSTALLED = threading.Event()
_INSTALL_LOCK = threading.Lock()
CLEAR_CACHE_REFUSED = "A visitor sent clear_cache: refused (the caches are every visitor's); their own state cleared"


def preload() -> list[str]:
    """Import every module the pages import, here, in one thread; the names imported.

    :data:`PRELOAD`, every module of :mod:`specviz.app` (and with them the proof and the
    verifiers), and the compiled loops (Numba), which the first verification would otherwise load
    inside a visitor's click. torch stays with the warm-up: it costs seconds, and only the Batch
    page uses it (``batch_demo.torch_installed`` imports it under a lock the warm-up shares).
    """
    app = importlib.import_module(__package__)  # specviz.app
    names = [*PRELOAD, *(f"{__package__}.{m.name}" for m in pkgutil.iter_modules(app.__path__))]
    for name in names:
        importlib.import_module(name)
    from ..verifiers import _fused

    _fused._loops()  # imports Numba where it is installed and loads the cached loops
    return names


class _Session(Protocol):
    """Streamlit's AppSession, as far as :func:`refuse_clear_cache` touches it."""

    _session_state: Any


def refuse_clear_cache(session_class: type) -> bool:
    """Stop one visitor from clearing every visitor's caches; True when it replaced the handler now.

    Streamlit's ``clear_cache`` back-message (the "Clear cache" menu item, hidden by
    client.toolbarMode but still accepted by the server) clears st.cache_data and
    st.cache_resource for the whole process. No config option turns it off in Streamlit 1.67,
    so the one method that handles it (``AppSession._handle_clear_cache_request``) is replaced by
    one that clears only the sender's session state. tests/test_serve.py sends the message over
    the websocket and checks the caches survive.
    """
    if getattr(getattr(session_class, "_handle_clear_cache_request", None), "refuses", False):
        return False

    def own_state_only(self: _Session) -> None:
        log.warning(CLEAR_CACHE_REFUSED)
        self._session_state.clear()

    own_state_only.refuses = True  # type: ignore[attr-defined]
    session_class._handle_clear_cache_request = own_state_only  # type: ignore[attr-defined]
    return True


class _Runtime(Protocol):
    """Streamlit's Runtime class, as far as :func:`install` reads it."""

    @classmethod
    def exists(cls) -> bool: ...

    @classmethod
    def instance(cls) -> Any: ...


def install(session_class: type, runtime_class: type[_Runtime], file_watcher: str) -> bool:
    """app.py's set-up for the process, done once; True for the call that did it.

    ``session_class`` is Streamlit's AppSession, ``runtime_class`` its Runtime, ``file_watcher``
    the ``server.fileWatcherType`` option. Every caller returns only once it is done: visitors who
    arrive together on a fresh process wait for one :func:`preload` instead of importing the same
    libraries at once in their own threads.
    """
    if _INSTALLED.is_set():
        return False
    with _INSTALL_LOCK:
        if _INSTALLED.is_set():
            return False
        preload()
        refuse_clear_cache(session_class)
        return_freed_memory()  # freed NumPy arrays go back to the system
        runtime = runtime_class.instance() if runtime_class.exists() else None
        scripts: _CompiledScripts | None = getattr(runtime, "_script_cache", None)
        if scripts is not None and callable(getattr(scripts, "clear", None)):  # none under AppTest (it compiles pages)
            keep_compiled_pages(scripts, file_watcher)
        elif type(runtime) is runtime_class:  # a real server: Streamlit renamed what keep_compiled_pages needs
            log.warning("Streamlit's Runtime has no _script_cache: page scripts are compiled again for lone visitors")
        warm.start()  # torch and the court's first enumeration, in the background, after the imports above
        _INSTALLED.set()
        return True
