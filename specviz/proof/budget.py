"""``prove --budget``: N and the per-case time limit sized to a stated time for the verifier under test.

# N sequences per case, V vocabulary, L tokens judged

``prove`` runs every scenario at one N (default :data:`specviz.proof.prove.DEFAULT_N`). The
package's verifier does that in about a second a case; a verifier that loops over rows in
Python costs a hundred times more per sequence, and at the default N it ran past the per-case
time limit in every case (an ERROR, no verdict) or for half an hour. So before the suite runs,
:func:`size_to_budget` times the verifier under test in every scenario it will run (a pilot of
16 sequences after one untimed run of the same size that warms up imports and compiled code,
doubled until one run takes :data:`PILOT_SECONDS`), takes each scenario's CPU seconds per
sequence from the last run (an overestimate: the per-call overhead is shared by fewer rows than
at full N), and picks the largest N on the grid :data:`GRID` (no larger than the asked one) whose estimated total, with
the pilot, fits the budget. A coarse grid keeps N the same from run to run when the machine's
load moves the timing a little; ``--n`` with the printed N reproduces a run exactly. The budget
is CPU time of the prove process (``time.process_time``, all its threads), not wall time: on a
shared machine the same run then picks the same N. A verifier that waits without using the CPU
(a sleep, a device it does not spin on) costs little of it; the time limit per case still holds it.

A fast verifier is timed in one scenario only: once the slowest scenario timed, taken
:data:`ROOM` times slower for every case, fits the asked N within the budget, the others are
assumed that slow and not timed (the package's verifier: about 0.2 s of pilot, where timing all
ten scenarios cost 1.5 s of a 5 s run).

What a run at that N can see is printed beside it: the smallest TV shift of the joint law the
chi-square detects with probability 0.99 in each scenario (:func:`specviz.proof.stats.detectable_at`),
the largest of them stated. Below the N at which every test is conclusive the suite says
"inconclusive", and the line says which budget would reach it.

The per-case time limit grows with N: :data:`TIMEOUT_FACTOR` times the estimated wall time of the
slowest case plus :data:`TIMEOUT_SLACK` seconds, when that is above ``--timeout`` (0: none).
The budget covers the verifier under test; the negative controls (the package's own mistakes,
a second or so a case) and the fault probes come on top.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..errors import InputError
from .harness import stops_the_suite, time_limit
from .scenarios import SCENARIOS, get_scenario, scenario_chains
from .stats import ALPHA, MIN_TV, POWER, detectable_at

DEFAULT_BUDGET = 120.0  # seconds: the verifier under test's share of a prove run
PILOT_SECONDS = 0.25  # a pilot run is doubled until it takes this long ...
PILOT_START, PILOT_MAX = 16, 4096  # ... from this many sequences, up to this many
SAFETY = 0.8  # the suite is planned to take this share of what is left of the budget after the pilot
GRID = (1, 2, 5)  # N is rounded down to 1, 2 or 5 times a power of ten (then to 300,000 at most)
MIN_N = 100  # below this the tests have nothing to say; the suite runs at least this many
TIMEOUT_FACTOR, TIMEOUT_SLACK = 3.0, 10.0
ROOM = 4.0  # a scenario may cost this many times the slowest one timed; when even that fits, the rest are not timed


def parse_budget(text: str | float) -> float:
    """``"120s"``, ``"2m"``, ``"1.5h"``, ``"90"`` (seconds) -> seconds; ``"0"`` or ``"none"``: no budget (0.0)."""
    s = str(text).strip().lower()
    if s in ("none", "off"):
        return 0.0
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*(s|sec|m|min|h)?", s)
    if not m:
        raise InputError("--budget", "a time like 120s, 2m, 1h or 90 (seconds); 0 or none for no budget", repr(text))
    scale = {"m": 60.0, "min": 60.0, "h": 3600.0}.get(m.group(2) or "s", 1.0)
    return float(m.group(1)) * scale


def on_grid(n: float) -> int:
    """The largest 1, 2 or 5 times a power of ten that is at most ``n`` (at least 1)."""
    if n < 1:
        return 1
    e = 10 ** math.floor(math.log10(n))
    return int(max(g * e for g in GRID if g * e <= n))


class Budget(NamedTuple):
    """What the pilot measured and the N it chose."""

    seconds: float  # the budget, in CPU seconds of the prove process
    n: int  # sequences per case
    asked_n: int  # the N asked (the cap)
    timeout: float | None  # seconds per case (None: no limit)
    per_sequence: dict[str, float]  # scenario -> CPU seconds per sequence of the verifier under test, measured
    pilot_seconds: float  # CPU seconds the pilot took
    detectable: dict[str, float]  # scenario -> smallest TV the joint test detects with probability POWER at n
    needed_n: int  # N at which every scenario's joint test reaches MIN_TV
    error: str | None  # the verifier raised in the pilot: N is left as asked, and the suite reports it
    timed: int = 0  # scenarios the pilot timed (the others assumed ROOM times the slowest timed)

    @property
    def estimate(self) -> float:
        """Seconds the suite's cases of the verifier under test should take at ``n``."""
        return self.n * sum(self.per_sequence.values())

    @property
    def detectable_tv(self) -> float:
        return max(self.detectable.values(), default=math.inf)

    def lines(self) -> list[str]:
        if self.error is not None:
            return [f"budget {self.seconds:g} s: the pilot call raised ({self.error}); N = {self.n:,} as asked"]
        slow = max(self.per_sequence, key=self.per_sequence.__getitem__)
        worst = max(self.detectable, key=self.detectable.__getitem__)
        head = f"budget {self.seconds:g} s of CPU: the pilot ({self.pilot_seconds:.1f} s) measured "
        if self.timed < len(self.per_sequence):  # the first scenario alone was timed
            first = next(iter(self.per_sequence))
            head += (f"{1e6 * self.per_sequence[first]:.0f} us per sequence in {first}; the other "
                     f"{len(self.per_sequence) - self.timed} scenarios are assumed {ROOM:g} times slower")
        else:
            head += (f"{1e6 * sum(self.per_sequence.values()) / len(self.per_sequence):.0f} us per sequence on "
                     f"average (slowest {slow}: {1e6 * self.per_sequence[slow]:.0f} us)")
        out = [head,
               f"  N = {self.n:,} sequences per case"
               + (f" (cut from {self.asked_n:,} to fit)" if self.n < self.asked_n else "")
               + f", about {self.estimate:.0f} s for the verifier's {len(self.per_sequence)} cases; time limit "
               + (f"{self.timeout:g} s a case" if self.timeout else "none"),
               f"  smallest TV the joint test then detects with probability {POWER}: {self.detectable_tv:.3g} "
               f"(in {worst}, the scenario that needs the most N)"]  # fmt: skip
        if self.n < self.needed_n:
            need = self.needed_n * sum(self.per_sequence.values()) / SAFETY + self.pilot_seconds
            out.append(f"  below N = {self.needed_n:,} a test cannot reach TV {MIN_TV}: inconclusive; "
                       f"--budget {math.ceil(need)}s would reach it")  # fmt: skip
        out.append(f"  (--n {self.n} reproduces this run; --budget 0 runs N = {self.asked_n:,} whatever it costs)")
        return out

    def record(self) -> dict[str, Any]:
        """For ``prove --json``."""
        return {"seconds": self.seconds, "n": self.n, "asked_n": self.asked_n, "timeout": self.timeout,
                "per_sequence": self.per_sequence, "pilot_seconds": round(self.pilot_seconds, 3),
                "detectable_tv": self.detectable, "needed_n": self.needed_n, "error": self.error}  # fmt: skip


