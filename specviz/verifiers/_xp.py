"""A tiny array-namespace adapter so the verifier is written once for NumPy and PyTorch.

Only the operations whose spelling differs between the two libraries live here; plain
arithmetic, comparisons and advanced indexing are written directly in the algorithm. One
exception: :func:`accepts`, the accept comparison, lives here once for NumPy, torch and the
compiled loop (this module imports nothing that imports the loop). Torch is imported lazily:
NumPy users never pay for it.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import Any

import numpy as np

from ..errors import InputError

_ONE_BITS_32 = 0x3F800000  # bit pattern of float32 1.0: [+0, 1] is exactly bits 0 .. this
_ONE_BITS_64 = 0x3FF0000000000000  # the same for float64


def is_torch(x: Any) -> bool:
    """True for a ``torch.Tensor`` (without importing torch when it is not loaded).

    A torch that another thread is still importing (the app warms it up in the background) is in
    ``sys.modules`` before it defines ``Tensor``; no tensor can exist yet, so nothing is one.
    """
    tensor = getattr(sys.modules.get("torch"), "Tensor", None)
    return tensor is not None and isinstance(x, tensor)


class NumpyOps:
    """Array operations on NumPy arrays."""

    name = "numpy"
    float64 = np.float64
    device_type = "cpu"
    chunk_elems = 1 << 16  # columns x rows per chunk of the sampling pass: stays in cache

    def __init__(self) -> None:
        self.device = None
        self._zero_rows: dict = {}  # reusable buffers of one verify call
        self._scratch64: np.ndarray | None = None
        self._ones_row: np.ndarray | None = None
        self._ones_row32: np.ndarray | None = None

    def asarray(self, x: Any, dtype: Any = None) -> np.ndarray:
        a = np.asarray(x, dtype=dtype)
        if not a.dtype.isnative:  # the checks read float bit patterns in native byte order
            a = a.astype(a.dtype.newbyteorder("="))
        return a

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
        K = passed.shape[1]
        if 0 < K <= 16 and passed.dtype == np.bool_ and passed.flags.c_contiguous:
            # Each row's bits as one integer, then a lookup of its trailing ones (a table of
            # 2^K entries): about 15x faster than a cumulative product over a short axis at
            # B = 16384.
            code = passed.view(np.uint8) @ (1 << np.arange(K, dtype=np.int64))
            return _trailing_ones(K).take(code)
        return np.cumprod(passed, axis=1, dtype=np.int64).sum(axis=1)

    def prefix_mask(self, n: np.ndarray, K: int, inclusive: bool = False) -> np.ndarray:
        """(B,) counts in [0, K] -> (B, K) bool: position < n (<= n when inclusive).

        A lookup in a (K+1, K) table: broadcasting a short inner axis costs ~25 ns per row.
        """
        return _prefix_table(K, inclusive).take(n, axis=0)

    def clamp_min0(self, x: np.ndarray) -> np.ndarray:
        return np.maximum(x, 0, out=x)

    def cumsum64(self, w: np.ndarray) -> np.ndarray:
        """Row-wise running sum, accumulated sequentially in float64."""
        return np.cumsum(w, axis=1, dtype=np.float64)

    def upcast_half(self, w: np.ndarray) -> np.ndarray:
        return w.astype(np.float32) if w.dtype == np.float16 else w

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def compute_dtype(self, x: np.ndarray) -> Any:
        """The dtype weights are computed in: float32 for half precision, else the input's."""
        return np.float32 if x.dtype == np.float16 else x.dtype

    def to_compute(self, x: np.ndarray, like: np.ndarray) -> np.ndarray:
        """A copy of x in like's dtype."""
        return x.astype(like.dtype)

    def ratio_where(self, num: np.ndarray, den: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """num / den where mask, NaN elsewhere (never divides where mask is False)."""
        out = np.full(np.broadcast_shapes(num.shape, den.shape, mask.shape), np.nan)
        return np.divide(num, den, out=out, where=mask)

    def tolist(self, x: np.ndarray) -> list:
        return np.asarray(x).tolist()

    def copy_into(self, out: np.ndarray, w: np.ndarray) -> None:
        np.copyto(out, w, casting="unsafe")

    def sub_clamp0_into(self, out: np.ndarray, w: np.ndarray, q: np.ndarray) -> np.ndarray:
        """out = max(0, w - q), computed in out's dtype (w and q converted to it first, as torch does)."""
        if w.dtype != out.dtype:
            np.copyto(out, w, casting="unsafe")
            w = out
        np.subtract(w, q.astype(out.dtype, copy=False), out=out)
        # A zeros row, not the scalar 0: NumPy's SIMD maximum loop needs a contiguous operand
        # (the scalar form runs about 5x slower). np.maximum keeps NaN, so the guard sees it.
        return np.maximum(out, self._zeros(out.shape[-1], out.dtype), out=out)

    def _zeros(self, n: int, dtype: Any) -> np.ndarray:
        z = self._zero_rows.get(dtype)
        if z is None or z.shape[0] < n:
            z = self._zero_rows[dtype] = np.zeros(n, dtype=dtype)
        return z[:n]

    def quantize_(self, w: np.ndarray, scale: float) -> np.ndarray:
        """floor(w * scale) in place (scale a power of 2: both steps are exact)."""
        np.multiply(w, scale, out=w)
        return np.floor(w, out=w)

    def quiet(self) -> Any:
        """NaN and overflow in the draw are caught by its guard, not warned about (entered once
        per draw: np.errstate costs ~4 us, per row at large V)."""
        return np.errstate(invalid="ignore", over="ignore")

    def block_sums(self, w: np.ndarray, bs: int) -> np.ndarray:
        """(R, C) integer-valued floats -> (R, ceil(C / bs)) float64 sums of blocks of bs columns."""
        R, C = w.shape
        full = C // bs * bs
        out = np.empty((R, -(-C // bs)), dtype=np.float64)
        out[:, : full // bs] = w[:, :full].reshape(R, -1, bs).sum(-1, dtype=np.float64)
        if full < C:  # the tail block of the vocabulary
            out[:, -1] = w[:, full:].sum(-1, dtype=np.float64)
        return out

    def floor64(self, x: np.ndarray) -> np.ndarray:
        return np.floor(x)

    def outside_unit_rows(self, x: np.ndarray) -> np.ndarray:
        """(R, C) -> (R,) True where some entry is not in [+0, 1] (NaN, infinite, negative, -0.0, > 1).

        One max over the bit patterns: non-negative floats are ordered like their bits, and a
        sign bit makes the unsigned pattern larger than that of 1.0. -0.0 is flagged too; the
        caller's precise check lets it through.
        """
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        if x.dtype == np.float32:
            return x.view(np.uint32).max(-1) > _ONE_BITS_32
        return x.astype(np.float64, copy=False).view(np.uint64).max(-1) > _ONE_BITS_64

    def unit_stat(self, x: np.ndarray) -> Any:
        """A cheap per-row statistic for :meth:`unit_bad` (here: the largest bit pattern)."""
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        return x.view(np.uint32 if x.dtype == np.float32 else np.uint64).max()

    def unit_bad(self, stats: list, table: np.ndarray) -> np.ndarray:
        """(R,) bool from :meth:`unit_stat` of R rows: some entry not in [+0, 1]."""
        one = _ONE_BITS_64 if table.dtype == np.float64 else _ONE_BITS_32
        return np.array(stats, dtype=np.uint64) > one

    def stack64(self, xs: list) -> np.ndarray:
        return np.array(xs, dtype=np.float64)

    def block_sums_into(self, out: np.ndarray, w: np.ndarray, bs: int) -> None:
        """(V,) integer-valued floats -> out (ceil(V / bs),) float64 block sums.

        Converted to float64 (exact), then one matrix-vector product with ones: BLAS adds the
        integers in its own order, exactly, because every partial sum stays below 2^53.
        """
        V = w.shape[0]
        full = V // bs * bs
        if w.dtype != np.float64:
            w64 = self._scratch64
            if w64 is None or w64.shape[0] < V:
                w64 = self._scratch64 = np.empty(V, dtype=np.float64)
            np.copyto(w64[:V], w)
            w = w64[:V]
        np.dot(w[:full].reshape(-1, bs), self._ones(bs), out=out[: full // bs])
        if full < V:
            out[-1] = w[full:].sum()

    def _ones(self, n: int) -> np.ndarray:
        if self._ones_row is None or self._ones_row.shape[0] != n:
            self._ones_row = np.ones(n, dtype=np.float64)
        return self._ones_row

    def sum_all(self, x: np.ndarray) -> float:
        """Sum of a 1-D row, for the row-sum check (tolerance 1e-4).

        float32 rows of 256 or more: one matrix-vector product over blocks of 256 (BLAS, about
        twice as fast as NumPy's pairwise sum; each block's float32 sum is off by at most
        256 * 2^-24 = 1.5e-5 relative), then the block sums added in float64.
        """
        if x.dtype == np.float32 and x.shape[0] >= 256 and x.strides[0] == 4:
            full = x.shape[0] // 256 * 256
            blocks = x[:full].reshape(-1, 256) @ self._ones32()
            return float(blocks.sum(dtype=np.float64) + x[full:].sum(dtype=np.float64))
        return float(x.sum(dtype=np.float32 if x.dtype == np.float16 else None))

    def _ones32(self) -> np.ndarray:
        if self._ones_row32 is None:
            self._ones_row32 = np.ones(256, dtype=np.float32)
        return self._ones_row32

    def sum_rows(self, x: np.ndarray) -> np.ndarray:
        return x.sum(-1)

    def count_le(self, cdf: np.ndarray, thr: np.ndarray) -> np.ndarray:
        """(B, V) sorted rows, (B,) thresholds -> (B,) number of entries <= threshold."""
        if cdf.shape[1] <= 32:  # a loop over few columns beats a reduction over a short axis
            out = np.zeros(cdf.shape[0], dtype=np.int64)
            for v in range(cdf.shape[1]):
                out += cdf[:, v] <= thr
            return out
        return np.count_nonzero(cdf <= thr[:, None], axis=1).astype(np.int64)

    def argmax_last(self, x: np.ndarray) -> np.ndarray:
        return np.argmax(x, axis=-1).astype(np.int64)

    def is_contiguous(self, x: np.ndarray) -> bool:
        return bool(x.flags.c_contiguous)

    def select_rows(self, table: np.ndarray, rows: np.ndarray, cols: slice) -> np.ndarray:
        return table[rows, cols]

    def take_rows(self, table: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(R, V) contiguous table, integer rows of any shape -> rows.shape + (V,) copy."""
        return table.take(rows, axis=0)

    def take_flat(self, flat: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return flat.take(idx)

    def row_sums64(self, x: np.ndarray) -> np.ndarray | np.float64:
        """(..., V) -> (...,) float64 sums; one row (V,) gives a NumPy scalar."""
        return np.sum(x, axis=-1, dtype=np.float64)

    def isfinite_all(self, x: np.ndarray | np.float64) -> bool:
        return bool(np.isfinite(x).all())

    def scalar(self, x: Any) -> float:
        return float(x)

    def nonzero(self, mask: np.ndarray) -> np.ndarray:
        return np.flatnonzero(mask)

    def uniforms(self, rng: Any, shape: tuple[int, ...]) -> np.ndarray:
        if rng is None:
            rng = np.random.default_rng()
        if isinstance(rng, TorchDraws):
            return rng.random(shape)
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

    def prefix_mask(self, n: Any, K: int, inclusive: bool = False) -> Any:
        pos = self.arange(K)
        return pos[None, :] <= n[:, None] if inclusive else pos[None, :] < n[:, None]

    def clamp_min0(self, x: Any) -> Any:
        return x.clamp_(min=0)

    def cumsum64(self, w: Any) -> Any:
        return self.torch.cumsum(w, dim=1, dtype=self.torch.float64)

    def upcast_half(self, w: Any) -> Any:
        return w.float() if w.dtype in (self.torch.float16, self.torch.bfloat16) else w

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.torch.empty(shape, dtype=dtype, device=self.device)

    def compute_dtype(self, x: Any) -> Any:
        t = self.torch
        return t.float32 if x.dtype in (t.float16, t.bfloat16) else x.dtype

    def to_compute(self, x: Any, like: Any) -> Any:
        return x.to(like.dtype, copy=True)

    def ratio_where(self, num: Any, den: Any, mask: Any) -> Any:
        return self.torch.where(mask, num / self.torch.where(mask, den, 1.0), float("nan"))

    def tolist(self, x: Any) -> list:
        return x.tolist()

    def copy_into(self, out: Any, w: Any) -> None:
        out.copy_(w)

    def sub_clamp0_into(self, out: Any, w: Any, q: Any) -> Any:
        if w.dtype != out.dtype:
            out.copy_(w)
            w = out
        self.torch.sub(w, q.to(out.dtype), out=out)
        return out.clamp_(min=0)

    def quantize_(self, w: Any, scale: float) -> Any:
        return w.mul_(scale).floor_()

    def quiet(self) -> Any:
        return contextlib.nullcontext()

    def block_sums(self, w: Any, bs: int) -> Any:
        t = self.torch
        R, C = int(w.shape[0]), int(w.shape[1])
        full = C // bs * bs
        out = t.empty((R, -(-C // bs)), dtype=t.float64, device=self.device)
        out[:, : full // bs] = w[:, :full].reshape(R, -1, bs).sum(-1, dtype=t.float64)
        if full < C:
            out[:, -1] = w[:, full:].sum(-1, dtype=t.float64)
        return out

    def floor64(self, x: Any) -> Any:
        return self.torch.floor(x)

    def outside_unit_rows(self, x: Any) -> Any:
        t = self.torch
        if x.dtype in (t.float16, t.bfloat16):
            x = x.float()
        if x.dtype == t.float32:
            lo, hi = t.aminmax(x.view(t.int32), dim=-1)
            return (lo < 0) | (hi > _ONE_BITS_32)
        lo, hi = t.aminmax(x.to(t.float64).view(t.int64), dim=-1)
        return (lo < 0) | (hi > _ONE_BITS_64)

    def unit_stat(self, x: Any) -> Any:
        t = self.torch
        if x.dtype in (t.float16, t.bfloat16):
            x = x.float()
        return t.aminmax(x.view(t.int32) if x.dtype == t.float32 else x.view(t.int64))

    def unit_bad(self, stats: list, table: Any) -> Any:
        t = self.torch
        one = _ONE_BITS_64 if table.dtype == t.float64 else _ONE_BITS_32
        lo = t.stack([s.min for s in stats])
        hi = t.stack([s.max for s in stats])
        return (lo < 0) | (hi > one)

    def stack64(self, xs: list) -> Any:
        return self.torch.stack(xs).to(self.torch.float64)

    def block_sums_into(self, out: Any, w: Any, bs: int) -> None:
        t = self.torch
        full = int(w.shape[0]) // bs * bs
        t.sum(w[:full].view(-1, bs), dim=-1, dtype=t.float64, out=out[: full // bs])
        if full < int(w.shape[0]):
            out[-1] = w[full:].sum(dtype=t.float64)

    def sum_all(self, x: Any) -> Any:
        return x.sum(dtype=self.compute_dtype(x))

    def sum_rows(self, x: Any) -> Any:
        return x.sum(-1)

    def count_le(self, cdf: Any, thr: Any) -> Any:
        # searchsorted(right=True) is "number of entries <= thr" for sorted rows.
        return self.torch.searchsorted(cdf, thr[:, None].contiguous(), right=True)[:, 0]

    def argmax_last(self, x: Any) -> Any:
        return self.torch.argmax(x, dim=-1)

    def is_contiguous(self, x: Any) -> bool:
        return bool(x.is_contiguous())

    def select_rows(self, table: Any, rows: Any, cols: slice) -> Any:
        # index_select is far cheaper than advanced indexing on torch's CPU backend.
        return self.torch.index_select(table[:, cols], 0, rows)

    def take_rows(self, table: Any, rows: Any) -> Any:
        return self.torch.index_select(table, 0, rows.reshape(-1)).reshape(*rows.shape, table.shape[1])

    def take_flat(self, flat: Any, idx: Any) -> Any:
        return self.torch.take(flat, idx)

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


class TorchDraws:
    """The uniforms of torch inputs, for the NumPy code that verifies torch CPU tensors.

    ``rng`` is what the caller passed with the tensors (a ``torch.Generator``, None for a fresh
    one, or anything else, which :meth:`TorchOps.uniforms` refuses when it is first asked to
    draw). Each :meth:`random` call draws what :meth:`TorchOps.uniforms` draws for ``shape``,
    as a NumPy float64 array.
    """

    def __init__(self, rng: Any, device: Any) -> None:
        self.rng = rng
        self.ops = TorchOps(device)

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        return self.ops.uniforms(self.rng, shape).numpy()


@functools.lru_cache(maxsize=64)
def _trailing_ones(K: int) -> np.ndarray:
    """(2^K,) int64: the number of trailing one-bits of each code (the leading run of True)."""
    code = np.arange(1 << K)
    out = np.zeros(1 << K, dtype=np.int64)
    alive = np.ones(1 << K, dtype=bool)
    for i in range(K):
        alive &= (code >> i) & 1 == 1
        out += alive
    return out


@functools.lru_cache(maxsize=64)
def _prefix_table(K: int, inclusive: bool) -> np.ndarray:
    """(K+1, K) bool: row n is position < n (<= n when inclusive)."""
    n = np.arange(K + 1)[:, None]
    pos = np.arange(K)[None, :]
    return pos <= n if inclusive else pos < n


def accepts(u: Any, q: Any, p: Any, mass: Any = None) -> Any:
    """The engine's accept comparison, its one copy: a coin u accepts a draft x iff u * q(x) < p(x),
    that is u < p(x) / q(x) without a division (times the mass M of an unnormalized target r for the
    tree: u * q(y) * M < r(y)); q(x) = 0 rejects. NumPy or torch arrays of one shape (chain:
    specviz.verifiers.verify._accept; tree: specviz.verifiers.tree), or float64 scalars in the compiled
    loop (specviz.verifiers._fused_kernel compiles this function). The reference keeps its own copy.
    """
    if mass is None:
        return (q > 0) & (u * q < p)
    return (q > 0) & (u * q * mass < p)


def _rng_error(rng: Any, expected: str) -> Exception:
    from ..errors import InputError

    return InputError("rng", expected, type(rng).__name__)


def check_dense(x: Any, name: str) -> None:
    """A torch tensor the verifier can read: strided, with data (not meta), not quantized or nested.

    The others fail deep inside (``Tensor.item() cannot be called on meta tensors``, a sparse
    layout refused by ``numpy()``); here they get an InputError naming the argument.
    """
    if not is_torch(x):
        return
    torch = sys.modules["torch"]
    if x.device.type == "meta":
        got = "a meta tensor (a shape without data)"
    elif x.layout is not torch.strided:
        got = f"layout {x.layout}"
    elif x.is_quantized:
        got = f"a quantized tensor ({x.dtype})"
    elif getattr(x, "is_nested", False):
        got = "a nested tensor"
    else:
        return
    raise InputError(name, "a dense tensor with data (strided layout, on the CPU or a GPU)", got)


def ops_for(x: Any, name: str = "target_probs") -> NumpyOps | TorchOps:
    """The adapter matching the kind (and device) of ``x`` (the argument ``name``, checked)."""
    if is_torch(x):
        check_dense(x, name)
        return TorchOps(x.device)
    return NumpyOps()
