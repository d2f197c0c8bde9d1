#!/usr/bin/env bash
# The CUDA checks, for a machine with an NVIDIA GPU; about 2-4 minutes in all.
#
#   bash benchmarks/gpu_check.sh
#
# 1. The CUDA tests: every verifier (verify, verify_flat, verify_greedy, verify_block and each
#    deliberate bug that swaps one step of the rule) returns NumPy's outputs bit for bit from
#    CUDA tensors, and the guards raise.
# 2. The CUDA benchmark at B = 256, K = 4, V = 128256, float32: time per call, achieved
#    bandwidth (must-read bytes / time) as a fraction of the device's peak, and the ratio to a
#    read pass over the same bytes measured in the same run.
# Without a GPU it says so and exits 0; a failing test makes it exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: no CUDA device visible to torch; nothing to check"
    exit 0
fi
python -c "import torch; p = torch.cuda.get_device_properties(0); print(f'gpu_check: {p.name}, {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}')"
date -u +"gpu_check: %Y-%m-%d %H:%M UTC"

echo "== 1. CUDA tests (bit-identical tokens against NumPy) =="
timeout 180 python -m pytest tests/test_hotpath_cuda.py "tests/test_verify.py::test_cuda_matches_cpu_and_stays_on_device" \
    -q -p no:cacheprovider -rs

echo "== 2. CUDA benchmark: B = 256, K = 4, V = 128256 =="
timeout 150 python benchmarks/bench_verify.py --device cuda --sizes 256x128256 --repeat 20
