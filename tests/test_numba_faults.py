"""A broken Numba cache degrades the compiled loops, never the call (issue 21, point 2).

Each fault runs in a fresh process with its own cache: a truncated index (.nbi), a data file
(.nbc) overwritten with random bytes, a read-only installation with no writable home, and a
NUMBA_CACHE_DIR that cannot be a directory. Each must return the tokens of ``SPECVIZ_BACKEND=numpy``
and warn once, saying what failed. Before the fix the first two raised ``UnpicklingError`` /
``EOFError`` from every ``specviz.verify`` until the files were deleted by hand, and the last two
raised ``RuntimeError: cannot cache function '_sum': no locator available``.

Read-only is simulated in a way that holds for root too (root writes through file modes): the
package's ``__pycache__`` and the home directory are paths through a regular file, which no one
can create a directory under.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # a fresh interpreter per broken cache: left out of the quick subset

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[1]

# Every compiled loop: the accept phase, the one-level draw (V <= 256, validate=False) and the
# block sums (V > 256), on float64 and float32 tables (argv[1] "float64": that table type alone; "both":
# the two sets, the float64 alone second), with and without checks. The two faults that compile in
# memory run on float64 alone: compiling costs seconds a signature, and the loops' agreement with NumPy
# per dtype is tests/test_numba_pass.py's.
WORKLOAD = """
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import numpy as np, specviz
    from specviz.verifiers import _fused

    def work(tables):
        rng = np.random.default_rng(21)
        tokens = []
        for V in (5, 600):
            for dtype in (np.float64, np.float32):
                if tables == "float64" and dtype != np.float64:
                    continue
                t = rng.random((6, 3, V)); t /= t.sum(-1, keepdims=True)
                d = rng.random((6, 2, V)); d /= d.sum(-1, keepdims=True)
                x = rng.integers(0, V, (6, 2))
                u = specviz.Uniforms(rng.random((6, 2)), rng.random(6))
                for validate in (True, False):
                    res = specviz.verify(t.astype(dtype), d.astype(dtype), x, np.array([2, 1, 0, 2, 2, 1]),
                                         uniforms=u, validate=validate)
                    tokens.append(res.tokens.tolist())
                    tokens.append(specviz.verify(t.astype(dtype), None, x, np.full(6, 2), uniforms=u,
                                                 validate=validate).tokens.tolist())
        return tokens

    tokens = work(sys.argv[1])
    tokens_f64 = work("float64") if sys.argv[1] == "both" else None  # "both": the two table sets, one process
print(json.dumps({
    "tokens": tokens,
    "tokens_f64": tokens_f64,
    "compiled": _fused.enabled(),
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught if "specviz" in str(w.message)],
}))
"""


def run(env_changes: dict[str, str | None], pythonpath: Path = ROOT, tables: str = "all") -> dict:
    env = dict(os.environ)
    for key in ("SPECVIZ_BACKEND", "NUMBA_CACHE_DIR"):
        env.pop(key, None)
    env.update({"PYTHONPATH": str(pythonpath), "PYTHONDONTWRITEBYTECODE": "1"})
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    out = subprocess.run(  # cwd: python -c puts it first on sys.path, before PYTHONPATH
        [sys.executable, "-c", WORKLOAD, tables], env=env, capture_output=True, text=True, timeout=600, cwd=pythonpath
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def numpy_run() -> dict:
    """The NumPy code's tokens on every table type and on float64 alone, from one fresh interpreter."""
    res = run({"SPECVIZ_BACKEND": "numpy"}, tables="both")
    assert not res["compiled"] and not res["warnings"]
    return res


@pytest.fixture(scope="module")
def numpy_tokens(numpy_run) -> list:
    return numpy_run["tokens"]


@pytest.fixture(scope="module")
def numpy_tokens_f64(numpy_run) -> list:
    return numpy_run["tokens_f64"]


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory) -> Path:
    """A cache the workload filled, to copy and break."""
    cache = tmp_path_factory.mktemp("numba-cache")
    res = run({"NUMBA_CACHE_DIR": str(cache)})
    assert res["compiled"] and not res["warnings"], res["warnings"]
    assert list(cache.rglob("_fused_kernel.*.nbi")) and list(cache.rglob("_fused_kernel.*.nbc"))
    return cache


