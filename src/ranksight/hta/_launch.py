"""HTA facade methods for launches, op kernels, sequences, queue, memory bandwidth, counters,
steps, annotations, stragglers and CUPTI counters."""

from __future__ import annotations

__all__ = ["LaunchMixin"]


class LaunchMixin:
    """Filled in by the HTA-analyses work (issue 3)."""