def _pilot(run: Callable[..., Any], what: str, limit: float | None) -> tuple[float, float]:
    """(CPU, wall) seconds per sequence of ``run(n)``, from the first doubling of n that takes
    PILOT_SECONDS of CPU (or reaches PILOT_MAX sequences)."""
    with time_limit(limit, what):  # the first call warms up (imports, compiled code, caches): not timed
        run(n=PILOT_START)
    m = PILOT_START
    while True:
        c0, t0 = time.process_time(), time.perf_counter()
        with time_limit(limit, what):
            run(n=m)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        if cpu >= PILOT_SECONDS or m >= PILOT_MAX:
            return cpu / m, wall / m
        m *= 2


def size_to_budget(
    verifier: Callable[..., Any],
    scenarios: Iterable[str],
    *,
    budget: float = DEFAULT_BUDGET,
    n_max: int,
    kind: str = "chain",
    seed: int = 0,
    alpha: float = ALPHA,
    timeout: float | None = None,
) -> Budget:
    """Time ``verifier`` in each of ``scenarios`` and size N (at most ``n_max``) and the time limit
    per case so that its cases take about ``budget`` seconds. ``timeout``: the asked limit per case
    (None or 0: none; a larger one is kept). A verifier that raises in the pilot keeps ``n_max``:
    the suite then reports its ERROR."""
    from .prove import _sample  # the suite's own sampling: the pilot times exactly what the cases run

    if not budget > 0:
        raise InputError("--budget", "a positive time (0 means no budget, and needs no sizing)", str(budget))
    names = list(dict.fromkeys(get_scenario(s).name for s in scenarios))
    c0 = time.process_time()
    per: dict[str, float] = {}
    wall: dict[str, float] = {}
    untimed: list[str] = []
    for name in names:
        sc = SCENARIOS[name]
        run = functools.partial(_sample, sc, verifier, seed=seed, mode=sc.drafter_mode, kind=kind)
        try:
            per[name], wall[name] = _pilot(run, f"the budget's pilot on {name}", timeout or budget)
        except BaseException as e:  # the case itself will report it, with its traceback
            if stops_the_suite(e):
                raise
            return Budget(budget, n_max, n_max, timeout or None, per, time.process_time() - c0, {}, 0,
                          f"{type(e).__name__}: {e}")  # fmt: skip
        worst = max(per.values())
        if ROOM * worst * n_max * len(names) <= SAFETY * budget:  # every case fits the asked N many times over
            untimed = [s for s in names if s not in per]
            per.update(dict.fromkeys(untimed, ROOM * worst))  # assumed, generously: the rest are not timed
            wall.update(dict.fromkeys(untimed, ROOM * max(wall.values())))
            break
    pilot, timed = time.process_time() - c0, len(names) - len(untimed)
    total = sum(per.values())  # seconds per sequence, all cases together
    fit = SAFETY * max(budget - pilot, 0.0) / max(total, 1e-12)
    n = max(MIN_N, min(int(n_max), on_grid(fit)))
    laws = {s: scenario_chains(SCENARIOS[s])[0].joint_law(SCENARIOS[s].L) for s in names}
    detect = {s: detectable_at(law, n, alpha=alpha, power=POWER) for s, law in laws.items()}
    from .prove import _needed_n_law

    needed = max(_needed_n_law(s, alpha) for s in names)
    slowest = n * max(wall.values())  # the time limit is in wall time: on a busy machine a case takes longer
    limit = TIMEOUT_FACTOR * slowest + TIMEOUT_SLACK
    out_timeout = None if not timeout else max(float(timeout), float(math.ceil(limit)))
    return Budget(budget, n, int(n_max), out_timeout, per, pilot, detect, needed, None, timed)


__all__ = ["DEFAULT_BUDGET", "Budget", "on_grid", "parse_budget", "size_to_budget"]
