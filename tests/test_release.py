"""Release basics: one version source, ``specviz --version``, the licence shipped."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import specviz
from specviz import cli

ROOT = Path(__file__).resolve().parent.parent


def _declared() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["version"]


def test_version_comes_from_pyproject():
    assert specviz.__version__ == _declared()
    # written once: no other file of the package spells the number out
    hits = [p for p in (ROOT / "specviz").rglob("*.py") if f'"{_declared()}"' in p.read_text()]
    assert hits == []


def test_version_flag_exits_0_and_prints_the_version(capsys):
    try:
        cli.main(["--version"])
    except SystemExit as e:
        assert e.code == 0
    assert capsys.readouterr().out.strip().endswith(_declared())


def test_python_m_specviz_version():
    out = subprocess.run([sys.executable, "-m", "specviz", "--version"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"python -m specviz {_declared()}"


def test_licence_and_changelog_ship():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert f"## {_declared()}" in (ROOT / "CHANGELOG.md").read_text()
    assert (ROOT / "specviz" / "py.typed").exists()


def test_import_specviz_reads_no_file():
    # Only modules are read at import (the version is read when first asked for); a negative control
    # shows the audit hook sees a file read by asking for the version.
    code = ("import sys\n"
            "seen = []\n"
            "sys.addaudithook(lambda ev, args: ev == 'open' and seen.append(str(args[0])))\n"
            "import specviz\n"
            "print([p for p in seen if not p.endswith(('.py', '.pyc'))])\n"
            "specviz.__version__\n"
            "print([p for p in seen if p.endswith('pyproject.toml')])\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    at_import, after_version = out.stdout.splitlines()
    assert at_import == "[]"
    assert after_version == repr([str(ROOT / "pyproject.toml")])
