"""Warm-up at server start, so that a class's first visits do not pay for one-off costs.

A fresh server pays, on the first click that needs them, for importing torch (about 2.4 s of CPU
on the Batch page's first load, see benchmarks/bench_app.py) and for the first exact enumeration
of the court (about 0.4 s more than later ones: imports and compiled loops). :func:`start` does
both once per process in a daemon thread, started by serving.install, instead of inside a
student's click. It never raises: a failed warm-up only means the first click pays as before.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("specviz.app")
_started = threading.Event()
DELAY_S = 1.5  # the first page of a fresh server renders first (it cost 1.5 s of CPU with the import beside it)


def _warm() -> None:
    try:
        from . import batch_demo

        if batch_demo.torch_installed():  # imports torch (the optional [torch] extra) when it is there
            log.info("warm-up: torch imported")
        from ..proof import court

        court.compare(None, court.pair_problem((0.5, 0.5), (0.5, 0.5), 1), max_evals=10_000)  # a tiny problem
    except Exception as e:  # noqa: BLE001 (a warm-up must never take the app down)
        log.warning("warm-up failed (the first clicks pay for it instead): %s", e)


def start() -> bool:
    """Start the warm-up once per process; True the first time it is called."""
    if _started.is_set():
        return False
    _started.set()
    timer = threading.Timer(DELAY_S, _warm)  # after the first page has answered, not competing with it
    timer.name, timer.daemon = "specviz-warm-up", True
    timer.start()
    return True