def broken_copy(good: Path, dest: Path, suffix: str, damage) -> Path:
    shutil.copytree(good, dest)
    files = sorted(dest.rglob(f"_fused_kernel.*{suffix}"))
    assert files
    for f in files:
        damage(f)
    return dest


def test_a_healthy_cache_loads_without_a_warning(good_cache, numpy_tokens):
    res = run({"NUMBA_CACHE_DIR": str(good_cache)})
    assert res["compiled"] and not res["warnings"]
    assert res["tokens"] == numpy_tokens  # the compiled loops and the NumPy code agree


def test_a_truncated_index_file_gives_numpys_tokens_and_one_warning(good_cache, numpy_tokens, tmp_path):
    def truncate(f: Path) -> None:
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])

    cache = broken_copy(good_cache, tmp_path / "cache", ".nbi", truncate)
    res = run({"NUMBA_CACHE_DIR": str(cache)})
    assert res["tokens"] == numpy_tokens
    assert not res["compiled"]
    assert len(res["warnings"]) == 1, res["warnings"]
    (w,) = res["warnings"]
    assert w.startswith("CompiledLoopsWarning: specviz: the compiled loop ") and "could not be loaded" in w
    assert str(cache) in w and ("UnpicklingError" in w or "EOFError" in w), w  # what failed, and where


def test_a_data_file_of_random_bytes_gives_numpys_tokens_and_one_warning(good_cache, numpy_tokens, tmp_path):
    noise = random.Random(21)

    def overwrite(f: Path) -> None:
        f.write_bytes(noise.randbytes(f.stat().st_size))

    cache = broken_copy(good_cache, tmp_path / "cache", ".nbc", overwrite)
    res = run({"NUMBA_CACHE_DIR": str(cache)})
    assert res["tokens"] == numpy_tokens
    assert not res["compiled"]
    assert len(res["warnings"]) == 1 and str(cache) in res["warnings"][0], res["warnings"]


def read_only_install(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the package whose __pycache__ cannot be created, and a home that cannot be either."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "specviz", site / "specviz", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "specviz" / "verifiers" / "__pycache__").write_text("a file where Numba wants a directory\n")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    return site, {"HOME": str(blocker / "home"), "XDG_CACHE_HOME": str(blocker / "cache")}


def test_a_read_only_install_with_no_writable_home_compiles_in_memory(numpy_tokens_f64, tmp_path):
    site, env = read_only_install(tmp_path)
    res = run({**env, "NUMBA_CACHE_DIR": None}, pythonpath=site, tables="float64")
    assert res["tokens"] == numpy_tokens_f64
    assert res["compiled"]  # compiled in memory (cache=False): still the fast path
    assert len(res["warnings"]) == 1, res["warnings"]
    assert "no writable cache directory" in res["warnings"][0] and "no locator available" in res["warnings"][0]
    assert not list(site.rglob("*.nbi")) and not list(tmp_path.glob("*.nbi"))  # nothing written anywhere


def test_a_bad_numba_cache_dir_is_named_and_the_call_still_runs(numpy_tokens_f64, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bad = str(blocker / "numba-cache")
    # With the package's own __pycache__ writable, Numba silently caches there instead.
    site = tmp_path / "site"
    shutil.copytree(ROOT / "specviz", site / "specviz", ignore=shutil.ignore_patterns("__pycache__"))
    res = run({"NUMBA_CACHE_DIR": bad}, pythonpath=site, tables="float64")
    assert res["tokens"] == numpy_tokens_f64 and res["compiled"]
    assert len(res["warnings"]) == 1 and f"NUMBA_CACHE_DIR={bad!r} is not a writable directory" in res["warnings"][0]
    assert list((site / "specviz" / "verifiers" / "__pycache__").glob("_fused_kernel.*.nbi"))  # where it went
    # Read-only package, no home, and that NUMBA_CACHE_DIR: compiled in memory, the directory named.
    ro_site, env = read_only_install(tmp_path / "ro")
    res = run({**env, "NUMBA_CACHE_DIR": bad}, pythonpath=ro_site, tables="float64")
    assert res["tokens"] == numpy_tokens_f64 and res["compiled"]
    assert len(res["warnings"]) == 1 and f"NUMBA_CACHE_DIR={bad!r}" in res["warnings"][0]
    assert "compiled in memory" in res["warnings"][0]
