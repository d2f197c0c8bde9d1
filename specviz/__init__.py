"""specviz: an interactive lab for lossless speculative sampling."""

from .errors import InputError
from .layout import FlatBatch, PaddedBatch, flat_to_padded, padded_to_flat
from .verify import PAD_TOKEN, Uniforms, Verification, verify, verify_flat, verify_greedy

__version__ = "0.1.0"

__all__ = [
    "PAD_TOKEN",
    "FlatBatch",
    "InputError",
    "PaddedBatch",
    "Uniforms",
    "Verification",
    "flat_to_padded",
    "padded_to_flat",
    "verify",
    "verify_flat",
    "verify_greedy",
]
