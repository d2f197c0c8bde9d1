"""specviz: an interactive lab for lossless speculative sampling."""

from .block import BlockThresholds, block_thresholds, verify_block, verify_block_lossy
from .errors import InputError
from .layout import FlatBatch, PaddedBatch, flat_to_padded, padded_to_flat
from .processing import Settings, process_logits
from .sample_match import verify_sample_match
from .verify import PAD_TOKEN, Uniforms, Verification, verify, verify_flat, verify_greedy

__version__ = "0.1.0"

__all__ = [
    "PAD_TOKEN",
    "BlockThresholds",
    "FlatBatch",
    "InputError",
    "PaddedBatch",
    "Settings",
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
    "verify_sample_match",
]
