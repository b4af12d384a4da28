"""Ranks written in another time unit: a trace whose timestamps are in ns where Kineto writes µs
(or the reverse) reads 1000× too long (or short) once loaded, and every cross-rank comparison with
it is meaningless.

The evidence is two per-rank numbers (:func:`time_facts`): the **span** (first start to last end
of timed events) and the **median duration** of complete events. A rank is flagged
(:func:`time_unit_outliers`) when *both* differ from the majority's (the lower median over the
ranks) by a factor within :data:`TIME_UNIT_RATIO` (≈ 1000×, either way) in the same direction: a
rank that merely profiled more steps has a longer span but the same event durations, and is not
flagged. Two ranks alone cannot say which one is off: both are flagged. Read by ``info`` (a note) and
``diagnose`` (rule ``time-unit-mismatch``); ``health`` reports spans and clocks on its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = ["TIME_UNIT_RATIO", "time_facts", "time_unit_outliers", "time_unit_note"]

#: The factor range (either way) that reads as "another time unit" (ns vs µs: 1000×).
TIME_UNIT_RATIO = (250.0, 4000.0)


def time_facts(trace: Trace) -> dict[str, int | None]:
    """``span_ns`` (first start to last end of timed events) and ``median_dur_ns`` (median
    duration of complete events with a duration > 0) of one rank; None when there are none
    (memoised on the trace: ``info`` and ``diagnose`` both read it)."""
    return dict(trace.memo("time_facts", lambda: _time_facts(trace)))


def _time_facts(trace: Trace) -> dict[str, int | None]:
    span = trace.span_ns
    med = (
        trace.scan()
        .filter(pl.col("dur_ns").is_not_null() & (pl.col("dur_ns") > 0) & (pl.col("kind") != "metadata"))
        .select(pl.col("dur_ns").median())
        .collect()
        .item()
    )
    return {
        "span_ns": (span[1] - span[0]) if span and span[1] > span[0] else None,
        "median_dur_ns": int(med) if med is not None else None,
    }


def _in_range(x: float | None) -> int:
    """+1 when ``x`` is ≈ 1000×, −1 when ≈ 1/1000×, else 0."""
    lo, hi = TIME_UNIT_RATIO
    if x is None or x <= 0:
        return 0
    if lo <= x <= hi:
        return 1
    if lo <= 1 / x <= hi:
        return -1
    return 0


def _ratios(facts: Mapping[int, Mapping[str, Any]], key: str) -> dict[int, float]:
    """Each rank's value over the reference: the other rank's with two ranks, else the lower
    median of every rank's value (the majority's unit)."""
    vals = {r: int(f[key]) for r, f in facts.items() if f.get(key)}
    if len(vals) < 2:
        return {}
    if len(vals) == 2:
        (a, x), (b, y) = vals.items()
        return {a: x / y, b: y / x}
    ref = statistics.median_low(vals.values())
    return {r: v / ref for r, v in vals.items()}


def time_unit_outliers(facts: Mapping[int, Mapping[str, Any]]) -> dict[int, float]:
    """``{rank: span ratio}`` for the ranks whose span and median event duration both differ from
    the other ranks' by ≈ 1000× in the same direction (module docstring). The reference is the
    majority's value (the lower median over the ranks); with two ranks, each other, so both are
    flagged."""
    spans, durs = _ratios(facts, "span_ns"), _ratios(facts, "median_dur_ns")
    out: dict[int, float] = {}
    for r, x in spans.items():
        direction = _in_range(x)
        if direction and direction == _in_range(durs.get(r)):
            out[r] = x
    return out


def time_unit_note(outliers: Mapping[int, float], facts: Mapping[int, Mapping[str, Any]]) -> str:
    """One line naming the flagged ranks, their spans and what to do."""
    spans = ", ".join(
        f"rank {r} {int(facts[r]['span_ns']) / 1e6:.3f} ms ({x:.0f}× the others')"
        if x >= 1
        else f"rank {r} {int(facts[r]['span_ns']) / 1e6:.3f} ms (1/{1 / x:.0f} of the others')"
        for r, x in sorted(outliers.items())
    )
    return (
        f"time unit: {spans}: span and event durations ~1000× apart, as when one trace's timestamps are in ns "
        "and the others' in µs (Kineto writes µs); numbers across these ranks cannot be compared"
    )
