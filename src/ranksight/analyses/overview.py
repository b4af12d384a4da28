"""Step-time breakdown per rank and ProfilerStep (the TensorBoard plugin's overview).

Steps are the plugin's device-extended steps (:mod:`ranksight.views.tb_steps`): a deliberate
variant of ranksight's one step window (``temporal --per-step``, ``docs/metrics.md``), so
``total_us`` is the plugin's step time, not the summary's ``step_ms``. Every event is
given one role; each role's intervals are merged (union); then, in priority order, each role
takes the part of the steps' union that no earlier role took:

1. **Kernel**: kernels that are not communication;
2. **Memcpy**, 3. **Memset**: GPU copies and fills;
4. **Communication**: communication kernels (``kernel_class == "COMMUNICATION"``: NCCL/RCCL names,
   custom collective kernels, collective args on the kernel), kernels launched by a collective
   host op (their own or their launch's ``External id`` is that op's), and the host spans of the
   collective ops: the plugin's ten names (``nccl:all_reduce`` ...), any ``nccl:``/``gloo:``/
   ``ucc:``/``mpi:`` name, ``c10d::*``, ``_c10d_functional::*``, ``record_param_comms`` and
   host events carrying collective args;
5. **Runtime**: ``cuda_runtime`` and ``cuda_driver`` events (HIP/MTIA/XPU runtimes included);
6. **DataLoader**: ``enumerate(DataLoader)#….__next__`` / ``enumerate(DataPipe)#…`` spans;
7. **CPU Exec**: the other ``cpu_op`` and ``user_annotation`` spans and old ``python`` events
   (not ``python_function``, not ProfilerSteps, not ``gpu_user_annotation``);
8. **Other**: the rest of the step.

Per step each role is the length of its part inside ``[step start, step end]``; the eight sum to
``total_us = end − start``. The ``average`` table gives the plain mean over the kept steps and
its share of the mean step (``round(100 × mean / mean total, 2)`` in the plugin).

``plugin_compat=True`` recognises communication only from the plugin's ten op names (kernels by
``External id``) and counts only ``cuda_runtime`` events as Runtime and as step launches, which is
the plugin's definition; see ``docs/overview.md`` for where the two differ and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.model.derive import STEP_RE
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.views.event_source import CannotStack, EventSource
from ranksight.views.intervals import intersect, subtract, union
from ranksight.views.rank_slices import RankSlices
from ranksight.views.tb_op_tree import _DATALOADER_RE, COLLECTIVE_OP_NAMES
from ranksight.views.tb_steps import plugin_steps, seed_plugin_steps

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["ROLES", "COMM_HOST_RE", "role_intervals", "step_breakdown", "covered_in_windows", "overview"]

#: Roles in priority order (column ``<role>_us``).
ROLES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec")
COLUMNS = ["rank", "step", *(f"{r}_us" for r in ROLES), "other_us", "total_us"]
LABELS = {
    "kernel": "Kernel",
    "memcpy": "Memcpy",
    "memset": "Memset",
    "communication": "Communication",
    "runtime": "Runtime",
    "dataloader": "DataLoader",
    "cpu_exec": "CPU Exec",
    "other": "Other",
}

#: Host ops that are collectives (beyond the plugin's ten names).
COMM_HOST_RE = r"^(?:nccl|gloo|ucc|mpi|rccl|hccl|xccl):|^c10d::|^_?c10d_functional::|^record_param_comms$"

Intervals = tuple[np.ndarray, np.ndarray]


def _iv(df: pl.DataFrame) -> Intervals:
    return union(df["ts_ns"].to_numpy(), df["end_ns"].to_numpy())


def _row_key(by: list[str], col: str = "row") -> pl.Expr:
    """A row's key among every rank's rows: the row (one rank) or rank × 2³² + row (stacked)."""
    key = pl.col(col).cast(pl.Int64)
    return pl.col("rank").cast(pl.Int64) * (1 << 32) + key if by else key


def _comm_host(src: EventSource, plugin_compat: bool) -> pl.DataFrame:
    """Host events of collectives (``*by, row, external_id, ts_ns, end_ns``): by name, and
    (ranksight's definition) by communication-like name or collective args."""
    named = pl.col("name").is_in(list(COLLECTIVE_OP_NAMES))
    if plugin_compat:
        cond = named
    else:
        coll_rows = src.table("collective").select(_row_key(src.by)).to_series()
        cond = (
            named | pl.col("name").is_in(src.names_matching(COMM_HOST_RE)) | _row_key(src.by).is_in(coll_rows.implode())
        )
    return (
        src.ev.filter(pl.col("kind").is_in(["cpu_op", "user_annotation"]) & pl.col("dur_ns").is_not_null() & cond)
        .select(*src.by, "row", "external_id", "ts_ns", "end_ns")
        .collect()
    )


def _role_frames(src: EventSource, plugin_compat: bool) -> dict[str, pl.DataFrame]:
    """The events of each role (before priorities): ``*by, ts_ns, end_ns``. Each role is one lazy
    query over the events that copies only the columns it reads of the rows it keeps."""
    by = src.by
    timed = src.ev.filter(pl.col("dur_ns").is_not_null())
    comm_host = _comm_host(src, plugin_compat)
    comm_ids = comm_host.select(*by, "external_id").drop_nulls().unique().with_columns(pl.lit(True).alias("_cid"))
    kernels = timed.filter(pl.col("kind") == "kernel").select(
        *by, "ts_ns", "end_ns", "external_id", "launch_row", "kernel_class"
    )
    kernels = kernels.join(comm_ids.lazy(), on=[*by, "external_id"], how="left", maintain_order="left")
    by_id = pl.col("_cid").fill_null(False)
    if plugin_compat:
        is_comm = by_id
    else:
        launch_ids = timed.filter(pl.col("kind").is_in(list(LAUNCH_KINDS))).select(
            *by, pl.col("row").alias("launch_row"), pl.col("external_id").alias("_lext")
        )
        kernels = kernels.join(launch_ids, on=[*by, "launch_row"], how="left", maintain_order="left")
        lext = comm_ids.lazy().rename({"external_id": "_lext", "_cid": "_lcid"})
        kernels = kernels.join(lext, on=[*by, "_lext"], how="left", maintain_order="left")
        is_comm = (
            by_id | pl.col("_lcid").fill_null(False) | (pl.col("kernel_class") == "COMMUNICATION").fill_null(False)
        )
    kernel_iv = kernels.select(*by, "ts_ns", "end_ns", is_comm.alias("_comm")).collect()
    host = timed.filter(
        pl.col("kind").is_in(["cpu_op", "user_annotation"])
        | pl.col("cat").is_in(src.names_matching("(?i)^python$", "cat"))
    )
    is_step = pl.col("name").is_in(src.names_matching(STEP_RE.pattern))
    is_dl = pl.col("name").is_in(src.names_matching(_DATALOADER_RE)) & pl.col("kind").is_in(
        ["cpu_op", "user_annotation"]
    )
    comm_rows = comm_host.select(_row_key(by)).to_series().implode()
    runtime_kinds = ["cuda_runtime"] if plugin_compat else list(LAUNCH_KINDS)
    cols = [*by, "ts_ns", "end_ns"]
    lazy = {
        "memcpy": timed.filter(pl.col("kind") == "memcpy"),
        "memset": timed.filter(pl.col("kind") == "memset"),
        "runtime": timed.filter(pl.col("kind").is_in(runtime_kinds)),
        "dataloader": host.filter(is_dl),
        "cpu_exec": host.filter(~is_step & ~is_dl & ~_row_key(by).is_in(comm_rows)),
    }
    got = dict(zip(lazy, pl.collect_all([lf.select(cols) for lf in lazy.values()]), strict=True))
    return {
        "kernel": kernel_iv.filter(~pl.col("_comm")).select(cols),
        "memcpy": got["memcpy"],
        "memset": got["memset"],
        "communication": pl.concat([kernel_iv.filter(pl.col("_comm")).select(cols), comm_host.select(cols)]),
        "runtime": got["runtime"],
        "dataloader": got["dataloader"],
        "cpu_exec": got["cpu_exec"],
    }


def role_intervals(trace: Trace, *, plugin_compat: bool = False) -> dict[str, Intervals]:
    """The merged intervals of each role (before priorities) of one rank, in ns."""
    return {role: _iv(df) for role, df in _role_frames(EventSource.one(trace), plugin_compat).items()}


def covered_in_windows(iv: Intervals, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Length of disjoint sorted intervals ``iv`` inside each window ``[ws, we)`` (int64 ns)."""
    s, e = iv
    if s.size == 0:
        return np.zeros(ws.size, np.int64)
    cum = np.concatenate([[0], np.cumsum(e - s)])

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(s, x, side="right")
        over = np.where(i > 0, np.maximum(e[np.maximum(i - 1, 0)] - x, 0), 0)
        return cum[i] - over

    return upto(we) - upto(ws)


def step_breakdown(trace: Trace, *, plugin_compat: bool = False) -> pl.DataFrame:
    """Per step of one rank: ns spent in each role (priority rules, module doc)."""
    return _breakdowns(EventSource.one(trace), plugin_compat)


def _breakdowns(src: EventSource, plugin_compat: bool) -> pl.DataFrame:
    """Per rank (in the order of ``src.traces``) and step: ns spent in each role (priority rules,
    module doc). Stacked ranks run in lanes (:meth:`EventSource.lanes`): one pass of the interval
    arithmetic over every rank, each rank's windows and intervals apart from the others'."""
    kinds = ("cuda_runtime",) if plugin_compat else LAUNCH_KINDS
    if src.by:
        seed_plugin_steps(src, launch_kinds=kinds)
    steps = [plugin_steps(t, launch_kinds=kinds).select("step", "start_ns", "end_ns") for t in src.traces]
    if sum(st.height for st in steps) == 0:
        return pl.DataFrame(schema={c: (pl.Int32 if c in ("rank", "step") else pl.Int64) for c in COLUMNS}).rename(
            {c: c.replace("_us", "_ns") for c in COLUMNS if c.endswith("_us")}
        )
    lanes = src.lanes()
    shifts = dict(zip(lanes["rank"].to_list(), lanes["shift"].to_list(), strict=True))
    rank = np.concatenate([np.full(st.height, t.rank, np.int32) for t, st in zip(src.traces, steps, strict=True)])
    shift = np.concatenate(
        [np.full(st.height, shifts[t.rank], np.int64) for t, st in zip(src.traces, steps, strict=True)]
    )
    ws = np.concatenate([st["start_ns"].to_numpy() for st in steps]).astype(np.int64)
    we = np.concatenate([st["end_ns"].to_numpy() for st in steps]).astype(np.int64)
    out: dict[str, object] = {
        "rank": pl.Series(rank, dtype=pl.Int32),
        "step": pl.concat([st["step"] for st in steps]),
        "total_ns": we - ws,
    }
    ws, we = ws + shift, we + shift
    slots = union(ws, we)
    for role, df in _role_frames(src, plugin_compat).items():
        if src.by:
            df = df.join(lanes, on="rank", how="inner").select(
                pl.col("ts_ns") + pl.col("shift"), pl.col("end_ns") + pl.col("shift")
            )
        cost = intersect(slots, _iv(df))
        slots = subtract(slots, cost)
        out[f"{role}_ns"] = covered_in_windows(cost, ws, we)
    out["other_ns"] = covered_in_windows(slots, ws, we)
    return pl.DataFrame(out).select("rank", "step", *(f"{r}_ns" for r in ROLES), "other_ns", "total_ns")


def _to_us(df: pl.DataFrame) -> pl.DataFrame:
    return df.select(
        "rank",
        pl.col("step").cast(pl.Int32),
        *((pl.col(c) / 1e3).alias(c.replace("_ns", "_us")) for c in df.columns if c.endswith("_ns")),
    )


def _average(steps_us: pl.DataFrame) -> pl.DataFrame:
    parts = [*ROLES, "other"]
    rows = []
    per = RankSlices(steps_us)  # each rank's rows without a query per rank
    for rank in steps_us["rank"].unique(maintain_order=True).to_list():
        s = per[rank]
        total = float(s["total_us"].mean())  # type: ignore[arg-type]
        rows.append({"rank": rank, "category": "Step", "steps": s.height, "time_us": total, "pct": 100.0})
        for p in parts:
            m = float(s[f"{p}_us"].mean())  # type: ignore[arg-type]
            rows.append(
                {
                    "rank": rank,
                    "category": LABELS[p],
                    "steps": s.height,
                    "time_us": m,
                    "pct": round(100 * m / total, 2) if total else None,
                }
            )
    return pl.DataFrame(
        rows,
        schema={"rank": pl.Int32, "category": pl.String, "steps": pl.Int64, "time_us": pl.Float64, "pct": pl.Float64},
    )


def _rank_overview(trace: Trace, plugin_compat: bool) -> tuple[pl.DataFrame, bool, bool]:
    """One rank's breakdown (µs), and whether it has ProfilerSteps and GPU work."""
    has_gpu = trace.kind(*GPU_KINDS, columns=["row"]).height > 0
    return _to_us(step_breakdown(trace, plugin_compat=plugin_compat)), trace.steps.height > 0, has_gpu


def _overviews_stacked(sess: Session, plugin_compat: bool) -> dict[int, tuple[pl.DataFrame, bool, bool]] | None:
    """:func:`_rank_overview` of every rank in one pass over the stacked events (many small ranks
    held here, issue 19); None when the ranks are not stacked (the caller maps over them)."""
    stacked = sess.stacked_events()
    if stacked is None:
        return None
    traces = [sess.trace(r) for r in sess.ranks]
    src = EventSource.stacked(traces, stacked)
    try:
        parts = RankSlices(_to_us(_breakdowns(src, plugin_compat)))
    except CannotStack:
        return None
    gpu = src.ev.filter(pl.col("kind").is_in(list(GPU_KINDS))).select(pl.col("rank").unique()).collect()
    with_gpu = set(gpu["rank"].to_list())
    return {t.rank: (parts[t.rank], t.steps.height > 0, t.rank in with_gpu) for t in traces}


def overview(run: Run, *, ranks: Sequence[int] | None = None, plugin_compat: bool = False) -> AnalysisResult:
    """Step-time breakdown per rank and step, and its mean per rank."""
    sess = Session.of(run, ranks)
    rs = sess.ranks
    out = _overviews_stacked(sess, plugin_compat) or sess.map(_rank_overview, plugin_compat=plugin_compat)
    per = [out[r][0] for r in rs]
    steps = pl.concat(per, how="vertical_relaxed") if per else pl.DataFrame()
    steps = (
        steps.select(COLUMNS)
        if steps.height
        else pl.DataFrame(schema={c: (pl.Int32 if c in ("rank", "step") else pl.Float64) for c in COLUMNS})
    )
    notes = []
    for r in rs:
        _, has_steps, has_gpu = out[r]
        if not has_steps:
            notes.append(f"rank {r}: no ProfilerStep; step 0 spans the whole trace (first to last host op)")
        if not has_gpu:
            notes.append(f"rank {r}: no GPU work (CPU-only trace): Kernel/Memcpy/Memset/Runtime are 0")
    return AnalysisResult({"steps": steps, "average": _average(steps) if steps.height else pl.DataFrame()}, notes)


register(
    AnalysisSpec(
        name="overview",
        func=overview,
        help="step time split into Kernel, Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec, Other "
        "(TensorBoard plugin overview)",
        options=(
            Option(
                "plugin_compat",
                str,
                False,
                "use the plugin's own definitions (ten collective names, cuda_runtime only)",
                flag=True,
            ),
        ),
    )
)
