"""One array alias: ``Array`` is defined in specviz/_types.py and imported everywhere else.

(mypy itself runs in .ci/run, at the strictness [tool.mypy] in pyproject.toml states.)"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = "specviz/_types.py"


def array_findings(path: str, source: str) -> list[str]:
    """What is wrong with a module's ``Array``: defined outside HOME, or used without importing it from there."""
    tree = ast.parse(source)
    defined = [
        n.lineno
        for n in ast.walk(tree)
        if (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "Array" for t in n.targets))
        or (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "Array")
        or (type(n).__name__ == "TypeAlias" and n.name.id == "Array")  # `type Array = ...` (Python 3.12)
    ]
    imported = [
        n.module
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and any((a.asname or a.name) == "Array" for a in n.names)
    ]
    used = any(isinstance(n, ast.Name) and n.id == "Array" and isinstance(n.ctx, ast.Load) for n in ast.walk(tree))
    out = []
    if path == HOME:
        if len(defined) != 1:
            out.append(f"{path}: defines Array {len(defined)} times")
        return out
    out += [f"{path}:{line}: defines its own Array" for line in defined]
    if any(m not in ("_types", "specviz._types") for m in imported):
        out.append(f"{path}: imports Array from {imported}, not specviz._types")
    if used and not imported and not defined:
        out.append(f"{path}: uses Array without importing it")
    return out


def test_array_is_defined_once_and_imported_from_types():
    files = sorted((ROOT / "specviz").rglob("*.py"))
    findings = []
    users = 0
    for f in files:
        rel = str(f.relative_to(ROOT))
        source = f.read_text()
        findings += array_findings(rel, source)
        users += rel != HOME and "_types import Array" in source
    assert not findings, findings
    assert users >= 10  # the verifiers and the proof's torch-aware modules all take arrays


def test_the_check_sees_a_second_definition_and_a_foreign_import():
    """Negative control: the module-level ``Array = Any`` this replaced, and an import from elsewhere."""
    own = "from typing import Any\n\nArray = Any  # numpy.ndarray or torch.Tensor\n\ndef f(x: Array) -> None: ...\n"
    assert array_findings("specviz/verifiers/x.py", own) == ["specviz/verifiers/x.py:3: defines its own Array"]
    foreign = "from .verify import Array\n\ndef f(x: Array) -> Array:\n    return x\n"
    assert array_findings("specviz/verifiers/x.py", foreign) == [
        "specviz/verifiers/x.py: imports Array from ['verify'], not specviz._types"
    ]
    assert array_findings("specviz/verifiers/x.py", "def f(x: Array) -> None:\n    pass\n") == [
        "specviz/verifiers/x.py: uses Array without importing it"
    ]
    assert array_findings("specviz/verifiers/x.py", "from .._types import Array\n\nx: Array = 1\n") == []
    assert array_findings(HOME, "from typing import Any\n\nArray = Any\nArray = int\n") == [
        f"{HOME}: defines Array 2 times"
    ]
