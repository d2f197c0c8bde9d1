"""What a faulty pipeline hands the verifier: the settings the catalogue's pipeline mistakes got
wrong, and the raw softmax behind rows processed with a temperature.

# V vocabulary

For a temperature T the raw row is recovered exactly: with logits z, softmax(z / T)^T is
proportional to exp(z), so raw = row^T / sum(row^T) (zeros stay zeros). A top-k or top-p
filter removes tokens and cannot be undone this way, which is why the catalogue's instances
are temperatures. The closed forms (:func:`specviz.proof.theory.position_law`) and the mistakes
(:mod:`specviz.proof.engine_bugs`) both read this module, so neither imports the other.
"""

from __future__ import annotations

import sys

import numpy as np

from .._types import Array
from ..errors import InputError
from ..verifiers._xp import is_torch
from ..verifiers.processing import Settings

REQUEST = Settings(temperature=0.5)  # the request whose settings target_unprocessed ignores
DRAFTER = Settings(temperature=0.5)  # the drafter's settings, whose processing q_unprocessed forgets


def unprocess(rows: Array, settings: Settings) -> Array:
    """The raw softmax (..., V) behind rows processed with a temperature-only ``settings``.

    ``rows`` (..., V) NumPy or torch probabilities, each softmax(z / T) of some logits z; the
    result is softmax(z) = rows^T / sum(rows^T), of the input's kind and dtype. NaN stays NaN
    (the verifier then refuses the row). Filters (top-k, top-p, min-p) raise: what they removed
    is gone.
    """
    if settings.top_k or settings.top_p < 1 or settings.min_p > 0 or settings.greedy:
        raise InputError("settings", "a temperature > 0 without filters (invertible)", repr(settings))
    T = float(settings.temperature)
    if is_torch(rows):  # the same float64 arithmetic as NumPy's, so torch and NumPy get the same rows
        raw = unprocess(rows.detach().cpu().double().numpy(), settings)
        return sys.modules["torch"].from_numpy(raw).to(device=rows.device, dtype=rows.dtype)
    r = np.asarray(rows)
    dtype = r.dtype if r.dtype.kind == "f" else np.float64
    with np.errstate(invalid="ignore", divide="ignore"):
        w = r.astype(np.float64) ** T
        return (w / w.sum(-1, keepdims=True)).astype(dtype, copy=False)
