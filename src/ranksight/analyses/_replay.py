"""What every operator analysis shares about CUDA/HIP graph replays (``docs/graphs.md``).

The operator analyses (``ops``, ``op-kernels``, ``modules``, ``mfu``, ``op-perf``; ``diff``'s kernels by
launching op and its operators side by side) read the trace of
:func:`ranksight.views.graph_attribution.attributed_operators`: a replayed kernel matched to a capture trace
counts for the capture-side operator that launched it. This module holds the one ``capture`` option they
all declare and the notes that say how much of the replayed GPU time that attribution covers.
"""

from __future__ import annotations

from collections.abc import Iterable

from ranksight.analyses._base import Option
from ranksight.views.graph_attribution import ReplayShare

__all__ = ["CAPTURE_OPTION", "capture_option", "replay_notes"]

#: ``--capture PATH`` of every operator analysis (None: ``capture_traces/`` beside the trace; ``none``: none).
CAPTURE_OPTION = Option(
    "capture",
    str,
    None,
    "graph capture trace or folder for replayed kernels (default: capture_traces/ beside the trace; "
    "'none': no capture)",
)


def capture_option(capture: str | None) -> dict[str, str]:
    """``{"capture": capture}``, or nothing for None (the analysis' default, so that a result read without the
    option is the same cached result)."""
    return {} if capture is None else {"capture": capture}


def replay_notes(shares: Iterable[ReplayShare], counted: str = "") -> list[str]:
    """Per rank with GPU work replayed from graphs: how much of it the capture attributes to operators (share,
    match kinds, lowest confidence) and how much has no operator. ``counted`` ends the first note (what
    the analysis does with the replayed operators, e.g. that they took no host time)."""
    notes = []
    for s in shares:
        if not s.replayed_ns:
            continue
        r, total = s.rank, s.replayed_ns

        def pct(ns: int, total: int = total) -> float:
            return 100.0 * ns / total

        if s.attributed_ns:
            kinds = ", ".join(f"{m} {pct(ns):.2f} %" for m, ns in s.by_match)
            conf = "" if s.min_confidence is None else f"; lowest confidence {s.min_confidence:.2f}"
            notes.append(
                f"rank {r}: {s.attributed_ns / 1e3:,.1f} µs of GPU time replayed from CUDA/HIP graphs "
                f"({pct(s.attributed_ns):.2f} % of {total / 1e3:,.1f} µs) counted for the capture-side operators "
                f"that launched it ({kinds}{conf}; graphs: docs/graphs.md){counted}"
            )
        if s.unattributed_ns:
            notes.append(
                f"rank {r}: {s.unattributed_ns / 1e3:,.1f} µs of GPU time replayed from CUDA/HIP graphs "
                f"({pct(s.unattributed_ns):.2f} %) has no operator (no capture trace matched it: pass --capture PATH; "
                "analyze graphs names the kernels and what did not match)"
            )
    return notes
