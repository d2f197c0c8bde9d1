"""A tiny array-namespace adapter so the verifier is written once for NumPy and PyTorch.

Only the operations whose spelling differs between the two libraries live here; plain
arithmetic, comparisons and advanced indexing are written directly in the algorithm.
Torch is imported lazily: NumPy users never pay for it.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def is_torch(x: Any) -> bool:
    """True for a ``torch.Tensor`` (without importing torch when it is not loaded)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


class NumpyOps:
    """Array operations on NumPy arrays."""

    name = "numpy"
    float64 = np.float64
    device_type = "cpu"
    chunk_elems = 1 << 16  # columns x rows per chunk of the sampling pass: stays in cache

    def __init__(self) -> None:
        self.device = None

    def asarray(self, x: Any, dtype: Any = None) -> np.ndarray:
        return np.asarray(x, dtype=dtype)

    def arange(self, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.int64)

    def full(self, shape: tuple[int, ...], value: float, dtype: Any) -> np.ndarray:
        return np.full(shape, value, dtype=dtype)

    def where(self, cond: Any, a: Any, b: Any) -> np.ndarray:
        return np.where(cond, a, b)

    def to_int64(self, x: Any) -> np.ndarray:
        return np.asarray(x).astype(np.int64, copy=False)

    def to_float64(self, x: Any) -> np.ndarray:
        return np.asarray(x).astype(np.float64, copy=False)

    def is_float(self, x: np.ndarray) -> bool:
        return np.issubdtype(x.dtype, np.floating)

    def is_integer(self, x: np.ndarray) -> bool:
        return np.issubdtype(x.dtype, np.integer)

    def run_length(self, passed: np.ndarray) -> np.ndarray:
        """(B, K) bool -> (B,) length of the leading run of True."""
        return np.cumprod(passed, axis=1, dtype=np.int64).sum(axis=1)

    def clamp_min0(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0, out=x)

    def cumsum64(self, w: np.ndarray) -> np.ndarray:
        """Row-wise running sum, accumulated sequentially in float64."""
        return np.cumsum(w, axis=1, dtype=np.float64)

    def cumsum_int(self, x: np.ndarray) -> np.ndarray:
        return np.cumsum(x, axis=1)

    def floor_int(self, x: np.ndarray) -> np.ndarray:
        """Non-negative floats -> int64 (truncation is floor here)."""
        return x.astype(np.int64)

    def upcast_half(self, w: np.ndarray) -> np.ndarray:
        return w.astype(np.float32) if w.dtype == np.float16 else w

    def sub_clamp0_(self, w: np.ndarray, q: np.ndarray) -> np.ndarray:
        """max(0, w - q) into w (q converted to w's dtype first, as torch does)."""
        np.subtract(w, q.astype(w.dtype, copy=False), out=w)
        return np.maximum(w, 0, out=w)

    def quantize(self, w: np.ndarray, scale: float) -> np.ndarray:
        """Floor non-negative weights to multiples of 1/scale, as int64 (scale a power of 2)."""
        with np.errstate(invalid="ignore", over="ignore"):  # overflow is caught by the caller
            return np.multiply(w, scale, out=w).astype(np.int64)

    def count_le(self, cdf: np.ndarray, thr: np.ndarray) -> np.ndarray:
        """(B, V) sorted rows, (B,) thresholds -> (B,) number of entries <= threshold."""
        return np.count_nonzero(cdf <= thr[:, None], axis=1).astype(np.int64)

    def argsort_rows(self, key: np.ndarray) -> np.ndarray:
        return np.argsort(key, axis=1, kind="stable")

    def take_along_rows(self, x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return np.take_along_axis(x, idx, axis=1)

    def argmax_last(self, x: np.ndarray) -> np.ndarray:
        return np.argmax(x, axis=-1).astype(np.int64)

    def any_last(self, x: np.ndarray) -> np.ndarray:
        return np.any(x, axis=-1)

    def is_contiguous(self, x: np.ndarray) -> bool:
        return bool(x.flags.c_contiguous)

    def select_rows(self, table: np.ndarray, rows: np.ndarray, cols: slice) -> np.ndarray:
        return table[rows, cols]

    def row_sums64(self, x: np.ndarray) -> np.ndarray:
        return np.sum(x, axis=-1, dtype=np.float64)

    def isfinite_all(self, x: np.ndarray) -> bool:
        return bool(np.isfinite(x).all())

    def scalar(self, x: Any) -> float:
        return float(x)

    def nonzero(self, mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask)

    def uniforms(self, rng: Any, shape: tuple[int, ...]) -> np.ndarray:
        if rng is None:
            rng = np.random.default_rng()
        if not isinstance(rng, np.random.Generator):
            raise _rng_error(rng, "a numpy.random.Generator for NumPy inputs")
        return rng.random(shape)


class TorchOps:
    """The same operations on torch tensors, on the device of the inputs."""

    name = "torch"

    def __init__(self, device: Any) -> None:
        import torch

        self.torch = torch
        self.device = device
        self.device_type = torch.device(device).type
        self.chunk_elems = 1 << 19  # fewer, larger chunks: torch's per-call cost is higher
        self.float64 = torch.float64

    def asarray(self, x: Any, dtype: Any = None) -> Any:
        return self.torch.as_tensor(x, dtype=dtype, device=self.device)

    def arange(self, n: int) -> Any:
        return self.torch.arange(n, dtype=self.torch.int64, device=self.device)

    def full(self, shape: tuple[int, ...], value: float, dtype: Any) -> Any:
        if dtype is np.int64 or dtype is int:
            dtype = self.torch.int64
        elif dtype is np.float64 or dtype is float:
            dtype = self.torch.float64
        elif dtype is bool:
            dtype = self.torch.bool
        return self.torch.full(shape, value, dtype=dtype, device=self.device)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        t = self.torch
        a = a if isinstance(a, t.Tensor) else t.as_tensor(a, device=self.device)
        b = b if isinstance(b, t.Tensor) else t.as_tensor(b, device=self.device)
        return t.where(cond, a, b)

    def to_int64(self, x: Any) -> Any:
        return self.asarray(x).to(self.torch.int64)

    def to_float64(self, x: Any) -> Any:
        return self.asarray(x).to(self.torch.float64)

    def is_float(self, x: Any) -> bool:
        return bool(x.is_floating_point())

    def is_integer(self, x: Any) -> bool:
        return not x.is_floating_point() and not x.is_complex() and x.dtype != self.torch.bool

    def run_length(self, passed: Any) -> Any:
        return self.torch.cumprod(passed.to(self.torch.int64), dim=1).sum(dim=1)

    def clamp_min0(self, x: Any) -> Any:
        return x.clamp_(min=0)

    def cumsum64(self, w: Any) -> Any:
        return self.torch.cumsum(w, dim=1, dtype=self.torch.float64)

    def cumsum_int(self, x: Any) -> Any:
        return self.torch.cumsum(x, dim=1)

    def floor_int(self, x: Any) -> Any:
        return x.to(self.torch.int64)

    def upcast_half(self, w: Any) -> Any:
        return w.float() if w.dtype in (self.torch.float16, self.torch.bfloat16) else w

    def sub_clamp0_(self, w: Any, q: Any) -> Any:
        return w.sub_(q.to(w.dtype)).clamp_(min=0)

    def quantize(self, w: Any, scale: float) -> Any:
        return w.mul_(scale).to(self.torch.int64)

    def count_le(self, cdf: Any, thr: Any) -> Any:
        # searchsorted(right=True) is "number of entries <= thr" for sorted rows.
        return self.torch.searchsorted(cdf, thr[:, None].contiguous(), right=True)[:, 0]

    def argsort_rows(self, key: Any) -> Any:
        return self.torch.argsort(key, dim=1, stable=True)

    def take_along_rows(self, x: Any, idx: Any) -> Any:
        return self.torch.gather(x, 1, idx)

    def argmax_last(self, x: Any) -> Any:
        return self.torch.argmax(x, dim=-1)

    def any_last(self, x: Any) -> Any:
        return self.torch.any(x, dim=-1)

    def is_contiguous(self, x: Any) -> bool:
        return bool(x.is_contiguous())

    def select_rows(self, table: Any, rows: Any, cols: slice) -> Any:
        # index_select is far cheaper than advanced indexing on torch's CPU backend.
        return self.torch.index_select(table[:, cols], 0, rows)

    def row_sums64(self, x: Any) -> Any:
        return x.sum(dim=-1, dtype=self.torch.float64)

    def isfinite_all(self, x: Any) -> bool:
        return bool(self.torch.isfinite(x).all())

    def scalar(self, x: Any) -> float:
        return float(x)

    def nonzero(self, mask: Any) -> Any:
        return self.torch.nonzero(mask).flatten()

    def uniforms(self, rng: Any, shape: tuple[int, ...]) -> Any:
        t = self.torch
        if rng is None:
            rng = t.Generator(device=self.device)
            rng.seed()
        if not isinstance(rng, t.Generator):
            raise _rng_error(rng, "a torch.Generator for torch inputs")
        # Draw on the generator's own device, then move: a CPU generator may drive CUDA inputs.
        u = t.rand(shape, generator=rng, dtype=t.float64, device=rng.device)
        return u.to(self.device)


def _rng_error(rng: Any, expected: str) -> Exception:
    from .errors import InputError

    return InputError("rng", expected, type(rng).__name__)


def ops_for(x: Any) -> NumpyOps | TorchOps:
    """The adapter matching the kind (and device) of ``x``."""
    if is_torch(x):
        return TorchOps(x.device)
    return NumpyOps()
