"""CPU and launches: launch statistics, queue length, memcpy bandwidth, operators, annotations."""

# no ``from __future__ import annotations`` here: this module defines a function named ``annotations``

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, Skip, section

US = {
    c: "µs"
    for c in (
        "cpu_total_us",
        "cpu_mean_us",
        "cpu_max_us",
        "delay_mean_us",
        "delay_max_us",
        "delay_p50_us",
        "delay_p99_us",
        "gpu_total_us",
        "delay_total_us",
        "busy_us",
        "span_us",
        "host_self_us",
        "host_total_us",
        "device_self_us",
        "device_total_us",
        "sum_us",
        "max_us",
        "min_us",
        "std_us",
        "mean_us",
        "avg_aten_op_launch_delay",
        "avg_runtime_delay",
    )
}


@section(
    "launches",
    "Kernel launches",
    needs=("launches",),
    group="CPU and launches",
    order=10,
    help="Per launch: CPU time of the launch call, GPU time of what it launched, and the launch delay "
    "(launch start to GPU start). Short kernels and outliers are counted per rank.",
)
def launches(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("launches", "summary")
    blocks: list[dict[str, Any]] = []
    la = tabs.get("launches")
    if la is not None and la.height:
        groups = {}
        for col, label in (("cpu_dur_us", "launch call CPU time"), ("launch_delay_us", "launch delay")):
            if col in la.columns:
                v = la[col].drop_nulls().to_numpy()
                v = v[v > 0]
                if v.size:
                    groups[label] = v
        if groups:
            blocks.append(
                ctx.hist(
                    groups,
                    id="launches-hist",
                    title="Launch CPU time and launch delay, all ranks",
                    x_label="time",
                    unit="µs",
                )
            )
    blocks.append(ctx.table(tabs["summary"], id="launches-summary", title="Per rank", units=US))
    for name, title in (("findings", "Short kernels and outliers"), ("by_api", "By launch API")):
        if name in tabs and tabs[name].height:
            blocks.append(ctx.table(tabs[name], id=f"launches-{name}", title=title, units=US))
    if la is not None and la.height:
        cols = [
            c
            for c in (
                "rank",
                "api",
                "kernel",
                "stream",
                "cpu_dur_us",
                "gpu_dur_us",
                "launch_delay_us",
                "runtime_outlier",
                "launch_delay_outlier",
            )
            if c in la.columns
        ]
        worst = (
            la.select(cols).sort("launch_delay_us", descending=True, nulls_last=True).head(500)
            if "launch_delay_us" in cols
            else la.select(cols).head(500)
        )
        blocks.append(
            ctx.table(
                worst,
                id="launches-worst",
                title="Largest launch delays (top 500)",
                units={"cpu_dur_us": "µs", "gpu_dur_us": "µs", "launch_delay_us": "µs"},
            )
        )
    return blocks


@section(
    "queue",
    "Queue length over time",
    needs=("queue",),
    group="CPU and launches",
    order=20,
    help="Launches waiting on each GPU stream (launched, not yet finished) over time; time-weighted "
    "statistics per stream. The chart shows the stream with the longest queue.",
)
def queue(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("queue", "summary")
    blocks: list[dict[str, Any]] = []
    s = tabs.get("series")
    if s is not None and s.height:
        top = tabs["summary"].sort(["max", "rank", "stream"], descending=[True, False, False]).head(1)
        r = top["rank"][0]
        ranks_streams = (
            tabs["summary"].filter(pl.col("rank") == r).sort("max", descending=True).head(4)["stream"].to_list()
        )
        t0 = s.filter(pl.col("rank") == r)["ts_ns"].min()
        lines: list[tuple[str, list[Any], list[Any]]] = []
        for stream in ranks_streams:
            ss = s.filter((pl.col("rank") == r) & (pl.col("stream") == stream)).sort("ts_ns")
            lines.append(
                (f"rank {r} stream {stream}", ((ss["ts_ns"] - t0) / 1e6).to_list(), ss["queue_length"].to_list())
            )
        blocks.append(
            ctx.line(
                lines,
                id="queue-chart",
                title=f"Queue length, rank {r} (streams with the longest queues)",
                mode="step",
                x_label="time since rank start",
                x_unit="ms",
                y_label="queued launches",
            )
        )
    blocks.append(ctx.table(tabs["summary"], id="queue-summary", title="Per rank and stream", units={"span_us": "µs"}))
    if "blocked" in tabs and tabs["blocked"].height:
        blocks.append(
            ctx.table(
                tabs["blocked"],
                id="queue-blocked",
                title="Time at the maximum queue length",
                units={"duration_at_max_queue_length_us": "µs"},
            )
        )
    return blocks


@section(
    "memcpy-bw",
    "Memory copy bandwidth",
    needs=("memcpy-bw",),
    group="CPU and launches",
    order=30,
    help="Bandwidth of each memcpy/memset (bytes / duration) over time, and per copy kind and stream; "
    "tw_mean_gbps = bytes / busy time.",
)
def memcpy_bw(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("memcpy-bw", "summary")
    blocks: list[dict[str, Any]] = []
    c = tabs.get("copies")
    if c is not None and c.height and "bw_gbps" in c.columns:
        t0 = c["ts_ns"].min()
        lines: list[tuple[str, list[Any], list[Any]]] = []
        for (r, kind), g in sorted(c.group_by(["rank", "copy_kind"]), key=lambda kv: (kv[0][0], str(kv[0][1]))):
            if len(lines) >= 12:
                break
            g = g.sort("ts_ns")
            lines.append((f"rank {r} {kind}", ((g["ts_ns"] - t0) / 1e6).to_list(), g["bw_gbps"].to_list()))
        blocks.append(
            ctx.line(
                lines,
                id="memcpy-bw-chart",
                title="Bandwidth of each copy over time",
                mode="markers",
                x_label="time since first copy",
                x_unit="ms",
                y_label="bandwidth",
                y_unit="GB/s",
            )
        )
    blocks.append(
        ctx.table(
            tabs["summary"],
            id="memcpy-bw-summary",
            title="Per rank and copy kind",
            units={"busy_us": "µs", "bytes": "B"},
        )
    )
    if "per_stream" in tabs and tabs["per_stream"].height:
        blocks.append(
            ctx.table(
                tabs["per_stream"], id="memcpy-bw-streams", title="Per stream", units={"busy_us": "µs", "bytes": "B"}
            )
        )
    return blocks


@section(
    "ops",
    "Operators",
    needs=("ops",),
    group="CPU and launches",
    order=40,
    help="Operator view (TensorBoard plugin): calls, host and device self/total time, Tensor Core share. "
    "Sort, filter and search the table.",
)
def ops(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("ops", "ops")["ops"]
    return [ctx.table(t, id="ops-table", title="Operators", units=US, sort=("device_self_us", True))]


@section(
    "op-kernels",
    "Operator → kernel sequences",
    needs=("op-kernels",),
    group="CPU and launches",
    order=50,
    help="For each aten op, the kernels it launches (in order), how often, and the mean op→launch and "
    "launch→kernel delays.",
)
def op_kernels(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("op-kernels", "op_kernels")["op_kernels"]
    return [ctx.table(t, id="op-kernels-table", title="Op → kernels", units=US, sort=("occurrence_count", True))]


@section(
    "annotations",
    "User annotations",
    needs=("annotations",),
    group="CPU and launches",
    order=60,
    help="Time per record_function / NVTX-style annotation on the CPU and GPU side (count, sum, max, min, std, mean).",
)
def annotations(ctx: Ctx) -> list[dict[str, Any]]:
    t = ctx.tables("annotations", "annotations")["annotations"]
    t = t.filter(~pl.col("name").str.starts_with("ProfilerStep#")) if "name" in t.columns else t
    if t.height == 0:
        raise Skip("only ProfilerStep annotations in these traces")
    top = t.group_by("name").agg(pl.col("sum_us").sum()).sort(["sum_us", "name"], descending=[True, False]).head(15)
    chart = ctx.bar(
        top["name"].to_list(),
        {"time": (top["sum_us"] / 1e3).to_list()},
        id="annotations-chart",
        title="Annotations with the most time (all ranks, CPU and GPU side)",
        horizontal=True,
        unit="ms",
        x_label="ms",
    )
    return [
        chart,
        ctx.table(t, id="annotations-table", title="Per rank and annotation", units=US, sort=("sum_us", True)),
    ]
