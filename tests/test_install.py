"""`pip install .` works: build the wheel, install it into a fresh virtual environment, run `specviz`.

Offline and small: the wheel is built with the setuptools already installed (no build
isolation, no index), and the fresh environment gets NumPy and SciPy by a path file pointing
at links to the copies installed here, so nothing is downloaded. streamlit, plotly and torch
are not visible inside it: the package must import and the command must run without them.
About 6 s on the 2-core development machine, most of it creating the environment with pip.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # builds and installs the wheel: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("numpy", "scipy")  # the declared runtime dependencies
OPTIONAL = ("torch", "streamlit", "plotly", "pandas", "numba")  # extras: must not be needed to import specviz


def run(cmd: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")}
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=300, **kw)
    assert res.returncode == 0, f"{' '.join(map(str, cmd))} exited {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def link_installed(name: str, into: Path) -> None:
    """Link an installed distribution's package, its vendored libraries and its metadata into ``into``."""
    pkg = Path(importlib.import_module(name).__file__).parent
    site = pkg.parent
    for path in [pkg, site / f"{name}.libs", *site.glob(f"{name}-*.dist-info")]:
        if path.exists():
            (into / path.name).symlink_to(path, target_is_directory=path.is_dir())


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the built wheel installed; returns its bin directory."""
    tmp = tmp_path_factory.mktemp("install")
    # `pip install .` on a copy of the checkout (app_pages/, tests/ and all: package discovery must
    # pick specviz alone), so that no build/ or egg-info is left in the working tree.
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "dist",
                                                              ".*cache", ".benchmarks", ".venv"))  # fmt: skip
    dist = tmp / "dist"
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(dist)], cwd=src)  # fmt: skip
    (wheel,) = dist.glob("specviz-*.whl")

    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    py = bindir / "python"
    run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], cwd=tmp)
    purelib = run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp).stdout.strip()
    deps = tmp / "deps"
    deps.mkdir()
    for name in RUNTIME:
        link_installed(name, deps)
    (Path(purelib) / "_specviz_test_deps.pth").write_text(str(deps) + "\n")
    return bindir


def test_wheel_holds_only_the_package_and_declares_its_dependencies(installed):
    (wheel,) = (installed.parent.parent / "dist").glob("specviz-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"specviz"}
    assert "specviz/cli.py" in names and "specviz/verifiers/verify.py" in names
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    plain = {r.split(">")[0].split("=")[0].split("<")[0].strip() for r in requires if "extra ==" not in r}
    assert plain == set(RUNTIME), requires
    for extra, dep in (("torch", "torch"), ("app", "streamlit"), ("app", "plotly"), ("fast", "numba")):
        assert any(r.startswith(dep) and f'extra == "{extra}"' in r for r in requires), (extra, dep, requires)
    assert "specviz = specviz.cli:main" in entry


def test_pip_check_finds_the_declared_dependencies(installed):
    out = run([str(installed / "python"), "-m", "pip", "check"], cwd=installed).stdout
    assert "No broken requirements" in out, out


def test_console_command_runs_outside_the_repository(installed, tmp_path):
    res = run([str(installed / "specviz"), "list"], cwd=tmp_path)
    lines = res.stdout.splitlines()
    from specviz.proof.bugs import BUGS
    from specviz.proof.scenarios import SCENARIOS

    assert {ln.split()[1] for ln in lines if ln.startswith("scenario ")} == set(SCENARIOS)
    assert {ln.split()[1] for ln in lines if ln.startswith("bug ")} == set(BUGS)
    bad = subprocess.run([str(installed / "specviz"), "prove", "--n", "0"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "--n" in bad.stderr, (bad.returncode, bad.stderr)


def test_package_imports_without_the_optional_dependencies(installed, tmp_path):
    code = (
        "import importlib.util, sys\n"
        "import specviz, specviz.cli, specviz.proof.prove, specviz.proof.exact\n"
        "import specviz.proof.theory, specviz.proof.bugs, specviz.proof.stats\n"
        f"missing = [m for m in {OPTIONAL!r} if importlib.util.find_spec(m) is not None]\n"
        "assert not missing, f'visible in the fresh venv: {missing}'\n"
        f"loaded = [m for m in sys.modules if m.split('.')[0] in {OPTIONAL!r}]\n"
        "assert not loaded, loaded\n"
        "print(specviz.__file__)\n"
    )
    out = run([str(installed / "python"), "-c", code], cwd=tmp_path).stdout.strip()
    assert Path(out).is_relative_to(installed.parent), f"imported {out}, not the installed copy"


def test_every_module_imports_without_the_extras_except_figure_builders(installed, tmp_path):
    # Each module of the installed package is imported on its own. Only Plotly (the app extra that
    # builds figures) may be missing, and Numba for the one module that holds the compiled pass
    # (the "fast" extra); streamlit never (no Streamlit in the package), torch never (it is
    # imported when a tensor arrives), except in the real model's forward, drafters and rounds (the
    # "model" extra): specviz.models itself and its loader import without it, to say what to install.
    code = (
        "import importlib, pkgutil, specviz\n"
        "mods = pkgutil.walk_packages(specviz.__path__, 'specviz.')\n"
        "for m in sorted(i.name[len('specviz.'):] for i in mods if not i.ispkg and i.name != 'specviz.__main__'):\n"
        "    try:\n"
        "        importlib.import_module('specviz.' + m)\n"
        "    except ModuleNotFoundError as e:\n"
        "        print(m, e.name)\n"
        "    else:\n"
        "        print(m, 'ok')\n"
    )
    out = run([str(installed / "python"), "-c", code], cwd=tmp_path).stdout.split("\n")
    results = dict(line.split() for line in out if line.strip())
    ok = {m for m, r in results.items() if r == "ok"}
    assert {"verifiers.verify", "cli", "proof.prove", "proof.bugs", "proof.theory", "verifiers.block"} <= ok
    assert results.get("verifiers._fused_kernel") == "numba"
    assert {"models.smollm2"} <= ok and results.get("models.llama") == "torch"
    model_torch = {"models.llama", "models.drafters", "models.rounds"}  # the "model" extra
    allowed = {"verifiers._fused_kernel": "numba", **dict.fromkeys(model_torch, "torch")}
    bad = {m: r for m, r in results.items() if r not in ("ok", "plotly") and allowed.get(m) != r}
    assert not bad, f"modules that need more than numpy and scipy to import: {bad}"


def test_verify_without_numba_gives_the_tokens_of_the_numba_pass(installed, tmp_path):
    # The fresh venv has numpy and scipy only: verify at V = 600 runs NumPy's passes there. Here
    # (Numba installed, the "fast" extra) the same call runs the compiled pass: same tokens.
    code = (
        "import numpy as np, specviz\n"
        "from specviz.verifiers import _fused\n"
        "assert not _fused.enabled()\n"
        "rng = np.random.default_rng(4)\n"
        "t = rng.gamma(0.5, size=(16, 3, 600)); t /= t.sum(-1, keepdims=True)\n"
        "d = rng.gamma(0.5, size=(16, 2, 600)); d /= d.sum(-1, keepdims=True)\n"
        "x = rng.integers(0, 600, size=(16, 2))\n"
        "res = specviz.verify(t, d, x, np.full(16, 2), rng=np.random.default_rng(5))\n"
        "print(' '.join(map(str, res.tokens.ravel())))\n"
    )
    there = run([str(installed / "python"), "-c", code], cwd=tmp_path).stdout.split()
    import numpy as np

    import specviz
    from specviz.verifiers import _fused

    rng = np.random.default_rng(4)
    t = rng.gamma(0.5, size=(16, 3, 600))
    t /= t.sum(-1, keepdims=True)
    d = rng.gamma(0.5, size=(16, 2, 600))
    d /= d.sum(-1, keepdims=True)
    x = rng.integers(0, 600, size=(16, 2))
    if importlib.util.find_spec("numba") is not None and os.environ.get(_fused.BACKEND_ENV, "auto") != "numpy":
        assert _fused.enabled()
    here = specviz.verify(t, d, x, np.full(16, 2), rng=np.random.default_rng(5)).tokens.ravel()
    assert list(map(int, there)) == here.tolist()
