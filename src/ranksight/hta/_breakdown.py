"""HTA facade methods for the breakdown analyses (temporal, idle, kernels, overlap, ...)."""

from __future__ import annotations

__all__ = ["BreakdownMixin"]


class BreakdownMixin:
    """Filled in by the HTA-analyses work (issue 3)."""
