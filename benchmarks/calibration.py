"""Rejection rate of the joint test for the correct verifier over many seeds.

    python benchmarks/calibration.py [--seeds 100] [--n 100000] [--alpha 0.01]

A calibrated test rejects about alpha of honest runs; the binomial test's p-value says
whether the observed count is consistent with that. A broken verifier is run beside it as
the negative control.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.bugs import BUGS  # noqa: E402
from specviz.prove import calibrate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--alpha", type=float, default=0.01)
    args = ap.parse_args()
    for label, bug, seeds in (("verify", None, args.seeds), ("resample_from_p", BUGS["resample_from_p"], 10)):
        t0 = time.perf_counter()
        c = calibrate("reference", seeds=range(seeds), n=args.n, alpha=args.alpha, bug=bug)
        secs = time.perf_counter() - t0
        print(f"{label:16s} rejected {c.rejections}/{c.trials} at alpha {c.alpha} (rate {c.rate:.3f}); "
              f"binomial p = {c.binom_p:.3g}; consistent: {c.consistent}; {secs:.0f} s")  # fmt: skip


if __name__ == "__main__":
    main()
