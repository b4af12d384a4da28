"""Distributed: collectives, clock alignment, stragglers, bandwidth and the α-β fit, exposed
communication, pipeline bubble, all-to-all."""

from __future__ import annotations

from typing import Any

import polars as pl

from ranksight.report.html.sections import Ctx, Skip, rank_labels, section

US = {
    c: "µs"
    for c in (
        "start_us",
        "dur_us",
        "wait_us",
        "transfer_us",
        "launch_us",
        "first_start_us",
        "skew_us",
        "total_wait_us",
        "offset_us",
        "residual_us",
        "spread_us",
        "max_abs_offset_us",
        "wait_caused_us",
        "own_wait_us",
        "mean_lateness_us",
        "late_launch_us",
        "after_launch_us",
        "lateness_us",
        "carried_us",
        "segment_us",
        "max_skew_us",
        "mean_skew_us",
        "total_transfer_us",
        "median_transfer_us",
        "min_dur_us",
        "max_dur_us",
        "alpha_us",
        "median_abs_residual_us",
        "ring_step_latency_us",
        "predicted_us",
        "step_us",
        "compute_us",
        "comm_us",
        "hidden_us",
        "exposed_us",
        "exposed_wait_us",
        "exposed_transfer_us",
        "perfect_overlap_step_us",
        "bubble_us",
        "in_p2p_us",
        "outside_p2p_us",
    )
}


#: Ranks per axis of the all-to-all heatmap at most (beyond, ranks are merged into equal ranges
#: and a cell sums the bytes between two ranges).
MAX_PAIR_AXIS = 128


