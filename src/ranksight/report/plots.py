"""Plotly figures for the breakdown analyses (HTA facade ``visualize=True``).

plotly is an optional extra (``pip install ranksight[plot]``); it is imported inside each
function, so importing this module never needs it. Each function takes the table an analysis
(or the HTA facade) returned and returns a ``plotly.graph_objects.Figure``; nothing is shown.
"""

from __future__ import annotations

from typing import Any

__all__ = ["temporal_breakdown_figure", "idle_time_figure", "kernel_type_figure", "kernels_figure", "overlap_figure"]


def _records(df: Any) -> list[dict[str, Any]]:
    """Rows of a pandas or polars frame as dicts."""
    if hasattr(df, "to_dicts"):
        return df.to_dicts()  # type: ignore[no-any-return]
    return df.to_dict("records")  # type: ignore[no-any-return]


def temporal_breakdown_figure(df: Any) -> Any:
    """Stacked bars per rank of idle / compute / non-compute percentages (HTA's columns)."""
    import plotly.graph_objects as go

    rows = _records(df)
    ranks = [str(r["rank"]) for r in rows]
    fig = go.Figure()
    for col, label in (("idle_time_pctg", "idle"), ("compute_time_pctg", "compute"), ("non_compute_time_pctg", "non-compute")):
        fig.add_bar(name=label, x=ranks, y=[r[col] for r in rows])
    fig.update_layout(barmode="stack", title="Temporal breakdown", xaxis_title="rank", yaxis_title="% of kernel time")
    return fig


def idle_time_figure(df: Any, *, pctg: bool = True) -> Any:
    """Stacked bars per (rank, stream) of idle time by category (ratio or µs)."""
    import plotly.graph_objects as go

    rows = _records(df)
    col = "idle_time_ratio" if pctg else "idle_time"
    keys = sorted({(r["rank"], r["stream"]) for r in rows})
    fig = go.Figure()
    for cat in ("host_wait", "kernel_wait", "other"):
        val = {(r["rank"], r["stream"]): r[col] for r in rows if r["idle_category"] == cat}
        fig.add_bar(name=cat, x=[f"rank {k[0]} stream {k[1]}" for k in keys], y=[val.get(k, 0) for k in keys])
    fig.update_layout(barmode="stack", title="Idle time breakdown", yaxis_title="ratio" if pctg else "µs")
    return fig


def kernel_type_figure(df: Any) -> Any:
    """Pie of GPU time by kernel type and overlap segment."""
    import plotly.graph_objects as go

    rows = _records(df)
    return go.Figure(go.Pie(labels=[r["kernel_type"] for r in rows], values=[r["sum"] for r in rows], title="Kernel type breakdown"))


def kernels_figure(df: Any) -> Any:
    """Grouped bars of each kernel's total time per rank."""
    import plotly.graph_objects as go

    rows = _records(df)
    fig = go.Figure()
    for rank in sorted({r["rank"] for r in rows}):
        sub = [r for r in rows if r["rank"] == rank]
        fig.add_bar(name=f"rank {rank}", x=[r["name"][:60] for r in sub], y=[r["sum (us)"] for r in sub])
    fig.update_layout(barmode="group", title="Kernel time per rank", yaxis_title="µs")
    return fig


def overlap_figure(df: Any) -> Any:
    """Bars per rank of the share of communication overlapped by computation."""
    import plotly.graph_objects as go

    rows = _records(df)
    fig = go.Figure(go.Bar(x=[str(r["rank"]) for r in rows], y=[r["comp_comm_overlap_pctg"] for r in rows]))
    fig.update_layout(title="Communication overlapped by computation", xaxis_title="rank", yaxis_title="%")
    return fig
