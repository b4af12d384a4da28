"""Plotly figures for the breakdown analyses (HTA facade ``visualize=True``).

plotly is an optional extra (``pip install ranksight[plot]``); it is imported inside each
function, so importing this module never needs it. Each function takes the table an analysis
(or the HTA facade) returned and returns a ``plotly.graph_objects.Figure``; nothing is shown.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "temporal_breakdown_figure",
    "idle_time_figure",
    "kernel_type_figure",
    "kernels_figure",
    "overlap_figure",
    "launch_stats_figures",
    "aten_op_table_figure",
    "frequent_patterns_figure",
    "stragglers_figure",
    "user_annotation_figure",
    "diff_bars_figure",
    "memory_curve_figure",
    "memcpy_bandwidth_figure",
    "wait_heatmap_figure",
]


def _records(df: Any) -> list[dict[str, Any]]:
    """Rows of a pandas or polars frame as dicts."""
    if hasattr(df, "to_dicts"):
        return df.to_dicts()
    return df.to_dict("records")


def temporal_breakdown_figure(df: Any) -> Any:
    """Stacked bars per rank of idle / compute / non-compute percentages (HTA's columns)."""
    import plotly.graph_objects as go

    rows = _records(df)
    ranks = [str(r["rank"]) for r in rows]
    fig = go.Figure()
    for col, label in (
        ("idle_time_pctg", "idle"),
        ("compute_time_pctg", "compute"),
        ("non_compute_time_pctg", "non-compute"),
    ):
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
    return go.Figure(
        go.Pie(labels=[r["kernel_type"] for r in rows], values=[r["sum"] for r in rows], title="Kernel type breakdown")
    )


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


# ---- launches, op kernels, sequences, queue, bandwidth, stragglers, annotations (issue 3) ----


def launch_stats_figures(rank: int, df: Any, runtime_cutoff: float = 50, launch_delay_cutoff: float = 100) -> list[Any]:
    """HTA's three launch histograms: short kernels, runtime outliers, launch-delay outliers."""
    import plotly.graph_objects as go

    rows = _records(df)
    short = [
        r["cpu_duration"] for r in rows if r["cpu_duration"] <= runtime_cutoff and r["gpu_duration"] < r["cpu_duration"]
    ]
    slow = [r["cpu_duration"] for r in rows if r["cpu_duration"] > runtime_cutoff]
    late = [
        r["launch_delay"] for r in rows if r["launch_delay"] is not None and r["launch_delay"] > launch_delay_cutoff
    ]
    figs = []
    for values, title, axis in (
        (short, f"Short GPU kernels (gpu duration < cpu duration) on rank {rank}", "launch call duration (us)"),
        (slow, f"Launch call duration outliers (> {runtime_cutoff} us) on rank {rank}", "launch call duration (us)"),
        (late, f"Launch delay outliers (> {launch_delay_cutoff} us) on rank {rank}", "launch delay (us)"),
    ):
        fig = go.Figure(go.Histogram(x=values))
        fig.update_layout(title=title, xaxis_title=axis, yaxis_title="launches")
        figs.append(fig)
    return figs


def aten_op_table_figure(rank: int, df: Any) -> Any:
    """HTA's table of aten ops, kernel sequences, counts and delays."""
    import plotly.graph_objects as go

    rows = _records(df)
    cols = ["aten_op_name", "kernel_sequence", "occurrence_count", "avg_aten_op_launch_delay", "avg_runtime_delay"]
    fig = go.Figure(
        go.Table(
            header={
                "values": [
                    "ATen op",
                    "Kernel sequence",
                    "Occurrences",
                    "Avg ATen op launch delay (us)",
                    "Avg runtime delay (us)",
                ]
            },
            cells={"values": [[r[c] for r in rows] for c in cols], "align": "left"},
        )
    )
    fig.update_layout(title=f"ATen ops, their kernels, ATen and runtime delays on rank {rank}")
    return fig


def frequent_patterns_figure(df: Any, rank: int = 0, top_k: int = 5) -> Any:
    """Bars of the top kernel-sequence patterns by count."""
    import plotly.graph_objects as go

    rows = _records(df)[:top_k]
    fig = go.Figure(
        go.Bar(
            x=[str(i) for i in range(len(rows))],
            y=[r["count"] for r in rows],
            hovertext=[r["pattern"].replace("|", "<br>") for r in rows],
        )
    )
    fig.update_layout(
        title=f"Top {len(rows)} frequent patterns on rank {rank}", xaxis_title="pattern", yaxis_title="count"
    )
    return fig


def stragglers_figure(metric: Any) -> Any:
    """Normalized start of the candidate communication kernel per rank and step."""
    import plotly.graph_objects as go

    rows = _records(metric)
    fig = go.Figure()
    for step in sorted({r["step"] for r in rows}):
        pts = [r for r in rows if r["step"] == step]
        fig.add_bar(name=f"step {step}", x=[str(p["rank"]) for p in pts], y=[p["normalized_start"] for p in pts])
    fig.update_layout(
        title="Start of the dominant communication kernel (later = potential straggler)",
        xaxis_title="rank",
        yaxis_title="start / mean step time",
    )
    return fig


def user_annotation_figure(df: Any) -> Any:
    """Pie per rank of the time per user annotation (HTA's ``sum (us)`` column)."""
    import plotly.graph_objects as go

    rows = _records(df)
    fig = go.Figure()
    for rank in sorted({r["rank"] for r in rows}):
        pts = [r for r in rows if r["rank"] == rank]
        fig.add_pie(labels=[p["name"] for p in pts], values=[p["sum (us)"] for p in pts], title=f"rank {rank}")
    fig.update_layout(title="Time per user annotation")
    return fig


def diff_bars_figure(df: Any, what: str, diff_col: str, title: str) -> Any:
    """Grouped horizontal bars of both sides' ``*_{what}`` columns for the rows whose ``diff_col``
    is not 0 (TraceDiff's counts / duration views); ``None`` when nothing changed. ``df`` is the
    pandas frame of ``TraceDiff.compare_traces`` (index = op name)."""
    import plotly.graph_objects as go

    cols = [c for c in df.columns if c.endswith(f"_{what}")][:2]
    changed = df[df[diff_col] != 0].sort_values(diff_col)
    if changed.empty:
        return None
    fig = go.Figure(
        [
            go.Bar(name=c[: -len(what) - 1], y=[str(i) for i in changed.index], x=changed[c], orientation="h")
            for c in cols
        ]
    )
    fig.update_layout(barmode="group", title=title, height=max(400, 18 * len(changed)), yaxis={"automargin": True})
    return fig


def memory_curve_figure(curve: Any) -> Any:
    """Allocated and reserved memory (MiB) over time per rank and device, from the ``curve`` table
    of the ``memory`` analysis (``rank, device, time_ms, allocated_bytes, reserved_bytes``)."""
    import plotly.graph_objects as go

    rows = _records(curve)
    fig = go.Figure()
    for key in sorted({(r["rank"], str(r["device"])) for r in rows}):
        pts = sorted((r for r in rows if (r["rank"], str(r["device"])) == key), key=lambda r: r["time_ms"])
        x = [p["time_ms"] for p in pts]
        fig.add_scatter(
            x=x,
            y=[p["allocated_bytes"] / 2**20 for p in pts],
            line_shape="hv",
            name=f"rank {key[0]} {key[1]} allocated",
        )
        if any(p.get("reserved_bytes") is not None for p in pts):
            fig.add_scatter(
                x=x,
                y=[(p["reserved_bytes"] or 0) / 2**20 for p in pts],
                line_shape="hv",
                line={"dash": "dot"},
                name=f"rank {key[0]} {key[1]} reserved",
            )
    fig.update_layout(title="Device memory", xaxis_title="time (ms)", yaxis_title="MiB")
    return fig


def memcpy_bandwidth_figure(copies: Any) -> Any:
    """Bandwidth (GB/s) of each copy over time per rank and copy kind, from the ``copies`` table of
    ``memcpy-bw`` (``rank, copy_kind, ts_ns, bw_gbps``)."""
    import plotly.graph_objects as go

    rows = _records(copies)
    t0 = min((r["ts_ns"] for r in rows), default=0)
    fig = go.Figure()
    for key in sorted({(r["rank"], str(r["copy_kind"])) for r in rows}):
        pts = [r for r in rows if (r["rank"], str(r["copy_kind"])) == key]
        fig.add_scatter(
            x=[(p["ts_ns"] - t0) / 1e6 for p in pts],
            y=[p["bw_gbps"] for p in pts],
            mode="markers",
            name=f"rank {key[0]} {key[1]}",
        )
    fig.update_layout(title="Memory copy bandwidth", xaxis_title="time (ms)", yaxis_title="GB/s")
    return fig


def wait_heatmap_figure(wait_by_step: Any) -> Any:
    """Rank × step heatmap of collective wait (ms), from the ``wait_by_step`` table of
    ``stragglers`` (``rank, step_<N>...`` in µs)."""
    import plotly.graph_objects as go

    rows = sorted(_records(wait_by_step), key=lambda r: r["rank"])
    steps = [c for c in (rows[0] if rows else {}) if c != "rank"]
    z = [[(r[c] / 1e3 if r[c] is not None else None) for c in steps] for r in rows]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=[c.replace("step_", "step ") for c in steps],
            y=[f"rank {r['rank']}" for r in rows],
            colorscale="YlOrRd",
            colorbar={"title": "ms"},
        )
    )
    fig.update_layout(title="Wait in collectives, rank × step", xaxis_title="step", yaxis_title="rank")
    return fig
