"""HTA's ``TraceDiff`` (placeholder until the compare-runs work, issue 9)."""

from __future__ import annotations

__all__ = ["TraceDiff"]


class TraceDiff:
    """HTA v0.6's TraceDiff: ``compare_traces``, ``ops_diff``, ``visualize_counts_diff``,
    ``visualize_duration_diff`` (filled in by issue 9)."""
