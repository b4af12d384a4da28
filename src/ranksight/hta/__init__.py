"""HTA-compatible facade: switch from Holistic Trace Analysis by changing one import.

>>> from ranksight.hta import TraceAnalysis      # was: from hta.trace_analysis import TraceAnalysis
>>> analyzer = TraceAnalysis(trace_dir="traces/")  # doctest: +SKIP
>>> analyzer.get_temporal_breakdown()              # doctest: +SKIP

Method names, arguments, return shapes and column names follow HTA v0.6. The numbers are
ranksight's (see ``docs/hta-differences.md`` for where and why they differ). HTA's defaults are
kept, including dropping the last ProfilerStep unless ``include_last_profiler_step=True``.
``visualize=True`` (HTA's default) draws the plotly figure when plotly is installed and does
nothing else otherwise.
"""

from __future__ import annotations

from ranksight.hta._base import TraceAnalysisBase
from ranksight.hta._breakdown import BreakdownMixin
from ranksight.hta._critical import CriticalPath, CriticalPathMixin
from ranksight.hta._diff import DeviceType, LabeledTrace, TraceDiff
from ranksight.hta._launch import LaunchMixin, TimeSeriesTypes
from ranksight.hta._trace import FacadeTrace, TraceMixin

__all__ = [
    "TraceAnalysis",
    "TraceDiff",
    "TimeSeriesTypes",
    "LabeledTrace",
    "DeviceType",
    "CriticalPath",
    "FacadeTrace",
]


class TraceAnalysis(BreakdownMixin, LaunchMixin, CriticalPathMixin, TraceMixin, TraceAnalysisBase):
    """HTA's ``TraceAnalysis`` on ranksight's loader and analyses."""
