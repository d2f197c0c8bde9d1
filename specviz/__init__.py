"""specviz: an interactive lab for lossless speculative sampling."""

from .errors import InputError
from .verifiers.block import BlockThresholds, block_thresholds, verify_block, verify_block_lossy
from .verifiers.layout import FlatBatch, PaddedBatch, flat_to_padded, padded_to_flat
from .verifiers.lossy import verify_lenient, verify_ratio_threshold, verify_typical
from .verifiers.processing import Settings, process_logits
from .verifiers.sample_match import verify_sample_match
from .verifiers.tree import TreeVerification, verify_tree, verify_tree_chain
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


__version__ = _version()

__all__ = [
    "PAD_TOKEN",
    "BlockThresholds",
    "FlatBatch",
    "InputError",
    "PaddedBatch",
    "Settings",
    "TreeVerification",
    "Uniforms",
    "Verification",
    "block_thresholds",
    "flat_to_padded",
    "padded_to_flat",
    "process_logits",
    "verify",
    "verify_block",
    "verify_block_lossy",
    "verify_flat",
    "verify_greedy",
    "verify_lenient",
    "verify_ratio_threshold",
    "verify_sample_match",
    "verify_tree",
    "verify_tree_chain",
    "verify_typical",
]
