"""The command line a newcomer meets (issue 22.5): output within 100 columns, ``list`` without the
enumerations (and without SciPy), plain help text, and every argument error naming its flag."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from specviz import cli
from specviz.proof import report
from specviz.proof.bugs import BUGS
from specviz.proof.engine_bugs import FAULTS
from specviz.proof.scenarios import SCENARIOS

pytestmark = pytest.mark.heavy  # fresh interpreters: left out of the quick subset

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 100
SMALL = ["--n", "2000", "--scenarios", "reference", "--bugs", "none"]


def run(*args: str) -> tuple[int, str, str]:
    """``cli.main(args)`` in this process: exit status, stdout, stderr (argparse's own errors exit)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as e:
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def entries(text: str) -> list[str]:
    """The printed entries: a line that starts in column 0 and the indented lines under it, joined."""
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith(" ") and out:
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return [" ".join(e.split()) for e in out]


# --- specviz list ---------------------------------------------------------------------------------


def test_list_fits_100_columns_and_names_no_file_a_wheel_lacks():
    code, out, _ = run("list")
    assert code == 0 and out
    assert too_wide(out) == []
    assert "tests/" not in out  # the repository's tests are not installed with the package
    found = entries(out)
    for kind, names in (("verifier", cli.registry.VERIFIERS), ("scenario", SCENARIOS), ("bug", BUGS),
                        ("fault", FAULTS)):  # fmt: skip
        assert [e.split()[1] for e in found if e.startswith(kind + " ")] == list(names), kind
    # Every scenario still says what it judges, whole, however it was wrapped.
    for s in SCENARIOS.values():
        entry = next(e for e in found if e.startswith(f"scenario {s.name} "))
        assert entry.endswith("judges: " + " ".join(s.covers.split())), s.name
    assert "specviz list --tv" in out and "exact TV from the target:" not in out


def test_the_fault_lines_are_their_caught_by_less_the_test_paths():
    code, out, _ = run("list")
    found = entries(out)
    for f in FAULTS.values():
        assert "tests/" in f.caught_by  # the app's text keeps the path: the control for the check above
        entry = next(e for e in found if e.startswith(f"fault {f.name} "))
        assert entry == f"fault {f.name} caught by " + " ".join(cli.TESTS_PATH.sub("", f.caught_by).split())


def test_list_computes_no_exact_tv_without_the_flag(monkeypatch):
    calls: list[str] = []

    def counted(fn):
        def wrapper(name: str) -> str:
            calls.append(name)
            return f"TV of {name}"

        return wrapper

    monkeypatch.setattr(report, "home_tvs", counted(report.home_tvs))
    monkeypatch.setattr(report, "fault_tv", counted(report.fault_tv))
    code, out, _ = run("list")
    assert code == 0 and calls == []
    code, out, _ = run("list", "--tv")  # the control: the flag does call them, once per bug and fault
    assert code == 0 and calls == [*BUGS, *FAULTS]
    assert all(f"exact TV from the target: TV of {name}" in out for name in calls)


def test_list_in_a_fresh_interpreter_imports_neither_scipy_nor_the_enumeration():
    probe = ("import contextlib, io, sys; from specviz.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()): main({argv!r})\n"
             "print([m for m in ('scipy', 'specviz.proof.stats', 'specviz.proof.exact', 'specviz.proof.report') "
             "if m in sys.modules])")  # fmt: skip

    def loaded(argv: list[str]) -> list[str]:
        r = subprocess.run([sys.executable, "-c", probe.format(argv=argv)], cwd=ROOT, capture_output=True, text=True,
                           timeout=300, check=True)  # fmt: skip
        return json.loads(r.stdout.strip().replace("'", '"'))

    assert loaded(["list"]) == []
    assert loaded(["list", "--tv"]) != []  # the control: the enumeration does need them


def test_list_with_tvs_fits_too():
    code, out, _ = run("list", "--tv")
    assert code == 0 and too_wide(out) == []
    found = entries(out)
    for b in BUGS:
        entry = next(e for e in found if e.startswith(f"bug {b} "))
        assert "exact TV from the target: " in entry, b


# --- prove's output -------------------------------------------------------------------------------


def test_prove_table_fits_100_columns():
    code, out, _ = run("prove", "--quiet", *SMALL)
    assert code == cli.EXIT_INCONCLUSIVE, out  # 2,000 sequences lack the power at TV 0.05
    assert too_wide(out) == []
    head = out.splitlines()[1].split()
    assert head == [name for name, _ in report.COLUMNS]
    row = next(line for line in out.splitlines() if line.startswith("reference "))
    assert row.split()[1] == "verify" and row.endswith(" inconclusive")


def test_the_widest_row_is_100_characters():
    # The widest cells each column can hold: what the widths are chosen for.
    cells = [max(SCENARIOS, key=len), max(BUGS, key=len), "4.9e-324", "1.0000", "1.0000", "10.000", "9.999",
             "inconcl.", "inconclusive"]  # fmt: skip
    assert len(report._row(cells)) == WIDTH
    assert len(report.header().splitlines()[1]) <= WIDTH


def test_a_long_verifier_name_keeps_its_function_and_is_named_in_full_above():
    assert report.short_name("tests.user_verifiers:bonus_from_q") == "...ifiers:bonus_from_q"
    assert len(report.short_name("x" * 80)) == report.NAME_WIDTH and report.short_name("verify") == "verify"
    code, out, _ = run("prove", "--quiet", "--verifier", "tests.user_verifiers:crashes", *SMALL)
    assert code == cli.EXIT_FAIL
    assert "verifier under test: tests.user_verifiers:crashes (kind chain)" in out
    row = next(line for line in out.splitlines() if line.startswith("reference "))
    assert row.split()[1] == "...r_verifiers:crashes" and row.endswith(" ERROR")
    # Only the verifier's own traceback, quoted as Python wrote it, may run past 100 columns.
    table = out.split("ERROR reference /")[0]
    assert too_wide(table) == []


def test_block_kind_output_and_its_exact_court_fit():
    lossy = "specviz.verifiers.block:verify_block_lossy"
    code, out, _ = run("prove", "--quiet", "--kind", "block", "--verifier", lossy, "--n", "20000", "--scenarios",
                       "reference", "--bugs", "none")  # fmt: skip
    assert code == cli.EXIT_FAIL
    assert "Exact court (block)" in out and "FAIL reference / specviz.verifiers.block:verify_block_lossy:" in out
    assert too_wide(out) == []


# --- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["prove", "--help"], ["list", "--help"]])
@pytest.mark.parametrize("columns", ["60", "200"])
def test_help_is_plain_text_within_the_terminal_and_100_columns(argv, columns, monkeypatch):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run(*argv)
    assert code == 0 and out.startswith("usage:")
    assert "``" not in out and ":mod:" not in out and ":func:" not in out
    assert too_wide(out) == []
    if argv[0] == "prove":
        assert "``" in cli.__doc__  # the control: the docstring the description comes from has them
        assert "\nExit status: 0 when" in out  # paragraphs stay apart
        assert max(len(line) for line in out.splitlines()) > (50 if columns == "60" else 80)


# --- argument errors ------------------------------------------------------------------------------


OUR_ERRORS = [
    (["--n", "0"], "--n"),
    (["--seed", "-1"], "--seed"),
    (["--alpha", "1.5"], "--alpha"),
    (["--alpha", "nan"], "--alpha"),
    (["--timeout", "-1"], "--timeout"),
    (["--timeout", "nan"], "--timeout"),
    (["--scenarios", "moon"], "--scenarios"),
    (["--scenarios", "none"], "--scenarios"),
    (["--bugs", "typo"], "--bugs"),
    (["--kind", "block", "--bugs", "shared_uniform"], "--bugs"),
    (["--kind", "bogus"], "--kind"),
    (["--verifier", "nomodule"], "--verifier"),
    (["--verifier", "no_such_mod:f"], "--verifier"),
    (["--verifier", "os:no_such_function"], "--verifier"),
    (["--tv", "-1", "--vocab", "16"], "--tv"),
    (["--threads", "-2", "--vocab", "16"], "--threads"),
    (["--vocab", "1"], "--vocab"),
    (["--vocab", "16", "--drafts", "0"], "--drafts"),
    (["--vocab", "16", "--dtype", "int8"], "--dtype"),
    (["--vocab", "16", "--backend", "jax"], "--backend"),
    (["--vocab", "16", "--device", "tpu"], "--device"),
    (["--vocab", "16", "--layout", "odd"], "--layout"),
    (["--replay", "no_such_file.npz"], "--replay"),
]


@pytest.mark.parametrize(("args", "flag"), OUR_ERRORS, ids=[" ".join(a) for a, _ in OUR_ERRORS])
def test_each_input_error_starts_with_its_flag(args, flag):
    code, out, err = run("prove", "--quiet", *args)
    assert code == cli.EXIT_USAGE, (out, err)
    assert err.startswith(f"error: {flag}: expected "), err
    assert out == ""  # nothing ran


ARGPARSE_ERRORS = [
    (["--n", "many"], "--n"), (["--alpha", "x"], "--alpha"), (["--timeout", "1s"], "--timeout"),
    (["--seed", "0.5"], "--seed"), (["--vocab", "big"], "--vocab"), (["--tv", "small"], "--tv"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "flag"), ARGPARSE_ERRORS, ids=[" ".join(a) for a, _ in ARGPARSE_ERRORS])
def test_argparse_type_errors_name_the_flag_too(args, flag):
    code, _, err = run("prove", *args)
    assert code == cli.EXIT_USAGE
    assert f"error: argument {flag}: invalid " in err.splitlines()[-1]


def test_plan_errors_are_renamed_to_the_flag_and_keep_their_message():
    # The control: the proof module names its own argument; the command line names the flag.
    from specviz.errors import InputError
    from specviz.proof.prove import plan

    with pytest.raises(InputError, match=r"^scenario: expected one of reference"):
        plan(["moon"], [])
    _, _, err = run("prove", "--scenarios", "moon")
    assert err.startswith("error: --scenarios: expected one of reference") and "got 'moon'" in err
