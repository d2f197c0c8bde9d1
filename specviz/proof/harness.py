"""Holding the verifier under test to account: what ``prove`` does around every call of it.

# B rows, K drafts, V vocabulary

A user's verifier is code the suite did not write. Whatever it does, the suite reports it as
that case's result, and never lets it decide the exit status or corrupt the output:

- **Anything it raises is the case's ERROR**, ``SystemExit`` included (``exit(0)`` inside a
  verifier once made ``prove`` exit 0 with no output, which a CI gate reads as a pass). Only
  ``KeyboardInterrupt`` goes through: the person at the keyboard asked to stop.
- **A time limit per case** (:func:`time_limit`, ``prove --timeout``, default
  :data:`DEFAULT_TIMEOUT` seconds): past it the case stops with :class:`CaseTimeout`, an
  ERROR that names the case. The watchdog is a ``SIGALRM`` timer when the suite runs in the
  main thread (it interrupts a busy loop and a ``time.sleep`` alike), and otherwise (the app
  runs pages in worker threads, where signals cannot be caught) a timer thread that raises
  :class:`CaseTimeout` asynchronously in the suite's thread (``PyThreadState_SetAsyncExc``),
  which stops Python code at its next bytecode but cannot interrupt a blocking sleep or one
  long C call until it returns. A subprocess per case would stop anything, but would re-import
  the verifier and pickle every result for each of the suite's ~20 cases; the thread and the
  signal cost nothing.
- **Read-only inputs** (:func:`guard`): every NumPy array handed to the verifier is a view
  with ``writeable=False``, so writing into one raises at the write, and the harness names the
  argument (it re-runs the call once on writable copies and compares them with the originals).
  The simulation reuses its buffers round after round, so a write would otherwise corrupt
  later rounds and show up as a misleading "tokens per step" failure.
- **Its stdout goes to stderr** during the call, so ``prove --json`` prints JSON and nothing else
  (the CLI also points file descriptor 1 at stderr while the suite runs, for output written
  below Python's ``sys.stdout``).
- Integer tokens are checked where the result is read (:func:`specviz.proof.simulate._check_result`):
  float tokens are an error, never truncated.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import InputError

DEFAULT_TIMEOUT = 60.0  # seconds per case: the suite's cases take about a second each at the default N


class CaseTimeout(Exception):
    """A case ran past its time limit (raised inside the case, wherever it was)."""


class VerifierRaised(Exception):
    """The verifier under test raised (or exited) where a step of ``prove --vocab`` called it:
    ``where`` names the step, ``error`` is ``Type: message`` and ``traceback`` starts at the
    verifier's own frame. :func:`specviz.proof.ship.run_cli` prints it as an ERROR line."""

    def __init__(self, where: str, error: str, traceback: str) -> None:
        super().__init__(f"{where}: {error}")
        self.where, self.error, self.traceback = where, error, traceback


@contextlib.contextmanager
def raised_by_verifier(where: str) -> Iterator[None]:
    """Around one call of the verifier: whatever it raises, ``SystemExit`` included (only
    ``KeyboardInterrupt`` goes through), becomes :class:`VerifierRaised` naming ``where``."""
    try:
        yield
    except BaseException as e:
        if stops_the_suite(e):
            raise
        import traceback as tb_module

        tb = e.__traceback__  # from the verifier's own frame on: past this package's proof modules
        here = os.path.dirname(os.path.abspath(__file__))
        while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == here:
            tb = tb.tb_next
        text = "".join(tb_module.format_exception(type(e), e, tb)).rstrip()
        raise VerifierRaised(where, f"{type(e).__name__}: {e}", text) from e


def stops_the_suite(e: BaseException) -> bool:
    """Whether an exception from a verifier ends the whole run (only KeyboardInterrupt does)."""
    return isinstance(e, KeyboardInterrupt)


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Raise :class:`CaseTimeout` naming ``what`` in this thread once ``seconds`` have passed.

    ``None`` or 0: no limit. In the main thread: ``SIGALRM`` (a timer already set by someone
    else is put back, less the time spent here). Elsewhere: an asynchronous exception from a
    timer thread (see the module docstring for what each can interrupt)."""
    if not seconds:
        yield
        return
    if seconds < 0:
        raise InputError("timeout", "a time limit in seconds >= 0 (0: none)", str(seconds))
    message = f"{what} ran past its time limit of {seconds:g} s"
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            raise CaseTimeout(message)

        old = signal.signal(signal.SIGALRM, on_alarm)
        before, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
        t0 = _now()
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
            if before:  # someone else's alarm: re-arm it with what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(before - (_now() - t0), 1e-3))
        return
    tid, lock, state = threading.get_ident(), threading.Lock(), {"done": False, "fired": False}

    def fire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(CaseTimeout))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except CaseTimeout as e:
        raise CaseTimeout(message) from e  # the asynchronous one carries no message
    finally:
        with lock:
            state["done"] = True
        timer.cancel()


def _now() -> float:
    return time.monotonic()


def read_only(x: Any) -> Any:
    """``x`` as the verifier should see it: a NumPy array as a read-only view, explicit uniforms
    (a named pair of arrays) field by field, anything else unchanged."""
    if isinstance(x, np.ndarray):
        v = x.view()
        v.setflags(write=False)
        return v
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(read_only(f) for f in x))
    return x


def _writable_copy(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.copy()
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_writable_copy(f) for f in x))
    return x


def _arrays(name: str, x: Any) -> list[tuple[str, np.ndarray]]:
    if isinstance(x, np.ndarray):
        return [(name, x)]
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return [(f"{name}.{f}", v) for f, v in zip(x._fields, x, strict=True) if isinstance(v, np.ndarray)]
    return []


def _names(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """(argument name, value) of a call, by ``fn``'s signature (arg0, arg1, ... when it has none)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def _written(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """The arguments ``fn`` changes when given writable copies (the call's result is discarded)."""
    named = _names(fn, args, kwargs)
    copies = {k: _writable_copy(v) for k, v in named}
    before = {k: [(n, a.copy()) for n, a in _arrays(k, v)] for k, v in copies.items()}
    pos = [copies[k] for k, _ in named[: len(args)]]
    kw = {k: copies[k] for k, _ in named[len(args) :]}
    with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(Exception):
        fn(*pos, **kw)
    out = []
    for k, v in copies.items():
        for (n, a), (_, b) in zip(_arrays(k, v), before[k], strict=True):
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
                out.append(n)
    return out


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with read-only inputs and its stdout sent to stderr; a write into an input
    is an :class:`~specviz.InputError` naming the argument. The wrapper keeps ``fn``'s
    signature (``functools.wraps``), so keyword sniffing (``validate``) still sees it."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        ro_args = tuple(read_only(a) for a in args)
        ro_kwargs = {k: read_only(v) for k, v in kwargs.items()}
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return fn(*ro_args, **ro_kwargs)
        except ValueError as e:
            if "read-only" not in str(e):
                raise
            where = _written(fn, args, kwargs)
            what = ", ".join(where) if where else "one of its input arrays"
            raise InputError("verifier", "a verifier that leaves its inputs unchanged (the harness hands read-only "
                             "arrays: copy one before writing to it)", f"a write into {what}") from e  # fmt: skip

    return guarded
