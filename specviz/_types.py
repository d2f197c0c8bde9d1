"""The package's one array type, at the bottom layer: every module imports ``Array`` from here."""

from __future__ import annotations

from typing import Any, TypeAlias

# numpy.ndarray or torch.Tensor. A verifier's outputs match the kind and device of its inputs, so
# one signature takes either; Any until a union of the two checks cleanly through the NumPy and
# torch code paths (their methods differ: .sum(axis=) vs .sum(dim=)).
Array: TypeAlias = Any
