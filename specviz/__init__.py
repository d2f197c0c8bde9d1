"""specviz: an interactive lab for lossless speculative sampling.

The verifier and its types. The other rules (block, tree, sample-and-match, the lossy rules kept
for comparison) and the layout helpers are imported from their modules:
``specviz.verifiers.block``, ``.tree``, ``.sample_match``, ``.lossy``, ``.layout``.
"""

from typing import Any

from .errors import InputError
from .verifiers.processing import Settings, process_logits
from .verifiers.verify import PAD_TOKEN, Uniforms, Verification, verify, verify_flat, verify_greedy


def _version() -> str:
    """The version pyproject.toml declares: from the installed metadata, or (run from a checkout
    without installing) from pyproject.toml itself, so the number is written in one place only."""
    from importlib import metadata
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():  # a checkout: its pyproject.toml is the truth, even if an older wheel is installed
        import tomllib

        with pyproject.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    try:
        return metadata.version("specviz")
    except metadata.PackageNotFoundError:  # pragma: no cover - neither installed nor a checkout
        return "0+unknown"


def __getattr__(name: str) -> Any:
    """``specviz.__version__``, read when asked for: ``import specviz`` reads no file."""
    if name == "__version__":
        globals()["__version__"] = version = _version()
        return version
    raise AttributeError(f"module 'specviz' has no attribute {name!r}")


__all__ = [
    "PAD_TOKEN",
    "InputError",
    "Settings",
    "Uniforms",
    "Verification",
    "process_logits",
    "verify",
    "verify_flat",
    "verify_greedy",
]
