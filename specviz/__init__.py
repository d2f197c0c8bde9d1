"""specviz: an interactive lab for lossless speculative sampling."""

from .errors import InputError
from .verifiers.block import BlockThresholds, block_thresholds, verify_block, verify_block_lossy
from .verifiers.layout import FlatBatch, PaddedBatch, flat_to_padded, padded_to_flat
from .verifiers.lossy import verify_lenient, verify_ratio_threshold, verify_typical
from .verifiers.processing import Settings, process_logits
from .verifiers.sample_match import verify_sample_match
from .verifiers.tree import TreeVerification, verify_tree, verify_tree_chain
from .verifiers.verify import PAD_TOKEN, Uniforms, Verification, verify, verify_flat, verify_greedy

__version__ = "0.1.0"

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