def _pair_matrix(tot: pl.DataFrame, ranks: list[Any]) -> tuple[list[str], list[str], list[list[Any]]]:
    """Bytes (MiB) from source to destination rank; ranges of ranks beyond ``MAX_PAIR_AXIS``."""
    if len(ranks) <= MAX_PAIR_AXIS:
        m = {(a, b): v for a, b, v in tot.iter_rows()}
        values = [[(m[(a, b)] / 2**20 if (a, b) in m else None) for b in ranks] for a in ranks]
        return rank_labels(ranks), [str(r) for r in ranks], values
    pos = {r: i for i, r in enumerate(ranks)}
    per = -(-len(ranks) // MAX_PAIR_AXIS)  # ranks per range
    groups = [ranks[i : i + per] for i in range(0, len(ranks), per)]
    idx = pl.DataFrame({"r": ranks, "g": [pos[r] // per for r in ranks]}, schema={"r": tot["src"].dtype, "g": pl.Int64})
    agg = (
        tot.join(idx.rename({"r": "src", "g": "gs"}), on="src")
        .join(idx.rename({"r": "dst", "g": "gd"}), on="dst")
        .group_by("gs", "gd")
        .agg(pl.col("bytes").sum())
    )
    merged: list[list[Any]] = [[None] * len(groups) for _ in groups]
    for a, b, v in agg.iter_rows():
        merged[a][b] = v / 2**20
    names = [f"{g[0]}–{g[-1]}" for g in groups]
    return [f"ranks {n}" for n in names], names, merged


def _tables(ctx: Ctx, name: str, *titles: tuple[str, str]) -> list[dict[str, Any]]:
    tabs = ctx.result(name).tables
    return [
        ctx.table(tabs[t], id=f"{name}-{t}", title=title, units=US)
        for t, title in titles
        if t in tabs and tabs[t].height
    ]


@section(
    "collectives",
    "Collectives",
    needs=("collectives",),
    group="Distributed",
    order=10,
    help="Every collective on every rank, matched across ranks; wait = last rank's start − own start, "
    "transfer = end − last start (after clock alignment).",
)
def collectives(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("collectives", "collectives")
    c = tabs["collectives"]
    per = (
        c.group_by("rank")
        .agg(pl.col("wait_us").sum().alias("wait"), pl.col("transfer_us").sum().alias("transfer"))
        .sort("rank")
    )
    charts = ctx.rank_bar(
        per["rank"].to_list(),
        {"transfer": (per["transfer"] / 1e3).to_list(), "wait": (per["wait"] / 1e3).to_list()},
        id="collectives-chart",
        title="Time in collectives per rank: waiting for the last rank vs transferring",
        unit="ms",
        y_label="ms",
    )
    return [
        *charts,
        *_tables(
            ctx,
            "collectives",
            ("instances", "Instances (matched across ranks)"),
            ("collectives", "Per rank"),
            ("rules", "How types and sizes were found"),
        ),
    ]


@section(
    "alignment",
    "Clock alignment",
    needs=("alignment",),
    group="Distributed",
    order=20,
    help="Per-rank clock offsets estimated from matched collective end times (robust median); "
    "aligned time = time − offset.",
)
def alignment(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("alignment", "offsets")
    o = tabs["offsets"].sort("rank")
    charts = ctx.rank_bar(
        o["rank"].to_list(),
        {"offset": o["offset_us"].to_list()},
        id="alignment-chart",
        title="Clock offset per rank",
        unit="µs",
        y_label="µs",
    )
    return [*charts, *_tables(ctx, "alignment", ("summary", "Summary"), ("offsets", "Offsets"))]


@section(
    "stragglers",
    "Stragglers",
    needs=("stragglers",),
    group="Distributed",
    order=30,
    help="Ranks that arrive last at collectives, the wait they cause the others, and why (late host "
    "launch, longer compute before, slow transfer). The heatmap shows each rank's wait per step.",
)
def stragglers(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("stragglers", "ranks")
    blocks: list[dict[str, Any]] = []
    w = tabs.get("wait_by_step")
    if w is not None and w.height:
        w = w.sort("rank")
        cols = [c for c in w.columns if c != "rank"]
        values = w.select(cols).to_numpy().astype(float) / 1e3
        blocks.append(
            ctx.heatmap(
                rank_labels(w["rank"].to_list()),
                [c.replace("step_", "step ") for c in cols],
                values.tolist(),
                id="stragglers-heatmap",
                title="Wait in collectives, rank × step",
                unit="ms",
                x_label="step",
                y_label="rank",
                row_ranks=w["rank"].to_list() if ctx.many else None,
            )
        )
    r = tabs["ranks"].sort("rank")
    blocks += ctx.rank_bar(
        r["rank"].to_list(),
        {"wait caused": (r["wait_caused_us"] / 1e3).to_list()},
        id="stragglers-chart",
        title="Wait each rank caused the others by arriving last",
        unit="ms",
        y_label="ms",
    )
    blocks += _tables(
        ctx, "stragglers", ("ranks", "Per rank"), ("instances", "Late collectives"), ("steps", "Per step")
    )
    return blocks


@section(
    "bandwidth",
    "Collective bandwidth",
    needs=("bandwidth",),
    group="Distributed",
    order=40,
    help="Per collective: algbw = bytes / transfer time and busbw = algbw × the nccl-tests factor "
    "(all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n).",
)
def bandwidth(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("bandwidth", "instances")
    inst = tabs["instances"].filter(
        pl.col("bytes").is_not_null() & pl.col("busbw_gbps").is_not_null() & (pl.col("bytes") > 0)
    )
    blocks: list[dict[str, Any]] = []
    if inst.height:
        lines = [
            (str(t), g.sort("bytes")["bytes"].to_list(), g.sort("bytes")["busbw_gbps"].to_list())
            for (t,), g in sorted(inst.group_by(["coll_type"]), key=lambda kv: str(kv[0][0]))
        ]
        blocks.append(
            ctx.line(
                lines,
                id="bandwidth-chart",
                title="Bus bandwidth by message size",
                mode="markers",
                x_label="message size",
                x_unit="B",
                y_label="busbw",
                y_unit="GB/s",
            )
        )
    blocks += _tables(ctx, "bandwidth", ("by_type_size_group", "By type, size and group"), ("instances", "Instances"))
    if not blocks:
        raise Skip("no collective with a size and a transfer time")
    return blocks


@section(
    "alpha-beta",
    "Alpha-beta fit",
    needs=("alpha-beta",),
    group="Distributed",
    order=50,
    help="Transfer time modelled as T = α + bytes / β per collective type and group size "
    "(robust Theil–Sen fit), with R² and residuals; dots are measured, lines the fit.",
)
def alpha_beta(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("alpha-beta", "fits")
    blocks: list[dict[str, Any]] = []
    res = tabs.get("residuals")
    if res is not None and res.height:
        lines = []
        for (t, n), g in sorted(
            res.group_by(["coll_type", "group_size"]), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)
        ):
            g = g.sort("bytes")
            lines.append((f"{t} n={n} measured", g["bytes"].to_list(), g["transfer_us"].to_list()))
            lines.append((f"{t} n={n} fit", g["bytes"].to_list(), g["predicted_us"].to_list()))
        blocks.append(
            ctx.line(
                lines,
                id="alpha-beta-chart",
                title="Transfer time vs message size",
                mode="markers",
                x_label="message size",
                x_unit="B",
                y_label="transfer",
                y_unit="µs",
            )
        )
    blocks += _tables(ctx, "alpha-beta", ("fits", "Fits"), ("residuals", "Residuals"))
    return blocks


@section(
    "exposed-comm",
    "Exposed communication",
    needs=("exposed-comm",),
    group="Distributed",
    order=60,
    help="Per rank and step window (the ProfilerStep extended to the GPU work it launched): communication "
    "not hidden under compute (split into waiting and transferring), overlap efficiency (hidden / "
    "communication: the summary's overlap_efficiency), and the step time with perfect overlap. The "
    "Communication / computation overlap section gives the same quantities over the GPU span.",
)
def exposed_comm(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("exposed-comm", "per_rank")
    r = tabs["per_rank"].sort("rank")
    charts = ctx.rank_bar(
        r["rank"].to_list(),
        {
            "hidden": ((r["comm_us"] - r["exposed_us"]) / 1e3).to_list(),
            "exposed wait": (r["exposed_wait_us"] / 1e3).to_list(),
            "exposed transfer": ((r["exposed_us"] - r["exposed_wait_us"]) / 1e3).to_list(),
        },
        id="exposed-comm-chart",
        title="Communication per rank, over the step windows: hidden vs exposed",
        unit="ms",
        y_label="ms",
    )
    return [
        *charts,
        *_tables(
            ctx,
            "exposed-comm",
            ("per_rank", "Per rank, summed over the step windows"),
            ("per_step", "Per rank and step window"),
        ),
    ]


@section(
    "late-start",
    "Late starters (HTA heuristic)",
    needs=("late-start",),
    group="Distributed",
    order=70,
    help="HTA's straggler heuristic: ranks that start the dominant communication kernel last in most steps.",
)
def late_start(ctx: Ctx) -> list[dict[str, Any]]:
    ctx.tables("late-start", "stragglers")
    return _tables(ctx, "late-start", ("stragglers", "Per rank"), ("metric", "Normalized start per step"))


@section(
    "bubble",
    "Pipeline bubble",
    needs=("bubble",),
    group="Distributed",
    order=80,
    help="Pipeline-parallel bubble per stage and step from send/recv: time a stage waits with no "
    "compute, against the (p−1)/(m+p−1) expectation.",
)
def bubble(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("bubble", "per_stage_step")
    p = tabs["per_stage_step"]
    blocks = []
    if "bubble_fraction" in p.columns:
        agg = p.group_by("rank").agg((pl.col("bubble_fraction").mean() * 100).alias("pct")).sort("rank")
        blocks += ctx.rank_bar(
            agg["rank"].to_list(),
            {"bubble": agg["pct"].to_list()},
            id="bubble-chart",
            title="Mean bubble fraction per stage (rank)",
            unit="%",
            y_label="%",
        )
    return blocks + _tables(ctx, "bubble", ("per_step", "Per step"), ("per_stage_step", "Per stage and step"))


@section(
    "all-to-all",
    "All-to-all imbalance",
    needs=("all-to-all",),
    group="Distributed",
    order=90,
    help="All-to-all(v) exchanges: bytes each rank sent and received, bytes between every pair of ranks "
    "(when split sizes are recorded), and the imbalance per instance (max / mean over ranks; 1 = even).",
)
def all_to_all(ctx: Ctx) -> list[dict[str, Any]]:
    tabs = ctx.tables("all-to-all", "per_rank")
    blocks: list[dict[str, Any]] = []
    pairs = next((df for name, df in tabs.items() if {"src", "dst", "bytes"} <= set(df.columns) and df.height), None)
    if pairs is not None:
        tot = pairs.group_by("src", "dst").agg(pl.col("bytes").sum())
        ranks = sorted(set(tot["src"].to_list()) | set(tot["dst"].to_list()))
        rows, cols, values = _pair_matrix(tot, ranks)
        blocks.append(
            ctx.heatmap(
                rows,
                cols,
                values,
                id="all-to-all-heatmap",
                title="Bytes sent, source rank × destination rank (all instances)",
                unit="MiB",
                x_label="destination rank",
                y_label="source rank",
            )
        )
    pr = tabs["per_rank"].group_by("rank").agg(pl.col("send_bytes").sum(), pl.col("recv_bytes").sum()).sort("rank")
    blocks += ctx.rank_bar(
        pr["rank"].to_list(),
        {"sent": (pr["send_bytes"] / 2**20).to_list(), "received": (pr["recv_bytes"] / 2**20).to_list()},
        id="all-to-all-chart",
        title="All-to-all bytes per rank",
        stacked=False,
        unit="MiB",
        y_label="MiB",
    )
    blocks += [
        ctx.table(df, id=f"all-to-all-{name}", title=name.replace("_", " "), units=US)
        for name, df in tabs.items()
        if df.height
    ]
    return blocks
