"""Rejection rate of the joint test for the correct verifier over many seeds, with its interval.

    python benchmarks/calibration.py [--scenario reference] [--seeds 100] [--n 100000] [--alpha 0.01]

A calibrated test rejects about alpha of honest runs. Printed for the joint chi-square and for
the tokens-per-step z-test (the two tests behind a verdict): the rejection count, the rate
with its Clopper-Pearson 95% interval, the binomial test's p-value against alpha, and the
critical count at or above which the rate is "far above the level" (one-sided, 0.001). A
broken verifier runs beside it as the negative control, and the fast configuration of the
default test suite (one_draft, N = 1,000, level 0.05, 200 seeds) is measured too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.proof.bugs import BUGS  # noqa: E402
from specviz.proof.prove import Calibration, calibrate_tests, joint_passes, tokens_passes  # noqa: E402


def line(label: str, c: Calibration, secs: float) -> str:
    return (f"{label:60s} rejected {c.rejections:>3}/{c.trials} at alpha {c.alpha:g}: rate {c.rate:.3f} "
            f"[95% CI {c.ci_low:.3f}, {c.ci_high:.3f}]; binomial p = {c.binom_p:.3g}; far above at >= {c.critical}: "
            f"{'YES' if c.far_above else 'no'}; {secs:.0f} s")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="reference")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    runs = [
        (f"verify, {args.scenario}, N = {args.n:,}", args.scenario, None, args.seeds, args.n, args.alpha),
        (f"resample_from_p (control), N = {args.n:,}", args.scenario, BUGS["resample_from_p"], 10, args.n,
         args.alpha),
        ("verify, one_draft, N = 1,000 (CI test)", "one_draft", None, 200, 1000, 0.05),
    ]  # fmt: skip
    tests = {"joint chi-square": joint_passes, "tokens z-test": tokens_passes}
    for label, scenario, bug, seeds, n, alpha in runs:
        t0 = time.perf_counter()
        cals = calibrate_tests(tests, scenario, seeds=range(seeds), n=n, alpha=alpha, bug=bug)
        secs = time.perf_counter() - t0
        for test, c in cals.items():
            print(line(f"{label}, {test}", c, secs), flush=True)


if __name__ == "__main__":
    main()
