"""The diagnose rules. Each is ``rule_<id>(ctx) -> list[Finding]``; thresholds are module
constants, documented with their source in ``docs/diagnose.md``.

Shares are of the **mean step time** of the ``overview`` analysis (device-extended ProfilerSteps)
unless a rule says otherwise; GPU rules skip ranks without GPU work.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses.diagnose import Applies, Context, Finding, one_pass
from ranksight.analyses.stragglers import NAMED_SHARE_MAX
from ranksight.model.kinds import LAUNCH_KINDS
from ranksight.model.taxonomy import LOW_PRECISIONS, MATRIX_FAMILIES
from ranksight.views.comm_extract import COLLECTIVE_OP_RE
from ranksight.views.event_source import CannotStack, EventSource
from ranksight.views.idle_gaps import HOST_SYNC_API_RE
from ranksight.views.intervals import union_length, with_outermost
from ranksight.views.kernel_taxonomy import kernel_taxonomy_table
from ranksight.views.rank_slices import RankSlices, rank_column

if TYPE_CHECKING:
    from ranksight.model.meta import TraceMeta
    from ranksight.model.trace import Trace

__all__ = ["RULES"]

# thresholds (0–1 shares unless named otherwise)
DATALOADER_SHARE = 0.05  # TB plugin rule 1
LOW_UTILIZATION_PCT = 50.0  # TB plugin rule 5
TINY_KERNEL_US = 10.0
HOST_WAIT_SHARE = 0.5  # of the GPU's idle time in steps
HOST_WAIT_CAUSES = ("cpu_op", "launch_latency")
LAUNCH_BOUND_UTIL_PCT = 70.0
LAUNCH_BOUND_MIN_KERNELS = 100
EXPOSED_COMM_SHARE = 0.10  # TB plugin rule 4 (on communication share)
SYNC_BLOCKED_SHARE = 0.01
PAGEABLE_MIN_BYTES = 1 << 20
TC_ELIGIBLE_SHARE = 0.20
TC_NO_SHARE = 0.5  # half of the matrix-kernel time known not to use Tensor Cores
MEMORY_NEAR_CAPACITY_PCT = 90.0  # TB plugin rule 7
FRAGMENTATION_AT_PEAK = 0.25
FRAGMENTATION_MIN_UNUSED_BYTES = 1 << 30
QUEUE_BLOCKED_SHARE = 0.01
IMBALANCE = 0.10
STRAGGLER_MIN_SHARE = 0.01  # wait caused / summed step time of all ranks
MEMCPY_BUSY_SHARE = 0.50
MEMCPY_WINDOW_SHARE = 0.25
ALLOC_SYNC_SHARE = 0.01
UNFUSED_SOFTMAX_SHARE = 0.10

SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
SYNC_API_RE = re.compile(HOST_SYNC_API_RE)
#: Runtime calls that show an ``aten::item`` around them read a GPU value (copy, then wait).
HOST_WAIT_API_RE = re.compile(SYNC_API_RE.pattern + r"|^(cuda|hip)Memcpy\w*$|^cuMemcpy\w*$")
DTOH_RE = re.compile(r"DtoH|Device -> (Pageable|Pinned)")
#: Host↔device copies by their Kineto / Nsight name.
HOST_COPY_RE = re.compile(r"HtoD|DtoH|Pageable|Pinned|Host")
#: Allocator calls that synchronise the device.
ALLOC_API_RE = re.compile(r"^(cuda|hip)(Free|Malloc|FreeHost|HostFree)$|^cu(MemFree|MemAlloc)(_v2)?$")


def _sev(x: float, high: float, medium: float) -> str:
    return "high" if x >= high else "medium" if x >= medium else "low"


def _r(x: float, n: int = 2) -> float:
    return round(float(x), n)


def _words(v: object, missing: str = "unknown") -> str:
    """A value for a sentence: never ``None``."""
    return missing if v is None or (isinstance(v, float) and v != v) else str(v)


def _step_busy(ctx: Context) -> pl.DataFrame | None:
    """Per rank: ``window_us`` (summed step windows), ``busy_us`` (GPU work of any kind — kernels,
    copies, sets — inside them) and ``busy_pct``: read from ``temporal``'s ``over_steps`` table, the
    one implementation of GPU busy over the step windows (``busy_pct_of_steps``; ``summary``'s busy
    is the same definition over the GPU span; docs/metrics.md)."""
    tp = ctx.result("temporal", per_step=True)
    if tp is None or "over_steps" not in tp.tables or tp["over_steps"].height == 0:
        return None
    return tp["over_steps"].select(
        "rank",
        pl.col("step_time_us").alias("window_us"),
        pl.col("busy_us_in_steps").alias("busy_us"),
        "steps",
        pl.col("busy_pct_of_steps").alias("busy_pct"),
    )


def _mean_steps(ctx: Context) -> pl.DataFrame | None:
    ov = ctx.result("overview")
    return None if ov is None or ov["steps"].height == 0 else ov["steps"]


# ---- 1. DataLoader -----------------------------------------------------------------------------


def _loader_names(trace: Trace) -> list[str]:
    ev = trace.kind("cpu_op", "user_annotation")
    n = ev["name"].cast(pl.String)
    return (
        n.filter(n.str.starts_with("enumerate(DataLoader)") | n.str.starts_with("enumerate(DataPipe)"))
        .unique()
        .sort()
        .to_list()
    )


def rule_dataloader_bound(ctx: Context) -> list[Finding]:
    """Mean DataLoader time / mean step time > 5 % (the TB plugin's rule, on ``overview``)."""
    st = _mean_steps(ctx)
    if st is None:
        return []
    per = (
        st.group_by("rank")
        .agg(pl.col("dataloader_us").mean().alias("dl"), pl.col("total_us").mean().alias("tot"))
        .with_columns((pl.col("dl") / pl.col("tot")).alias("share"))
        .filter(pl.col("share") > DATALOADER_SHARE)
        .sort("share", descending=True)
    )
    if per.height == 0:
        return []
    worst = int(per["rank"][0])
    share = float(per["share"][0])
    steps = st.filter(pl.col("rank") == worst).with_columns((pl.col("dataloader_us") / pl.col("total_us")).alias("s"))
    ws = steps.sort("s", descending=True).row(0, named=True)
    names = ctx.on_rank(_loader_names, worst)
    single = any("_SingleProcessDataLoaderIter" in n for n in names)
    return [
        Finding(
            rule="dataloader-bound",
            title="Steps wait for the DataLoader",
            severity=_sev(share, 0.25, 0.10),
            impact=_r(share, 4),
            ranks=sorted(int(r) for r in per["rank"]),
            summary=f"{100 * share:.1f}% of the step time is in DataLoader (rank {worst}, mean "
            f"{float(per['dl'][0]) / 1e3:.1f} ms of {float(per['tot'][0]) / 1e3:.1f} ms per step)"
            + ("; single-process loading (num_workers=0)" if single else ""),
            evidence={
                "dataloader_share_by_rank": {str(r): _r(100 * s) for r, s in per.select("rank", "share").iter_rows()},
                "dataloader_share_by_step_pct": {str(s): _r(100 * v) for s, v in steps.select("step", "s").iter_rows()},
                "mean_dataloader_us": _r(float(per["dl"][0])),
                "mean_step_us": _r(float(per["tot"][0])),
                "worst_step": int(ws["step"]),
                "worst_step_dataloader_us": _r(ws["dataloader_us"]),
                "iterators": names,
                "threshold_pct": 100 * DATALOADER_SHARE,
                "definition": "overview: DataLoader role / step time",
            },
            fixes=[
                "DataLoader(num_workers=N) with N > 0 (start with the number of CPU cores per GPU)"
                if single
                else "raise DataLoader num_workers",
                "pin_memory=True and tensor.to(device, non_blocking=True)",
                "persistent_workers=True (no worker restart per epoch) and a larger prefetch_factor",
                "move decoding/augmentation off the critical path (pre-process offline, GPU augmentation)",
            ],
        )
    ]


# ---- 2./3. GPU utilization and launch-bound ---------------------------------------------------


def _kernel_stats(trace: Trace) -> dict[str, float]:
    k = trace.kind("kernel").filter(pl.col("dur_ns").is_not_null() & pl.col("step").is_not_null())
    if k.height == 0:
        return {}
    d = k["dur_ns"].to_numpy() / 1e3
    steps = max(int(k["step"].n_unique()), 1)
    return {
        "kernels_per_step": k.height / steps,
        "median_kernel_us": float(np.median(d)),
        "tiny_share": float((d < TINY_KERNEL_US).mean()),
    }


def _launch_facts(trace: Trace, n: int = 3) -> tuple[int, float, list[str]]:
    """Kernels in steps, µs of launch calls (with GPU work) in steps, the ``n`` most frequent tiny kernels."""
    nk = trace.kind("kernel").filter(pl.col("step").is_not_null()).height
    launch_us = (
        float(
            trace.kind(*LAUNCH_KINDS).filter((pl.col("gpu_count") > 0) & pl.col("step").is_not_null())["dur_ns"].sum()
        )
        / 1e3
    )
    k = trace.kind("kernel").filter(pl.col("dur_ns") < TINY_KERNEL_US * 1e3)
    return nk, launch_us, k["name"].cast(pl.String).value_counts(sort=True).head(n)["name"].to_list()


def _host_wait(ctx: Context) -> dict[int, tuple[float, float]]:
    """Per rank: (idle µs inside steps, the part of it that is host wait — ``idle-causes``
    causes ``cpu_op`` and ``launch_latency``: the next GPU work was not yet launched, or was being
    launched)."""
    ic = ctx.result("idle-causes")
    if ic is None or "by_step" not in ic.tables or ic["by_step"].height == 0:
        return {}
    t = (
        ic["by_step"]
        .group_by("rank")
        .agg(
            pl.col("idle_us").sum().alias("idle"),
            pl.col("idle_us").filter(pl.col("cause").is_in(list(HOST_WAIT_CAUSES))).sum().alias("host"),
        )
    )
    return {int(r): (float(i), float(h or 0.0)) for r, i, h in t.iter_rows()}


def _host_share(idle_host_us: tuple[float, float]) -> bool:
    """Whether host wait is at least :data:`HOST_WAIT_SHARE` of the idle time (idle time > 0)."""
    idle_us, host_us = idle_host_us
    return idle_us > 0 and host_us / idle_us >= HOST_WAIT_SHARE


def rule_launch_bound(ctx: Context) -> list[Finding]:
    """Host-bound steps: GPU busy (``temporal`` per step) < 70 % of the step windows minus the
    DataLoader time (idle spent loading data is the DataLoader rule's), ≥ 100 kernels in steps, and
    ≥ 50 % of the GPU's idle time in steps is host wait (``idle-causes``: ``cpu_op`` — the launching
    thread busy in an op — and ``launch_latency``), not a median kernel length: a compiled model
    whose kernels are long can still leave the GPU waiting on Python between them. CUDA graphs are
    suggested only when the rank does not already replay graphs (``run-context``)."""
    busy, st = _step_busy(ctx), _mean_steps(ctx)
    if busy is None:
        return []
    host = _host_wait(ctx)
    dl = (
        st.group_by("rank").agg(pl.col("dataloader_us").sum())
        if st is not None
        else pl.DataFrame({"rank": [], "dataloader_us": []})
    )
    out = []
    waiting = [int(r) for r in busy["rank"].to_list() if _host_share(host.get(int(r), (0.0, 0.0)))]
    ctx.per_rank(_kernel_stats, waiting)  # one map for the ranks the loop asks about
    ctx.per_rank(_launch_facts, waiting)
    dl_by = {int(r): v for r, v in dl.select("rank", "dataloader_us").iter_rows()}  # one row per rank
    for row in busy.iter_rows(named=True):
        r = int(row["rank"])
        idle_us, host_us = host.get(r, (0.0, 0.0))
        if idle_us <= 0 or host_us / idle_us < HOST_WAIT_SHARE:
            continue
        ks = ctx.on_rank(_kernel_stats, r)
        if not ks:
            continue
        wait_dl = float(dl_by.get(r) or 0.0)
        util = 100.0 * row["busy_us"] / max(row["window_us"] - wait_dl, 1e-9)  # idle loading data is not launch
        if util >= LAUNCH_BOUND_UTIL_PCT:
            continue
        nk, launch_us, top_tiny = ctx.on_rank(_launch_facts, r)
        if nk < LAUNCH_BOUND_MIN_KERNELS:
            continue
        host_share = host_us / float(row["window_us"])
        graphs = ctx.replays_graphs(r)
        out.append(
            Finding(
                rule="launch-bound",
                title="Host-bound: the GPU waits for the CPU to launch work",
                severity=_sev(host_share, 0.5, 0.25),
                impact=_r(host_share, 4),
                ranks=[r],
                summary=f"rank {r}: GPU busy {util:.1f}% of the steps outside DataLoader time; "
                f"{100 * host_us / idle_us:.0f}% of its idle time ({host_us / 1e3:.1f} ms) is host wait (CPU ops and "
                f"launch calls before the next kernel); median kernel {ks['median_kernel_us']:.1f} µs",
                evidence={
                    "busy_pct_outside_dataloader": _r(util),
                    "busy_pct_of_steps": _r(row["busy_pct"]),
                    "host_wait_us": _r(host_us),
                    "idle_us_in_steps": _r(idle_us),
                    "host_wait_share_of_idle_pct": _r(100 * host_us / idle_us),
                    "kernels_per_step": _r(ks["kernels_per_step"], 1),
                    "median_kernel_us": _r(ks["median_kernel_us"]),
                    "tiny_kernel_share_pct": _r(100 * ks["tiny_share"]),
                    "launch_call_us_in_steps": _r(launch_us),
                    "top_tiny_kernels": top_tiny,
                    "replays_graphs": graphs,
                },
                fixes=(
                    [
                        "the rank already replays CUDA/HIP graphs: capture more of the step (the eager parts "
                        "between replays), or cut the host work between replays",
                        "fuse small ops with torch.compile",
                    ]
                    if graphs
                    else [
                        "capture the step in CUDA graphs (torch.cuda.graphs / torch.compile(mode='reduce-overhead'))",
                        "fuse small ops with torch.compile",
                    ]
                )
                + [
                    "raise the batch size so each kernel does more work",
                    "use fused optimizers (foreach=True / fused=True)"
                    if ctx.mode(r) != "inference"
                    else "keep per-token host work (sampling, stopping checks) on the GPU",
                    "ranksight analyze idle-causes names the ops the launching thread runs while the GPU waits",
                ],
            )
        )
    return out


def rule_low_gpu_utilization(ctx: Context) -> list[Finding]:
    """GPU busy (``temporal`` per step: GPU work of any kind — kernels, copies, sets — over the step
    windows) < 50 % (TB plugin rule 5, on ranksight's one definition of busy: the number ``summary``
    and the report show, over steps instead of the GPU span). Not on capture traces (nothing ran);
    the fixes follow the run's mode (``run-context``)."""
    busy = _step_busy(ctx)
    if busy is None:
        return []
    low = busy.filter(pl.col("busy_pct") < LOW_UTILIZATION_PCT).sort("busy_pct")
    out = []
    for row in low.iter_rows(named=True):
        r = int(row["rank"])
        if not ctx.has_gpu(r):
            continue
        util = float(row["busy_pct"])
        inference = ctx.mode(r) == "inference"
        out.append(
            Finding(
                rule="low-gpu-utilization",
                title="GPU idle for much of the step",
                severity=_sev(1 - util / 100, 0.75, 0.6),
                impact=_r(1 - util / 100, 4),
                ranks=[r],
                summary=f"rank {r}: GPU busy {util:.1f}% of the step windows (kernels, copies and sets; "
                f"threshold {LOW_UTILIZATION_PCT:g}%)",
                evidence={
                    "busy_pct_of_steps": _r(util),
                    "window_us": _r(row["window_us"]),
                    "busy_us_in_steps": _r(row["busy_us"]),
                    "steps": int(row["steps"]),
                    "definition": "temporal per step: union of GPU work inside the step windows / window",
                },
                fixes=(
                    [
                        "look at the other findings and `ranksight analyze idle-causes` for what the GPU waits on "
                        "(host work, synchronisation, data, other ranks)",
                        "serving: batch more requests per step (max_num_seqs / max batch size) if latency allows",
                        "overlap host work with GPU work (asynchronous scheduling, CUDA graphs for decode steps)",
                    ]
                    if inference
                    else [
                        "look at the other findings and `ranksight analyze idle-causes` for what the GPU waits on "
                        "(data loading, synchronisation, launches, communication)",
                        "raise the batch size (or micro-batch) to give the GPU more work per step",
                        "overlap host work with GPU work (non_blocking copies, prefetching the next batch)",
                    ]
                ),
            )
        )
    return out


# ---- 4. exposed communication -----------------------------------------------------------------


def _own_wait(ctx: Context) -> dict[int, float]:
    """µs of each rank's exposed communication spent waiting for later ranks (``exposed-comm``:
    exposed_wait_us, the one implementation: the rank's waiting intervals in its matched collectives
    that no compute hides; a wait hidden under compute is not subtracted from the exposed time)."""
    if len(ctx.ranks) < 2:
        return {}
    ex = ctx.result("exposed-comm")
    if ex is None or "per_rank" not in ex.tables or ex["per_rank"].height == 0:
        return {}
    return {int(r): float(w or 0.0) for r, w in ex["per_rank"].select("rank", "exposed_wait_us").iter_rows()}


def rule_exposed_communication(ctx: Context) -> list[Finding]:
    """Communication not hidden by computation (``overlap``: exposed_comm_us), **less the part of it
    the rank spent waiting for later ranks** (``exposed-comm``: exposed_wait_us; that part is the
    straggler rule's, and overlap tuning cannot hide it), > 10 % of the GPU span (``temporal``:
    kernel_time_us)."""
    ov, tp = ctx.result("overlap"), ctx.result("temporal", per_step=True)
    if ov is None or tp is None or ov["overlap"].height == 0:
        return []
    waits = _own_wait(ctx)
    j = (
        ov["overlap"]
        .join(tp["temporal"].select("rank", "kernel_time_us"), on="rank")
        .with_columns(pl.col("rank").replace_strict(waits, default=0.0, return_dtype=pl.Float64).alias("waiting_us"))
        .with_columns((pl.col("exposed_comm_us") - pl.col("waiting_us")).clip(lower_bound=0).alias("own_exposed_us"))
        .with_columns((pl.col("own_exposed_us") / pl.col("kernel_time_us")).alias("share"))
        .filter(pl.col("share") >= EXPOSED_COMM_SHARE)
        .sort("share", descending=True)
    )
    if j.height == 0:
        return []
    w = j.row(0, named=True)
    share = float(w["share"])
    top = ctx.on_rank(_top_comm_kernels, int(w["rank"]))
    return [
        Finding(
            rule="exposed-communication",
            title="Communication not overlapped with compute",
            severity=_sev(share, 0.3, 0.15),
            impact=_r(share, 4),
            ranks=sorted(int(r) for r in j["rank"]),
            summary=f"{100 * share:.1f}% of the GPU time is communication with no compute under it, not counting "
            f"waits for later ranks (rank {w['rank']}: {w['own_exposed_us'] / 1e3:.1f} ms of "
            f"{w['exposed_comm_us'] / 1e3:.1f} ms exposed; {w['waiting_us'] / 1e3:.1f} ms waiting for other ranks)",
            evidence={
                "own_exposed_us": _r(w["own_exposed_us"]),
                "waiting_for_other_ranks_us": _r(w["waiting_us"]),
                "exposed_share_pct_by_rank": {str(r): _r(100 * s) for r, s in j.select("rank", "share").iter_rows()},
                "exposed_comm_us": _r(w["exposed_comm_us"]),
                "comm_us": _r(w["comm_us"]),
                "overlap_pct": _r(w["comp_comm_overlap_pctg"] or 0),
                "top_comm_kernels_us": {n: _r(u) for n, u in top.iter_rows()},
            },
            fixes=[
                "DDP: tune bucket_cap_mb, gradient_as_bucket_view=True, static_graph=True so all-reduces start during "
                "backward",
                "FSDP: backward_prefetch=BACKWARD_PRE, forward_prefetch=True, limit_all_gathers; FSDP2: "
                "reshard_after_forward",
                "accumulate gradients over micro-batches with no_sync() to all-reduce less often",
                "check the interconnect (NCCL_DEBUG=INFO: algorithm, transport) if transfers themselves are slow",
            ],
        )
    ]


# ---- 5. host-device synchronisation -----------------------------------------------------------


def _top_comm_kernels(trace: Trace) -> pl.DataFrame:
    comm = trace.kind("kernel").filter(pl.col("kernel_class") == "COMMUNICATION")
    return (
        comm.group_by(pl.col("name").cast(pl.String))
        .agg((pl.col("dur_ns").sum() / 1e3).alias("us"))
        .sort("us", descending=True)
        .head(3)
    )


def _syncs(trace: Trace) -> pl.DataFrame:
    """Synchronising events inside steps: sync API calls, and ``aten::item`` /
    ``_local_scalar_dense`` on a GPU value, i.e. with a copy or sync API call running inside it on
    the same thread (``.item()`` on a CPU tensor, such as an optimizer's step counter, waits for
    nothing). ``outer`` marks the events no other kept event on the thread encloses."""
    return _syncs_of(EventSource.one(trace))


@one_pass(_syncs)
def _syncs_many(src: EventSource) -> dict[int, pl.DataFrame]:
    parts = RankSlices(_syncs_of(src), drop=True)
    return {t.rank: parts[t.rank] for t in src.traces}


def _syncs_of(src: EventSource) -> pl.DataFrame:
    """:func:`_syncs` of one rank or of stacked ranks (``*by`` first; threads keyed by rank)."""
    by = src.by
    n = pl.col("name").cast(pl.String)
    ev = (
        src.ev.filter(
            pl.col("step").is_not_null()
            & pl.col("dur_ns").is_not_null()
            & (
                ((pl.col("kind") == "cpu_op") & n.is_in(list(SYNC_OPS)))
                | (pl.col("kind").is_in(list(LAUNCH_KINDS)) & n.str.contains(HOST_WAIT_API_RE.pattern))
            )
        )
        .select(*by, "row", "tid", "ts_ns", "end_ns", "dur_ns", "step", n.alias("name"))
        .sort("ts_ns", maintain_order=True)
        .collect()
    )
    api = ev.filter(~pl.col("name").is_in(list(SYNC_OPS))).select(*by, "tid", pl.col("ts_ns").alias("__api_ts"))
    ops = (
        ev.filter(pl.col("name").is_in(list(SYNC_OPS)))
        .join_asof(
            api,
            left_on="ts_ns",
            right_on="__api_ts",
            by=[*by, "tid"],
            strategy="forward",
            check_sortedness=False,
        )
        .filter(pl.col("__api_ts") <= pl.col("end_ns"))
        .drop("__api_ts")
    )
    return with_outermost(pl.concat([ops, ev.filter(pl.col("name").str.contains(SYNC_API_RE.pattern))]), [*by, "tid"])


def rule_host_device_sync(ctx: Context) -> list[Finding]:
    """Host-device synchronisations inside steps (``aten::item`` / ``_local_scalar_dense`` on a GPU
    value, ``cudaStreamSynchronize``/``DeviceSynchronize``/``EventSynchronize``, synchronous
    ``cudaMemcpy``) whose blocked time (union of their spans) is ≥ 1 % of the step time; the count
    is of outermost spans (an ``item`` and the sync call inside it are one synchronisation)."""
    st = _mean_steps(ctx)
    out: list[Finding] = []
    if st is None:
        return out
    ctx.per_rank(_syncs, [r for r in ctx.ranks if ctx.has_gpu(r)])  # one map for the loop below
    st_by = RankSlices(st)
    flagged: dict[int, tuple[pl.DataFrame, int, float]] = {}
    for r in ctx.ranks:
        if not ctx.has_gpu(r):
            continue
        s = ctx.on_rank(_syncs, r)
        steps = st_by[r]
        if s.height == 0 or steps.height == 0:
            continue
        blocked = union_length(s["ts_ns"].to_numpy(), s["end_ns"].to_numpy())
        total = float(steps["total_us"].sum()) * 1e3
        share = blocked / total if total else 0.0
        if share >= SYNC_BLOCKED_SHARE:
            flagged[r] = (s, blocked, share)
    details = _sync_details_all(ctx, {r: f[0] for r, f in flagged.items()})
    for r, (s, blocked, share) in flagged.items():
        steps = st_by[r]
        n_sync = int(s["outer"].sum())
        by_name = (
            s.group_by("name")
            .agg(pl.len().alias("n"), (pl.col("dur_ns").sum() / 1e3).alias("us"))
            .sort("us", descending=True)
        )
        top_callers, t0, dtoh = details[r]
        longest = s.sort("dur_ns", descending=True).row(0, named=True)
        out.append(
            Finding(
                rule="host-device-sync",
                title="The CPU waits for the GPU inside steps",
                severity=_sev(share, 0.10, 0.03),
                impact=_r(share, 4),
                ranks=[r],
                summary=f"rank {r}: {n_sync} synchronisations in {steps.height} steps block the CPU for "
                f"{100 * share:.1f}% of the step time ({blocked / 1e3 / steps.height:.0f} µs per step)",
                evidence={
                    "by_name": {n: {"count": int(k), "us": _r(u)} for n, k, u in by_name.iter_rows()},
                    "per_step_count": {
                        str(k): int(v) for k, v in s.filter("outer").group_by("step").len().sort("step").iter_rows()
                    },
                    "blocked_us": _r(blocked / 1e3),
                    "dtoh_copies_in_steps": dtoh,
                    "callers": {str(n): int(k) for n, k in top_callers.iter_rows()},
                    "longest": {
                        "name": longest["name"],
                        "step": longest["step"],
                        "dur_us": _r(longest["dur_ns"] / 1e3),
                        "at_ms": _r((longest["ts_ns"] - t0) / 1e6, 3),
                    },
                },
                fixes=(
                    [
                        "an inference step must bring its results back: keep it to one copy per step into pinned "
                        "memory with non_blocking=True, read after a CUDA event, not a device-wide synchronize",
                        "keep per-token decisions (sampling, stop checks, logits processing) on the GPU so only "
                        "the final tokens are copied",
                        "overlap the copy-back with the next step's launches (asynchronous scheduling)",
                        "find the call sites with torch.cuda.set_sync_debug_mode('warn')",
                    ]
                    if ctx.mode(r) == "inference"
                    else [
                        "avoid .item(), .cpu(), .tolist(), print(tensor) and Python control flow on GPU values inside "
                        "the step; keep metrics on the GPU and read them every N steps",
                        "use non_blocking=True copies and CUDA events instead of torch.cuda.synchronize()",
                        "find the call sites with torch.cuda.set_sync_debug_mode('warn')",
                    ]
                ),
            )
        )
    return out


def _sync_details_all(ctx: Context, syncs: dict[int, pl.DataFrame]) -> dict[int, tuple[pl.DataFrame, int, int]]:
    """:func:`_sync_details` of the ranks of ``syncs``: in one pass over the stacked events of
    many small ranks held here (issue 19), else rank by rank on the run's engine."""
    stacked = ctx.session.stacked_events() if len(syncs) > 1 else None
    if stacked is not None:
        with contextlib.suppress(CannotStack):
            return _sync_details_many(EventSource.stacked([ctx.session.trace(r) for r in syncs], stacked), syncs)
    return {r: ctx.on_rank(_sync_details, r, syncs=s) for r, s in syncs.items()}


def _sync_details_many(src: EventSource, syncs: dict[int, pl.DataFrame]) -> dict[int, tuple[pl.DataFrame, int, int]]:
    from ranksight.analyses.memory import attach_ops_of

    apis = {r: s.filter(~pl.col("name").is_in(list(SYNC_OPS))) for r, s in syncs.items()}
    calls = pl.concat([a.with_columns(rank_column(r, a.height)) for r, a in apis.items()], how="vertical_relaxed")
    callers = RankSlices(attach_ops_of(src, calls))
    firsts = (
        src.ev.filter(pl.col("ts_ns").is_not_null() & ~pl.col("kind").is_in(["metadata"]))
        .group_by("rank")
        .agg(pl.col("ts_ns").min())
        .collect()
    )
    t0 = dict(firsts.iter_rows())
    dtoh = (
        src.ev.filter(
            (pl.col("kind") == "memcpy")
            & pl.col("name").cast(pl.String).str.contains(DTOH_RE.pattern)
            & pl.col("step").is_not_null()
        )
        .group_by("rank")
        .len()
        .collect()
    )
    n_dtoh = dict(dtoh.iter_rows())
    return {
        r: (callers[r]["op"].drop_nulls().value_counts(sort=True).head(3), int(t0.get(r) or 0), int(n_dtoh.get(r, 0)))
        for r in syncs
    }


def _sync_details(trace: Trace, syncs: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """The three ops that call the sync APIs most, the trace's first timestamp, and the
    device-to-host copies in steps."""
    from ranksight.analyses.memory import attach_ops

    callers = attach_ops(trace, syncs.filter(~pl.col("name").is_in(list(SYNC_OPS))))
    top_callers = callers["op"].drop_nulls().value_counts(sort=True).head(3)
    span = trace.span_ns
    dtoh = (
        trace.kind("memcpy")
        .filter(pl.col("name").cast(pl.String).str.contains(DTOH_RE.pattern) & pl.col("step").is_not_null())
        .height
    )
    return top_callers, span[0] if span else 0, dtoh


# ---- 6. pageable copies -----------------------------------------------------------------------


def rule_pageable_memcpy(ctx: Context) -> list[Finding]:
    """Host-device copies from or to pageable host memory (``Memcpy HtoD (Pageable -> Device)``),
    at least 1 MiB in total: such copies are synchronous and slower than from pinned memory."""
    st = _mean_steps(ctx)
    out = []
    ctx.per_rank(_pageable_copies)  # one map for the loop below
    st_by = RankSlices(st) if st is not None else None
    for r in ctx.ranks:
        found = ctx.on_rank(_pageable_copies, r)
        if found is None:
            continue
        m, ops = found
        us = float(m["dur_ns"].sum()) / 1e3
        total_us = float(st_by[r]["total_us"].sum()) if st_by is not None else 0.0
        share = us / total_us if total_us else 0.0
        out.append(
            Finding(
                rule="pageable-memcpy",
                title="Copies from pageable host memory",
                severity=_sev(share, 0.05, 0.01),
                impact=_r(share, 4),
                ranks=[r],
                summary=f"rank {r}: {m.height} copies of {m['bytes'].sum() / 2**20:.1f} MiB use pageable host memory "
                f"({us / 1e3:.2f} ms, {100 * share:.2f}% of step time)",
                evidence={
                    "copies": m.height,
                    "bytes": int(m["bytes"].sum()),
                    "time_us": _r(us),
                    "kinds": {n: int(k) for n, k in m["name"].cast(pl.String).value_counts(sort=True).iter_rows()},
                    "launching_ops": {str(n): int(k) for n, k in ops.iter_rows()},
                    "steps": sorted(int(s) for s in m["step"].drop_nulls().unique()),
                },
                fixes=[
                    "DataLoader(pin_memory=True), or tensor.pin_memory() for tensors you copy repeatedly",
                    "copy with tensor.to(device, non_blocking=True) from pinned memory so the copy overlaps compute",
                ],
            )
        )
    return out


def _pageable_copies(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The copies from/to pageable memory (with their bytes) and the three ops that launch most of
    them; None below :data:`PAGEABLE_MIN_BYTES`."""
    from ranksight.analyses.memory import attach_ops

    t = trace
    m = t.with_args(
        t.kind("memcpy", columns=["row", "name", "dur_ns", "launch_row", "step"]).filter(
            pl.col("name").cast(pl.String).str.contains("Pageable")
        ),
        "transfer",
    )
    if m.height == 0 or (m["bytes"].fill_null(0).sum() < PAGEABLE_MIN_BYTES):
        return None
    launches = (
        t.scan().filter(pl.col("row").is_in(m["launch_row"].drop_nulls().implode())).select("tid", "ts_ns").collect()
    )
    return m, attach_ops(t, launches)["op"].drop_nulls().value_counts(sort=True).head(3)


# ---- 7. Tensor Cores --------------------------------------------------------------------------


def _matrix_units(trace: Trace) -> tuple[bool, str]:
    """Whether the rank's GPU has tensor / matrix cores, and its name (the devices the rank used,
    by ``meta.used_devices()``: the one definition ``info`` and ``mfu`` read too)."""
    used = trace.meta.used_devices()
    first = next(iter(used.values()), {})
    return _has_matrix_units(trace.meta), str(first.get("name", ""))


def _has_matrix_units(meta: TraceMeta) -> bool:
    for p in meta.used_devices().values():
        name = str(p.get("name", ""))
        major = p.get("computeMajor")
        if meta.gpu_vendor == "AMD":
            return bool(re.search(r"MI[1-9]", name)) or major == 9
        if isinstance(major, int) and major >= 7:
            return True
    return False


def _matrix_tc(trace: Trace) -> dict[str, Any]:
    """Kernel time of the rank by the kernel taxonomy: all kernels, matrix families (gemm,
    attention, convolution), and matrix time by Tensor Core answer; the top matrix kernels that do
    not use Tensor Cores."""
    t = kernel_taxonomy_table(trace).filter(pl.col("kind") == "kernel")
    m = t.filter(pl.col("family").is_in(list(MATRIX_FAMILIES)))
    by_tc = {k: float(v) / 1e3 for k, v in m.group_by("tensor_cores").agg(pl.col("dur_ns").sum()).iter_rows()}
    no = m.filter(pl.col("tensor_cores") == "no").sort("dur_ns", descending=True).head(3)
    return {
        "kernel_us": float(t["dur_ns"].sum()) / 1e3,
        "matrix_us": float(m["dur_ns"].sum()) / 1e3,
        "by_tc_us": by_tc,
        "top_no_tc": [
            {"name": n, "family": f, "precision": p, "us": _r(d / 1e3)}
            for n, f, p, d in no.select("name", "family", "precision", "dur_ns").iter_rows()
        ],
    }


def rule_low_tensor_core_use(ctx: Context) -> list[Finding]:
    """Matrix kernels (gemm, attention, convolution by the kernel taxonomy) take ≥ 20 % of kernel time
    and ≥ half of their time runs in kernels the taxonomy knows do **not** use Tensor Cores / Matrix
    Cores (``tensor_cores = no``; ``unknown`` is never counted against the run). Only on GPUs with
    tensor / matrix cores. Precision advice follows the run context: no autocast advice when the
    run's matrix work is already in a low precision (FP8, BF16, FP16, INT8, FP4)."""
    out = []
    units = ctx.per_rank(_matrix_units, [r for r in ctx.ranks if ctx.has_gpu(r)])  # one map for the loop below
    ctx.per_rank(_matrix_tc, [r for r, (has, _) in units.items() if has])
    for r in ctx.ranks:
        if not ctx.has_gpu(r):
            continue
        has_units, gpu = ctx.on_rank(_matrix_units, r)
        if not has_units:
            continue
        f = ctx.on_rank(_matrix_tc, r)
        kernel_us, matrix_us = f["kernel_us"], f["matrix_us"]
        no_us = f["by_tc_us"].get("no", 0.0)
        if kernel_us <= 0 or matrix_us / kernel_us < TC_ELIGIBLE_SHARE or no_us / max(matrix_us, 1e-9) < TC_NO_SHARE:
            continue
        c = ctx.run_context(r)
        precision = c.precision if c is not None else "unknown"
        low = precision in LOW_PRECISIONS
        impact = no_us / kernel_us
        out.append(
            Finding(
                rule="low-tensor-core-use",
                title="Matrix work does not use Tensor Cores",
                severity=_sev(impact, 0.3, 0.1),
                impact=_r(impact, 4),
                ranks=[r],
                summary=f"rank {r}: {100 * no_us / matrix_us:.0f}% of the matrix-kernel time ({no_us / 1e3:.1f} ms, "
                f"{100 * impact:.0f}% of kernel time) runs in kernels that do not use Tensor Cores"
                + (f"; the run's matrix work is mostly {precision}" if precision != "unknown" else ""),
                evidence={
                    "matrix_share_of_kernel_time_pct": _r(100 * matrix_us / kernel_us),
                    "matrix_us_by_tensor_cores": {k: _r(v) for k, v in sorted(f["by_tc_us"].items())},
                    "top_kernels_without_tensor_cores": f["top_no_tc"],
                    "dominant_precision": precision,
                    "gpu": gpu,
                    "definition": "kernel taxonomy: family gemm/attention/convolution, tensor_cores = no",
                },
                fixes=(
                    [
                        f"the run already computes in {precision}: find why these kernels run outside it (ops "
                        "excluded from autocast or the low-precision recipe, modules kept in FP32, FP32 inputs)",
                        "for the FP32 remainder: torch.backends.cuda.matmul.allow_tf32 = True / "
                        "torch.set_float32_matmul_precision('high'); torch.backends.cudnn.allow_tf32 = True",
                        "keep matrix dimensions multiples of 8 (16 for FP8) so Tensor Core kernels are eligible",
                    ]
                    if low
                    else [
                        "inference in reduced precision: model.to(torch.bfloat16) (or "
                        "torch.autocast(device_type='cuda', dtype=torch.bfloat16)); check the accuracy of the outputs"
                        if ctx.mode(r) == "inference"
                        else "mixed precision: torch.autocast(device_type='cuda', dtype=torch.bfloat16) (or float16 "
                        "with a GradScaler)",
                        "for FP32 models: torch.backends.cuda.matmul.allow_tf32 = True / "
                        "torch.set_float32_matmul_precision('high'); torch.backends.cudnn.allow_tf32 = True",
                        "convolutions: channels_last memory format; keep channel and matrix dimensions multiples of 8",
                    ]
                ),
            )
        )
    return out


# ---- 8./9. memory -----------------------------------------------------------------------------


def _gpu_peaks(ctx: Context) -> pl.DataFrame | None:
    m = ctx.result("memory")  # default options: the result the report and summary read too
    if m is None or "peaks" not in m.tables:
        return None
    p = m["peaks"].filter(pl.col("device") != "cpu")
    return p if p.height else None


def rule_memory_near_capacity(ctx: Context) -> list[Finding]:
    """Peak reserved (or allocated) GPU memory ≥ 90 % of ``totalGlobalMem`` (TB plugin rule 7)."""
    p = _gpu_peaks(ctx)
    if p is None:
        return []
    p = p.with_columns(pl.max_horizontal("peak_pct_of_capacity", "peak_reserved_pct_of_capacity").alias("pct")).filter(
        pl.col("pct") >= MEMORY_NEAR_CAPACITY_PCT
    )
    out = []
    for row in p.iter_rows(named=True):
        pct = float(row["pct"])
        r = int(row["rank"])
        if ctx.mode(r) == "inference":  # a server reserves its KV cache up front: intended, not a problem
            ctx.notes.append(
                f"memory-near-capacity: rank {r} {row['device']} peaks at {pct:.1f}% of its memory; an inference "
                "server preallocates its KV cache to a set share of GPU memory on purpose (vLLM "
                "gpu_memory_utilization, SGLang mem_fraction_static): not a finding"
            )
            continue
        step = f"at step {row['peak_step']}" if row["peak_step"] is not None else "outside any step"
        where = f", in {row['peak_op']}" if row["peak_op"] is not None else ""
        out.append(
            Finding(
                rule="memory-near-capacity",
                title="GPU memory close to full",
                severity="high" if pct >= 95 else "medium",
                impact=_r(pct / 100, 4),
                ranks=[int(row["rank"])],
                summary=f"rank {row['rank']} {row['device']}: peak {pct:.1f}% of {row['capacity_bytes'] / 2**30:.1f} "
                f"GiB (allocated {row['peak_allocated_bytes'] / 2**30:.2f} GiB {step}{where})",
                evidence={
                    k: row[k]
                    for k in (
                        "device",
                        "peak_allocated_bytes",
                        "peak_reserved_bytes",
                        "capacity_bytes",
                        "peak_step",
                        "peak_op",
                        "peak_time_ms",
                    )
                },
                fixes=[
                    "activation checkpointing (torch.utils.checkpoint) on the largest blocks",
                    "mixed precision (bf16) halves activation memory; smaller micro-batch with gradient accumulation",
                    "shard parameters / optimizer state (FSDP, ZeRO); optimizer.zero_grad(set_to_none=True)",
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True if reserved is well above allocated",
                ],
            )
        )
    return out


def rule_memory_fragmentation(ctx: Context) -> list[Finding]:
    """At the allocated peak, ≥ 25 % of the reserved GPU memory is unused (``memory``:
    fragmentation_at_peak) and the unused part reaches ≥ 1 GiB."""
    p = _gpu_peaks(ctx)
    if p is None:
        return []
    p = p.filter(
        (pl.col("fragmentation_at_peak") >= FRAGMENTATION_AT_PEAK)
        & (pl.col("max_unused_reserved_bytes") >= FRAGMENTATION_MIN_UNUSED_BYTES)
    )
    out = []
    for row in p.iter_rows(named=True):
        f = float(row["fragmentation_at_peak"])
        res_pct = row["peak_reserved_pct_of_capacity"] or 0.0
        out.append(
            Finding(
                rule="memory-fragmentation",
                title="Caching allocator holds much unused memory",
                severity="medium" if res_pct >= 50 else "low",
                impact=_r(f * res_pct / 100, 4),
                ranks=[int(row["rank"])],
                summary=f"rank {row['rank']} {row['device']}: at the allocated peak {100 * f:.0f}% of reserved memory "
                f"is unused (up to {row['max_unused_reserved_bytes'] / 2**30:.2f} GiB reserved but not "
                "allocated)",
                evidence={
                    k: row[k]
                    for k in (
                        "device",
                        "peak_allocated_bytes",
                        "peak_reserved_bytes",
                        "fragmentation_at_peak",
                        "max_unused_reserved_bytes",
                        "mean_fragmentation",
                        "capacity_bytes",
                    )
                },
                fixes=[
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow instead of fragmenting)",
                    "avoid tensors whose sizes change every step (pad to a few fixed shapes / buckets)",
                    "torch.cuda.memory._record_memory_history() and the memory_viz snapshot to see which blocks "
                    "fragment",
                ],
            )
        )
    return out


# ---- 10. launch queue -------------------------------------------------------------------------


def rule_full_launch_queue(ctx: Context) -> list[Finding]:
    """A stream's launch queue full (``queue``: ≥ 1024 queued launches) for ≥ 1 % of the trace:
    the CPU blocks inside launch calls until the GPU drains the queue."""
    q = ctx.result("queue")
    if q is None or q["blocked"].height == 0:
        return []
    b = (
        q["blocked"]
        .filter(pl.col("relative_duration_at_max_queue_length") >= QUEUE_BLOCKED_SHARE)
        .sort("relative_duration_at_max_queue_length", descending=True)
    )
    out = []
    for row in b.iter_rows(named=True):
        share = float(row["relative_duration_at_max_queue_length"])
        out.append(
            Finding(
                rule="full-launch-queue",
                title="Launch queue full: the CPU blocks on the GPU",
                severity=_sev(share, 0.5, 0.25),
                impact=_r(share, 4),
                ranks=[int(row["rank"])],
                summary=f"rank {row['rank']} stream {row['stream']}: launch queue full for {100 * share:.1f}% of the "
                f"trace ({row['duration_at_max_queue_length_us'] / 1e3:.1f} ms)",
                evidence=dict(row),
                fixes=[
                    "the GPU is the bottleneck here: cut GPU work (fusion with torch.compile, fewer and larger "
                    "kernels)",
                    "host work queued behind the blocked launches (data loading, logging) is delayed: move it to other "
                    "threads/processes",
                ],
            )
        )
    return out


# ---- 11. load imbalance -----------------------------------------------------------------------


def rule_load_imbalance(ctx: Context) -> list[Finding]:
    """Across ranks, the busiest rank's mean work per step exceeds the median rank's by ≥ 10 %;
    work = kernel + memcpy + memset time (``overview``), or CPU Exec time on CPU-only traces."""
    st = _mean_steps(ctx)
    if st is None or st["rank"].n_unique() < 2:
        return []
    gpu = any(ctx.has_gpu(r) for r in ctx.ranks)
    work = (pl.col("kernel_us") + pl.col("memcpy_us") + pl.col("memset_us")) if gpu else pl.col("cpu_exec_us")
    per = st.group_by("rank").agg(work.mean().alias("work"), pl.col("total_us").mean().alias("step")).sort("rank")
    med = float(per["work"].median())  # type: ignore[arg-type]
    top = per.sort("work", descending=True).row(0, named=True)
    if med <= 0:
        return []
    imb = float(top["work"]) / med - 1
    if imb < IMBALANCE:
        return []
    low = per.sort("work").row(0, named=True)
    impact = (float(top["work"]) - med) / float(per["step"].mean())  # type: ignore[arg-type]
    return [
        Finding(
            rule="load-imbalance",
            title="Ranks do unequal work",
            severity=_sev(imb, 0.3, 0.15),
            impact=_r(min(impact, 1.0), 4),
            ranks=[int(top["rank"])],
            summary=f"rank {top['rank']} does {100 * imb:.0f}% more {'GPU' if gpu else 'CPU'} work per step than the "
            f"median rank ({top['work'] / 1e3:.1f} vs {med / 1e3:.1f} ms); the others wait for it at "
            "collectives",
            evidence={
                "work_us_by_rank": {str(r): _r(w) for r, w in per.select("rank", "work").iter_rows()},
                "slowest_rank": int(top["rank"]),
                "fastest_rank": int(low["rank"]),
                "median_work_us": _r(med),
                "definition": "mean over steps of kernel+memcpy+memset time"
                if gpu
                else "mean over steps of CPU Exec time",
            },
            fixes=[
                "balance the data per rank (bucket or pack sequences by length; equal samples per rank)",
                "balance pipeline stages / expert routing; check the slow rank's hardware (clocks, thermals, "
                "NVLink/PCIe placement)",
                "ranksight analyze stragglers names the late rank per collective and why",
            ],
        )
    ]


# ---- 12. Time unit -----------------------------------------------------------------------------


def rule_time_unit_mismatch(ctx: Context) -> list[Finding]:
    """Ranks whose span and median event duration are ~1000× the others' (ns vs µs timestamps;
    :mod:`ranksight.views.time_units`)."""
    from ranksight.views.time_units import TIME_UNIT_RATIO, time_facts, time_unit_note, time_unit_outliers

    if len(ctx.ranks) < 2:
        return []
    facts = ctx.session.map(time_facts)
    odd = time_unit_outliers(facts)
    if not odd:
        return []
    return [
        Finding(
            rule="time-unit-mismatch",
            title="Ranks recorded in different time units",
            severity="high",
            impact=1.0,
            ranks=sorted(odd),
            summary=time_unit_note(odd, facts).removeprefix("time unit: "),
            evidence={
                "span_ms_by_rank": {str(r): _r((f["span_ns"] or 0) / 1e6, 3) for r, f in facts.items()},
                "median_event_us_by_rank": {str(r): _r((f["median_dur_ns"] or 0) / 1e3, 3) for r, f in facts.items()},
                "span_ratio_by_rank": {str(r): _r(x, 4) for r, x in sorted(odd.items())},
                "ratio_range": list(TIME_UNIT_RATIO),
                "definition": "span and median event duration both differ from the majority's by this factor range",
            },
            fixes=[
                "re-export the flagged ranks' traces with timestamps in µs (Kineto's unit), or convert them "
                "(divide ts and dur by 1000)",
                "analyse the ranks of each unit separately (--rank) until then: cross-rank numbers are not comparable",
            ],
        )
    ]


# ---- 12. stragglers ---------------------------------------------------------------------------


def rule_straggler(ctx: Context) -> list[Finding]:
    """A rank the ``stragglers`` analysis names (it caused at least twice its fair share of all
    collective wait, ``min(0.75, 2/n)``) and whose wait costs the others ≥ 1 % of their step time.
    Multi-rank runs only."""
    if len(ctx.ranks) < 2:
        return []
    st, steps = ctx.result("stragglers"), _mean_steps(ctx)
    if st is None or "ranks" not in st.tables or st["ranks"].height == 0:
        return []
    rk = st["ranks"]
    n = rk.height
    named = rk.filter(pl.col("wait_share") >= min(NAMED_SHARE_MAX, 2.0 / n)).sort("wait_caused_us", descending=True)
    if named.height == 0:
        return []
    total_step_us = float(steps["total_us"].sum()) if steps is not None else 0.0
    out = []
    for row in named.iter_rows(named=True):
        caused = float(row["wait_caused_us"])
        impact = caused / total_step_us if total_step_us else 0.0
        if total_step_us and impact < STRAGGLER_MIN_SHARE:
            continue
        cause = _words(row["main_cause"])
        out.append(
            Finding(
                rule="straggler",
                title="One rank makes the others wait",
                severity=_sev(impact, 0.2, 0.05),
                impact=_r(min(impact, 1.0), 4),
                ranks=[int(row["rank"])],
                summary=f"rank {row['rank']} arrived last at {row['times_last']} of {row['instances']} collectives and "
                f"caused {100 * float(row['wait_share']):.0f}% of all collective wait ({caused / 1e3:.1f} ms summed "
                f"over the ranks that waited); main cause: {cause}",
                evidence={
                    "wait_caused_us": _r(caused),
                    "wait_share": _r(float(row["wait_share"]), 4),
                    "times_last": int(row["times_last"]),
                    "instances": int(row["instances"]),
                    "main_cause": cause,
                    "late_launch_us": _r(row["late_launch_us"] or 0.0),
                    "after_launch_us": _r(row["after_launch_us"] or 0.0),
                    "share_of_summed_step_time_pct": _r(100 * impact),
                },
                fixes=_STRAGGLER_FIXES.get(cause, [])
                + ["ranksight analyze stragglers shows each late collective with the ops that made the rank late"],
            )
        )
    return out


_STRAGGLER_FIXES = {
    "data": [
        "the late rank waits for its input pipeline: more DataLoader workers, pin_memory, prefetching; check that "
        "its data shard is not slower to read or decode",
    ],
    "host": [
        "the late rank's host issues the collective late: look at the CPU ops before it on that rank (logging, "
        "Python work, synchronisation) and at the node's CPU load",
    ],
    "compute": [
        "the late rank has more GPU work before the collective: balance the work per rank (sequence lengths, "
        "pipeline stages, expert routing); check that GPU's clocks and thermals",
    ],
    "transfer": [
        "the late rank's transfers are slow: check its links (NCCL_DEBUG=INFO transports, NVLink/PCIe topology)",
    ],
}


# ---- 13. host-device copies ----------------------------------------------------------------------


def _copies(trace: Trace) -> dict[str, Any] | None:
    """Host↔device copy time of the rank inside its steps (or its GPU span without steps): union of
    the copies, bytes, and the rank's GPU busy time over the same window."""
    from ranksight.views.intervals import union_length

    g = trace.kind("memcpy", "memset", "kernel", columns=["row", "kind", "name", "ts_ns", "end_ns", "step"]).filter(
        pl.col("end_ns").is_not_null()
    )
    if g.height == 0:
        return None
    if g["step"].is_not_null().any():
        g = g.filter(pl.col("step").is_not_null())
    n = pl.col("name").cast(pl.String)
    h2d_d2h = (pl.col("kind") == "memcpy") & n.str.contains(HOST_COPY_RE.pattern)
    c = g.filter(h2d_d2h)
    if c.height == 0:
        return None
    busy = union_length(g["ts_ns"].to_numpy(), g["end_ns"].to_numpy())
    copy = union_length(c["ts_ns"].to_numpy(), c["end_ns"].to_numpy())
    window = int(g.select(pl.col("end_ns").max() - pl.col("ts_ns").min()).item())
    c = trace.with_args(c, "transfer")
    by_dir = (
        c.with_columns(
            pl.col("name").cast(pl.String).str.extract(r"(HtoD|DtoH|HtoH|PtoP)").fill_null("other").alias("d")
        )
        .group_by("d")
        .agg(pl.col("bytes").sum())
    )
    return {
        "copy_ns": copy,
        "busy_ns": busy,
        "window_ns": window,
        "copies": c.height,
        "bytes_by_direction": {str(d): int(b or 0) for d, b in by_dir.iter_rows()},
    }


def rule_memcpy_bound(ctx: Context) -> list[Finding]:
    """Host↔device copies (``Memcpy HtoD``/``DtoH``) take ≥ 50 % of the rank's GPU busy time and
    ≥ 25 % of its steps (or its GPU span without steps): the GPU mostly moves data instead of
    computing."""
    out = []
    ctx.per_rank(_copies)  # one map for the loop below
    for r in ctx.ranks:
        f = ctx.on_rank(_copies, r)
        if f is None or f["busy_ns"] <= 0 or f["window_ns"] <= 0:
            continue
        of_busy = f["copy_ns"] / f["busy_ns"]
        of_window = f["copy_ns"] / f["window_ns"]
        if of_busy < MEMCPY_BUSY_SHARE or of_window < MEMCPY_WINDOW_SHARE:
            continue
        gib = sum(f["bytes_by_direction"].values()) / 2**30
        bw = gib / (f["copy_ns"] / 1e9) if f["copy_ns"] else 0.0
        out.append(
            Finding(
                rule="memcpy-bound",
                title="The GPU mostly copies data between host and device",
                severity=_sev(of_window, 0.5, 0.25),
                impact=_r(of_window, 4),
                ranks=[r],
                summary=f"rank {r}: host-device copies take {100 * of_busy:.0f}% of the GPU's busy time and "
                f"{100 * of_window:.0f}% of the span of its GPU work ({f['copies']} copies, {gib:.2f} GiB at "
                f"{bw:.1f} GiB/s)",
                evidence={
                    "copy_us": _r(f["copy_ns"] / 1e3),
                    "gpu_work_union_us": _r(f["busy_ns"] / 1e3),
                    "gpu_work_extent_us": _r(f["window_ns"] / 1e3),  # first to last GPU work launched in steps
                    "copies": f["copies"],
                    "bytes_by_direction": f["bytes_by_direction"],
                    "achieved_gib_per_s": _r(bw),
                },
                fixes=[
                    "keep data on the GPU across steps (move the model, buffers and lookup tables once; avoid "
                    ".cpu() round trips)",
                    "copy from pinned memory with non_blocking=True on a side stream, overlapped with compute "
                    "(prefetch the next batch)",
                    "copy less: smaller dtypes, compressed or pre-batched inputs; ranksight analyze memcpy-bw shows "
                    "the achieved bandwidth per copy",
                ],
            )
        )
    return out


# ---- 14. allocator synchronisation --------------------------------------------------------------


def _allocator_calls(trace: Trace) -> pl.DataFrame:
    """Synchronising allocator calls inside steps (cudaFree/hipFree, cudaMalloc/hipMalloc and their
    host variants), and ``empty_cache``."""
    n = pl.col("name").cast(pl.String)
    return (
        trace.scan()
        .filter(
            pl.col("step").is_not_null()
            & pl.col("dur_ns").is_not_null()
            & (
                (pl.col("kind").is_in(list(LAUNCH_KINDS)) & n.str.contains(ALLOC_API_RE.pattern))
                | n.str.contains("empty_cache")
            )
        )
        .select("tid", "ts_ns", "end_ns", "dur_ns", "step", n.alias("name"))
        .collect()
    )


def rule_allocator_sync(ctx: Context) -> list[Finding]:
    """Device-synchronising allocator calls (``cudaFree``/``hipFree``, ``cudaMalloc``/``hipMalloc``,
    ``torch.cuda.empty_cache``) inside steps block the CPU for ≥ 1 % of the step time. The caching
    allocator calls them when it runs out of cached memory (it frees its cache and retries) or when
    ``empty_cache`` is called in the loop."""
    st = _mean_steps(ctx)
    if st is None:
        return []
    out = []
    ctx.per_rank(_allocator_calls)  # one map for the loop below
    st_by = RankSlices(st)
    for r in ctx.ranks:
        a = ctx.on_rank(_allocator_calls, r)
        steps = st_by[r]
        if a.height == 0 or steps.height == 0:
            continue
        blocked = union_length(a["ts_ns"].to_numpy(), a["end_ns"].to_numpy())
        total = float(steps["total_us"].sum()) * 1e3
        share = blocked / total if total else 0.0
        if share < ALLOC_SYNC_SHARE:
            continue
        by_name = a.group_by("name").agg(pl.len().alias("n"), (pl.col("dur_ns").sum() / 1e3).alias("us"))
        longest = a.sort("dur_ns", descending=True).row(0, named=True)
        out.append(
            Finding(
                rule="allocator-sync",
                title="Memory allocation synchronises the GPU inside steps",
                severity=_sev(share, 0.10, 0.03),
                impact=_r(share, 4),
                ranks=[r],
                summary=f"rank {r}: {a.height} allocator calls ({', '.join(sorted(by_name['name'].to_list()))}) block "
                f"the CPU for {100 * share:.1f}% of the step time; the longest, {longest['name']}, "
                f"{longest['dur_ns'] / 1e6:.1f} ms in step {longest['step']}",
                evidence={
                    "by_name": {n: {"count": int(k), "us": _r(u)} for n, k, u in by_name.iter_rows()},
                    "blocked_us": _r(blocked / 1e3),
                    "longest": {
                        "name": longest["name"],
                        "step": longest["step"],
                        "dur_us": _r(longest["dur_ns"] / 1e3),
                    },
                },
                fixes=[
                    "do not call torch.cuda.empty_cache() inside the training/serving loop",
                    "the caching allocator frees and retries when memory runs short: lower the peak (smaller batch, "
                    "activation checkpointing) or leave headroom so it stops returning memory to the driver",
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PYTORCH_HIP_ALLOC_CONF on ROCm) so segments "
                    "grow instead of being freed and re-allocated",
                ],
            )
        )
    return out


# ---- 15. unfused attention -----------------------------------------------------------------------


def _attention_kernels(trace: Trace) -> dict[str, float]:
    """Kernel time of the rank by taxonomy family, and whether it runs batched matmuls (bmm /
    baddbmm / matmul ops) and softmax ops."""
    t = kernel_taxonomy_table(trace).filter(pl.col("kind") == "kernel")
    fam = {f: float(d) / 1e3 for f, d in t.group_by("family").agg(pl.col("dur_ns").sum()).iter_rows()}
    ops = trace.kind("cpu_op", columns=["name"])["name"].cast(pl.String)
    fam["__bmm_ops"] = float(ops.is_in(["aten::bmm", "aten::baddbmm", "aten::matmul"]).sum())
    fam["__softmax_ops"] = float(ops.is_in(["aten::softmax", "aten::_softmax", "aten::_safe_softmax"]).sum())
    fam["__kernel_us"] = float(t["dur_ns"].sum()) / 1e3
    return fam


def rule_unfused_attention(ctx: Context) -> list[Finding]:
    """Attention computed unfused: softmax kernels take ≥ 10 % of kernel time, the rank runs
    batched-matmul ops (``aten::bmm``/``baddbmm``/``matmul``) and softmax ops, and fused attention
    kernels (the taxonomy's ``attention`` family) take less time than the softmax kernels: the
    attention scores are materialised in memory instead of computed by FlashAttention-style
    kernels."""
    out = []
    ctx.per_rank(_attention_kernels, [r for r in ctx.ranks if ctx.has_gpu(r)])  # one map for the loop below
    for r in ctx.ranks:
        if not ctx.has_gpu(r):
            continue
        f = ctx.on_rank(_attention_kernels, r)
        k = f["__kernel_us"]
        soft, fused = f.get("softmax", 0.0), f.get("attention", 0.0)
        if k <= 0 or soft / k < UNFUSED_SOFTMAX_SHARE or fused >= soft:
            continue
        if f["__bmm_ops"] == 0 or f["__softmax_ops"] == 0:
            continue
        share = soft / k
        out.append(
            Finding(
                rule="unfused-attention",
                title="Attention runs unfused (softmax between batched matmuls)",
                severity=_sev(share, 0.3, 0.1),
                impact=_r(share, 4),
                ranks=[r],
                summary=f"rank {r}: softmax kernels take {100 * share:.0f}% of kernel time next to batched matmuls, "
                f"and fused attention kernels {fused / 1e3:.2f} ms",
                evidence={
                    "softmax_us": _r(soft),
                    "fused_attention_us": _r(fused),
                    "gemm_us": _r(f.get("gemm", 0.0)),
                    "kernel_us": _r(k),
                    "bmm_ops": int(f["__bmm_ops"]),
                    "softmax_ops": int(f["__softmax_ops"]),
                },
                fixes=[
                    "use torch.nn.functional.scaled_dot_product_attention (FlashAttention / memory-efficient / cuDNN "
                    "backends) instead of matmul → softmax → matmul",
                    "Hugging Face models: attn_implementation='sdpa' (or 'flash_attention_2')",
                ],
            )
        )
    return out


#: The run contexts each rule judges (``run-context``; see docs/diagnose.md). Rules not listed judge
#: every mode and skip capture-only traces.
APPLIES: dict[str, Applies] = {
    "pageable-memcpy": Applies(capture=True),
    "memory-fragmentation": Applies(capture=True),
    "memory-near-capacity": Applies(capture=True),  # inference is judged inside the rule (KV cache)
}


RULES = [
    rule_dataloader_bound,
    rule_launch_bound,
    rule_low_gpu_utilization,
    rule_exposed_communication,
    rule_host_device_sync,
    rule_pageable_memcpy,
    rule_low_tensor_core_use,
    rule_memory_near_capacity,
    rule_memory_fragmentation,
    rule_full_launch_queue,
    rule_load_imbalance,
    rule_time_unit_mismatch,
    rule_straggler,
    rule_memcpy_bound,
    rule_allocator_sync,
    rule_unfused_attention,
]


# ---- idle-causes: why the GPU is idle (docs/idle-causes.md) ------------------------------------

#: A step is judged when its GPU idle (``temporal --per-step`` ``idle_pct``) is at least this share.
IDLE_STEP_PCT = 15.0
#: Causes with at least this share of the judged idle get their fix.
IDLE_FIX_SHARE = 0.10
_CAPTURE_API_RE = r"^(cuda|hip)Stream(Begin|End)Capture|^(cuda|hip)GraphInstantiate"
_GRAPH_LAUNCH_RE = r"^(cuda|hip|cu)GraphLaunch$"


def _idle_graph_facts(trace: Trace) -> tuple[list[int], bool]:
    """The steps that capture a CUDA/HIP graph (stream capture or graph instantiation calls in
    them: the kernels recorded there did not run) and whether the rank replays graphs."""
    return _idle_graph_facts_many(EventSource.one(trace))[trace.rank]


@one_pass(_idle_graph_facts)
def _idle_graph_facts_many(src: EventSource) -> dict[int, tuple[list[int], bool]]:
    by = src.by
    names = (
        src.ev.filter(pl.col("kind").is_in(list(LAUNCH_KINDS)))
        .group_by(*by, pl.col("name").cast(pl.String))
        .agg(pl.col("step").drop_nulls().unique())
        .collect()
    )
    if not by:
        names = names.with_columns(pl.lit(src.traces[0].rank, dtype=pl.Int32).alias("rank"))
    names = names.drop_nulls("name")
    capture = names.filter(pl.col("name").str.contains(_CAPTURE_API_RE))
    steps = capture.explode("step").drop_nulls("step").group_by("rank").agg(pl.col("step").unique().sort())
    got = {int(r): [int(x) for x in st] for r, st in steps.iter_rows()}
    replays = set(names.filter(pl.col("name").str.contains(_GRAPH_LAUNCH_RE))["rank"].to_list())
    return {t.rank: (got.get(t.rank, []), t.rank in replays) for t in src.traces}


def _idle_fix(cause: str, site: str | None, late: str | None, replays: bool) -> str:
    """The fix to try for one cause of idle, naming its top call site."""
    at = f" ({site})" if site else ""
    if cause == "dataloader":
        return (
            f"the GPU waits for the next batch{at}: DataLoader(num_workers>0, pin_memory=True, "
            "persistent_workers=True) and a larger prefetch_factor"
        )
    if cause == "collective_wait":
        who = f"rank {late}" if late else "a late rank"
        return (
            f"the launching thread waits for {who} in a host-side collective{at}: `ranksight analyze stragglers` "
            "says why it is late; balance the work per rank, or use a GPU collective backend (NCCL/RCCL)"
        )
    if cause == "sync":
        return (
            f"a synchronisation empties the GPU's queue{at}: remove the ones that do not deliver the step's result "
            "(.item(), .cpu(), .tolist(), torch.cuda.synchronize()); find them with "
            "torch.cuda.set_sync_debug_mode('warn')"
        )
    if cause == "cpu_op" and site is not None and re.match(COLLECTIVE_OP_RE, site):
        return (
            f"a host-side collective{at} runs while the GPU waits: use a GPU backend (NCCL/RCCL) or overlap it "
            "with compute (async_op=True)"
        )
    if cause == "cpu_op":
        graphs = (
            "fuse ops with torch.compile (the run already replays CUDA/HIP graphs)"
            if replays
            else "capture the step in CUDA graphs (torch.compile(mode='reduce-overhead') or torch.cuda.CUDAGraph) "
            "and fuse ops with torch.compile"
        )
        return f"the launching thread is busy on the CPU{at} while the GPU waits: {graphs}; move host work off it"
    if cause == "launch_latency":
        return (
            "launched work waits to start: launch overhead between many short kernels; fewer, larger kernels "
            "(torch.compile fusion, a larger batch)" + ("" if replays else " or CUDA graphs")
        )
    return (
        "part of the idle has no recorded cause (no launch record, or nothing recorded on the launching thread): "
        "profile CPU and CUDA activities with with_stack=True to attribute it"
    )


def rule_idle_causes(ctx: Context) -> list[Finding]:
    """Steps whose GPU idle is ≥ 15 % of the step window (``temporal --per-step`` ``idle_pct``), with
    the causes of that idle (``idle-causes`` ``by_step``: DataLoader, collective wait, sync, CPU op,
    launch latency, unexplained), their top call sites and the longest idle pieces (time ranges).

    Applies to training and inference runs (every mode), not to capture-only traces (the default of
    ``APPLIES``). Contradicting facts, checked: steps that capture a CUDA/HIP graph are not judged
    (the kernels recorded there never ran, so the GPU only looks idle); ranks without GPU work are
    skipped; the CUDA-graph fix is not given to a run that already replays graphs."""
    tem = ctx.result("temporal", per_step=True)
    ic = ctx.result("idle-causes")
    if tem is None or ic is None:
        return []
    per_step, by_step, gaps = tem["per_step"], ic["by_step"], ic["gaps"]
    out: list[Finding | int] = []  # a finding, or a flagged rank whose finding is made below
    per_step_by = RankSlices(per_step)  # each rank's rows without a query over every rank's per rank
    ctx.per_rank(_idle_graph_facts, [r for r in ctx.ranks if r in per_step_by and ctx.has_gpu(r)])  # one map
    flagged_of: dict[int, tuple[pl.DataFrame, pl.DataFrame, list[int], bool]] = {}
    for r in ctx.ranks:
        steps = per_step_by[r]
        if not ctx.has_gpu(r):
            continue
        if steps.height == 0:  # no ProfilerSteps (inference scripts, serving): judge the GPU span
            f = _idle_span_finding(ctx, r, tem["temporal"], ic)
            if f is not None:
                out.append(f)
            continue
        capture, replays = ctx.on_rank(_idle_graph_facts, r)
        if capture:
            note = f"idle-causes: rank {r} steps {capture} capture a CUDA/HIP graph (kernels recorded, not run): "
            note += "not judged"
            if note not in ctx.notes:
                ctx.notes.append(note)
        judged = steps.filter(~pl.col("step").is_in(capture))
        flagged = judged.filter(pl.col("idle_pct") >= IDLE_STEP_PCT)
        if flagged.height:
            flagged_of[r] = (judged, flagged, capture, replays)
            out.append(r)
    if not flagged_of:
        return [f for f in out if isinstance(f, Finding)]
    # every flagged rank's causes, call sites, late ranks and pieces in one query each
    fsteps = pl.concat([f[1].select(pl.col("rank").cast(pl.Int32), "step") for f in flagged_of.values()])
    idle_of = {r: float(f[1]["idle_us"].sum()) for r, f in flagged_of.items()}
    totals = pl.DataFrame(
        {"rank": list(idle_of), "__idle": list(idle_of.values())}, schema={"rank": pl.Int32, "__idle": pl.Float64}
    )
    causes_by = RankSlices(
        by_step.with_columns(pl.col("rank").cast(pl.Int32))
        .join(fsteps, on=["rank", "step"], how="semi")
        .group_by("rank", "cause")
        .agg(pl.col("idle_us").sum())
        .join(totals, on="rank")
        .with_columns((pl.col("idle_us") / pl.col("__idle")).alias("share"))
        .drop("__idle")
        .sort(["rank", "idle_us", "cause"], descending=[False, True, False])
    )
    mine_all = gaps.with_columns(pl.col("rank").cast(pl.Int32)).join(
        fsteps, on=["rank", "step"], how="semi", maintain_order="left"
    )
    sites_by = RankSlices(
        mine_all.filter(pl.col("call_site").is_not_null())
        .group_by("rank", "cause", "call_site")
        .agg(pl.col("dur_us").sum().alias("idle_us"))
        .sort(["rank", "idle_us", "call_site", "cause"], descending=[False, True, False, False])
    )
    late_of = {
        int(r): w
        for r, w in mine_all.filter(pl.col("cause") == "collective_wait")
        .select("rank", pl.col("detail").str.extract(r"waits for rank (\d+)").alias("__w"))
        .drop_nulls("__w")
        .group_by("rank")
        .agg(pl.col("__w").mode().sort())
        .iter_rows()
    }
    mine_by = RankSlices(mine_all)
    found: list[Finding] = []
    for item in out:
        if isinstance(item, Finding):
            found.append(item)
        else:  # a flagged rank
            r = item
            late = late_of.get(r, [])
            found.append(_idle_finding(ctx, r, flagged_of[r], idle_of[r], causes_by[r], sites_by[r], late, mine_by[r]))
    return found


def _idle_finding(
    ctx: Context,
    r: int,
    facts: tuple[pl.DataFrame, pl.DataFrame, list[int], bool],
    idle_us: float,
    causes: pl.DataFrame,
    sites: pl.DataFrame,
    late: list[str],
    mine: pl.DataFrame,
) -> Finding:
    """The idle-causes finding of a rank with flagged steps: ``causes`` (``cause, idle_us, share``,
    worst first), ``sites`` (``cause, call_site, idle_us``, worst first), ``late`` (the ranks its
    host-side collectives most often wait for), ``mine`` (its idle pieces in flagged steps)."""
    judged, flagged, capture, replays = facts
    impact = idle_us / float(judged["step_time_us"].sum())
    top_site: dict[str, str] = {}
    top3: dict[str, dict[str, float | None]] = {}
    for c, site, v in sites.select("cause", "call_site", "idle_us").iter_rows():
        top_site.setdefault(c, site)
        per = top3.setdefault(c, {})
        if len(per) < 3:
            per[site] = _r(v)
    named = [
        f"{c} {100 * s:.0f}%" + (f" ({top_site[c]})" if c in top_site else "")
        for c, s in causes.select("cause", "share").head(3).iter_rows()
    ]
    longest = mine.head(5).select("step", "start_ns", "end_ns", "dur_us", "cause", "call_site", "detail")
    return Finding(
        rule="idle-causes",
        title="The GPU waits: the causes of its idle time",
        severity=_sev(impact, 0.50, 0.25),
        impact=_r(impact, 4),
        ranks=[r],
        summary=f"rank {r}: the GPU is idle {100 * idle_us / float(flagged['step_time_us'].sum()):.0f}% of "
        f"{flagged.height} of {judged.height} steps ({idle_us / 1e3:.1f} ms); why: {', '.join(named)}",
        evidence={
            "idle_by_cause_us": {c: _r(v) for c, v in causes.select("cause", "idle_us").iter_rows()},
            "idle_share_by_cause_pct": {c: _r(100 * s) for c, s in causes.select("cause", "share").iter_rows()},
            "top_call_sites": top3,
            "idle_pct_by_step": {str(s): _r(p) for s, p in judged.select("step", "idle_pct").iter_rows()},
            "steps_judged": judged.height,
            "steps_flagged": [int(s) for s in flagged["step"].to_list()],
            "steps_capturing_graphs": capture,
            "replays_graphs": replays,
            "longest_idle": [
                {k: (_r(v) if isinstance(v, float) else v) for k, v in row.items()}
                for row in longest.iter_rows(named=True)
            ],
            "threshold_pct": IDLE_STEP_PCT,
            "definition": "temporal --per-step idle_pct; causes: idle-causes by_step (docs/idle-causes.md)",
        },
        fixes=[
            _idle_fix(c, top_site.get(c), late[0] if late else None, replays)
            for c, s in causes.select("cause", "share").iter_rows()
            if s >= IDLE_FIX_SHARE
        ],
    )


def _idle_span_finding(ctx: Context, r: int, tem: pl.DataFrame, ic: Any) -> Finding | None:
    """The idle-causes finding of a rank without steps: idle over its GPU span (``temporal``
    ``idle_pct``, ``idle-causes`` ``by_rank``) ≥ the step threshold."""
    row = tem.filter(pl.col("rank") == r)
    if row.height == 0 or row["idle_pct"][0] is None or float(row["idle_pct"][0]) < IDLE_STEP_PCT:
        return None
    span_us, idle_us = float(row["kernel_time_us"][0]), float(row["idle_us"][0])
    causes = (
        ic["by_rank"]
        .filter(pl.col("rank") == r)
        .sort(["idle_us", "cause"], descending=[True, False])
        .with_columns((pl.col("idle_us") / idle_us).alias("share"))
    )
    sites = (
        ic["call_sites"]
        .filter(pl.col("rank") == r)
        .sort(["idle_us", "call_site"], descending=[True, False])
        .group_by("cause", maintain_order=True)
        .first()
    )
    top_site = dict(sites.select("cause", "call_site").iter_rows())
    _, replays = ctx.on_rank(_idle_graph_facts, r)
    named = [
        f"{c} {100 * sh:.0f}%" + (f" ({top_site[c]})" if top_site.get(c) else "")
        for c, sh in causes.select("cause", "share").head(3).iter_rows()
    ]
    longest = (
        ic["gaps"]
        .filter((pl.col("rank") == r) & pl.col("in_span"))
        .head(5)
        .select("start_ns", "end_ns", "dur_us", "cause", "call_site", "detail")
    )
    impact = idle_us / span_us if span_us else 0.0
    return Finding(
        rule="idle-causes",
        title="The GPU waits: the causes of its idle time",
        severity=_sev(impact, 0.50, 0.25),
        impact=_r(impact, 4),
        ranks=[r],
        summary=f"rank {r}: the GPU is idle {100 * impact:.0f}% of its span ({idle_us / 1e3:.1f} ms of "
        f"{span_us / 1e3:.1f} ms; the trace has no steps); why: {', '.join(named)}",
        evidence={
            "idle_by_cause_us": {c: _r(v) for c, v in causes.select("cause", "idle_us").iter_rows()},
            "idle_share_by_cause_pct": {c: _r(100 * sh) for c, sh in causes.select("cause", "share").iter_rows()},
            "top_call_sites": top_site,
            "replays_graphs": replays,
            "longest_idle": [
                {k: (_r(v) if isinstance(v, float) else v) for k, v in x.items()} for x in longest.iter_rows(named=True)
            ],
            "threshold_pct": IDLE_STEP_PCT,
            "definition": "temporal idle_pct over the GPU span (no steps); causes: idle-causes by_rank",
        },
        fixes=[
            _idle_fix(c, top_site.get(c), None, replays)
            for c, sh in causes.select("cause", "share").iter_rows()
            if sh >= IDLE_FIX_SHARE
        ],
    )


RULES.append(rule_idle_causes)


# ---- inference: serving steps and CUDA/HIP graphs (issue 23; docs/serving.md, docs/graphs.md) -----------

#: ``host-bound-serving`` fires when the GPU is idle this share (%) of the judged serving time (every step's GPU
#: span plus the gap to the next step's first GPU work).
SERVING_IDLE_PCT = 20.0
#: ``decode-outside-graphs``: decode steps with at least this many GPU activities and no graph launch.
EAGER_DECODE_MIN_ACTIVITIES = 20
#: ``small-decode-batch``: a decode batch below this many requests (the M of a 16×16 matrix-core tile:
#: fewer rows leave the tile part empty) whose step keeps the GPU busy less than half of its span.
SMALL_DECODE_BATCH = 16
SMALL_DECODE_BUSY_PCT = 50.0
#: ... and such steps are at least this share of the decode steps.
SMALL_DECODE_SHARE = 0.25
_INFERENCE_FIXES_HOST = (
    "overlap the scheduler with the GPU: vLLM's async scheduling (`--async-scheduling`), SGLang's overlap "
    "scheduler (on unless `--disable-overlap-schedule`)"
)


def _mean(col: pl.Series) -> float:
    """The mean of a numeric column (0.0 when it has no value)."""
    m = col.mean()
    return float(m) if m is not None else 0.0  # type: ignore[arg-type]


def _python_frames(trace: Trace) -> int:
    """``python_function`` events recorded (``with_stack=True``: the profiler's own host overhead)."""
    return trace.kind("python_function", columns=["row"]).height


def _serving_steps(ctx: Context) -> pl.DataFrame | None:
    res = ctx.result("serving")
    return None if res is None else res["steps"]


def rule_host_bound_serving(ctx: Context) -> list[Finding]:
    """Serving steps (``serving``) whose GPU is idle ≥ 20 % of the judged time: each step's GPU span (first
    to last GPU activity launched in it, ``gpu_ms``) plus the gap to the next step's first GPU work
    (``gpu_idle_between_ms``); idle = span − ``gpu_busy_ms`` + that gap.

    Applies to inference runs only (``APPLIES``); not to capture-only traces. Contradicting facts, checked:
    no serving steps (no finding); the GPU time before a step's first GPU work is not counted (work launched
    before the profiling window, or launch latency); the CUDA-graph fix only for ranks that do not replay
    graphs and that run decode steps; Python frames recorded (``with_stack``) inflate host time: said in the
    evidence and a fix."""
    steps = _serving_steps(ctx)
    if steps is None:
        return []
    out = []
    steps_by = RankSlices(steps)
    for r in ctx.ranks:
        s = steps_by[r].filter(pl.col("gpu_ms").is_not_null())
        if s.height == 0:
            continue
        between = float(s["gpu_idle_between_ms"].fill_null(0).sum())
        span = float(s["gpu_ms"].sum())
        busy = float(s["gpu_busy_ms"].fill_null(0).sum())
        judged = span + between
        idle = span - busy + between
        if judged <= 0 or 100 * idle / judged < SERVING_IDLE_PCT:
            continue
        share = idle / judged
        frames = ctx.on_rank(_python_frames, r)
        replays = ctx.replays_graphs(r)
        by_phase = (
            s.group_by(pl.col("phase").fill_null("unknown"))
            .agg(pl.len().alias("steps"), pl.col("gpu_busy_pct").mean(), pl.col("host_gap_ms").mean())
            .sort("phase")
        )
        fixes = [_INFERENCE_FIXES_HOST]
        if not replays and (s["phase"] == "decode").any():
            fixes.append(
                "run decode steps as CUDA/HIP graphs (vLLM without `--enforce-eager`; SGLang without "
                "`--disable-cuda-graph`): one launch per step instead of one per kernel"
            )
        fixes.append(
            "cut per-step Python work on the scheduler thread: sampling and stop checks on the GPU, detokenisation "
            "off the engine loop, fewer small host↔device copies per step"
        )
        if frames:
            fixes.insert(
                0,
                f"check the profile first: {frames:,} Python frames were recorded (with_stack=True adds host time to "
                "every call); profile again without with_stack and compare the host time",
            )
        out.append(
            Finding(
                rule="host-bound-serving",
                title="Serving is host-bound: the GPU waits between and inside engine steps",
                severity=_sev(share, 0.50, 0.30),
                impact=_r(share, 4),
                ranks=[r],
                summary=f"rank {r}: the GPU is idle {100 * share:.0f}% of {s.height} serving step(s) "
                f"({idle:.1f} ms of {judged:.1f} ms: {span - busy:.1f} ms inside the steps' GPU spans, "
                f"{between:.1f} ms between steps)",
                evidence={
                    "steps": s.height,
                    "gpu_span_ms": _r(span, 3),
                    "gpu_busy_ms": _r(busy, 3),
                    "idle_inside_steps_ms": _r(span - busy, 3),
                    "idle_between_steps_ms": _r(between, 3),
                    "host_gap_ms_mean": _r(_mean(s["host_gap_ms"]), 3)
                    if s["host_gap_ms"].drop_nulls().len()
                    else "no next step in the trace",
                    "by_phase": {
                        str(p): {"steps": int(n), "gpu_busy_pct_mean": _r(float(b or 0.0))}
                        for p, n, b, _ in by_phase.iter_rows()
                    },
                    "python_frames_recorded": frames,
                    "replays_graphs": replays,
                    "threshold_pct": SERVING_IDLE_PCT,
                    "definition": "serving steps: idle = gpu_ms − gpu_busy_ms + gpu_idle_between_ms (docs/serving.md)",
                },
                fixes=fixes,
            )
        )
    return out


def rule_decode_outside_graphs(ctx: Context) -> list[Finding]:
    """Decode steps (``serving`` phase ``decode``) that launch ≥ 20 GPU activities and no CUDA/HIP graph:
    each kernel pays a launch from Python, where a graph replay pays one.

    Applies to inference runs only; not to capture-only traces. Contradicting facts, checked: a decode step
    that launches a graph (``graph_launches`` > 0) is not counted, nor one with fewer activities (sampling
    only); prefill and mixed steps are not judged (engines often run them eagerly on purpose)."""
    steps = _serving_steps(ctx)
    if steps is None:
        return []
    out = []
    steps_by = RankSlices(steps)
    for r in ctx.ranks:
        dec = steps_by[r].filter(pl.col("phase") == "decode")
        if dec.height == 0:
            continue
        eager = dec.filter((pl.col("graph_launches") == 0) & (pl.col("activities") >= EAGER_DECODE_MIN_ACTIVITIES))
        if eager.height == 0:
            continue
        all_ms = float(steps_by[r]["step_ms"].sum())
        eager_ms = float(eager["step_ms"].sum())
        impact = eager_ms / all_ms if all_ms else 0.0
        sizes = sorted({int(b) for b in eager["batch_size"].drop_nulls().to_list()})
        out.append(
            Finding(
                rule="decode-outside-graphs",
                title="Decode steps run outside CUDA/HIP graphs",
                severity=_sev(impact, 0.50, 0.25),
                impact=_r(impact, 4),
                ranks=[r],
                summary=f"rank {r}: {eager.height} of {dec.height} decode steps launch their "
                f"{int(eager['activities'].sum()):,} kernels one by one (no graph launch; batch sizes "
                f"{', '.join(map(str, sizes)) or 'not annotated'}), {100 * impact:.0f}% of the step time",
                evidence={
                    "decode_steps": dec.height,
                    "eager_decode_steps": eager.height,
                    "eager_step_ms": _r(eager_ms, 3),
                    "activities_per_eager_step": _r(_mean(eager["activities"]), 1),
                    "eager_batch_sizes": sizes,
                    "replays_graphs_elsewhere": int(dec["graph_launches"].sum()) > 0,
                    "min_activities": EAGER_DECODE_MIN_ACTIVITIES,
                },
                fixes=[
                    "vLLM: do not pass `--enforce-eager`, and capture every decode batch size seen "
                    "(`cudagraph_capture_sizes` in the compilation config; batches above the largest captured size "
                    "run eagerly)",
                    "SGLang: do not pass `--disable-cuda-graph`; raise `--cuda-graph-max-bs` above the decode batch "
                    "sizes seen",
                    "then profile the capture and pass it with --capture to see each replayed kernel's operator "
                    "(`ranksight analyze graphs`)",
                ],
            )
        )
    return out


def rule_small_decode_batch(ctx: Context) -> list[Finding]:
    """Decode steps with fewer than 16 requests whose GPU is busy less than half of the step's GPU span,
    when they are ≥ 25 % of the decode steps: the batch is too small to keep the GPU working.

    Applies to inference runs only; not to capture-only traces. Contradicting facts, checked: decode steps
    whose batch size is not annotated are not judged; a small batch on a busy GPU (≥ 50 %) is not a finding
    (the GPU is not idle)."""
    steps = _serving_steps(ctx)
    if steps is None:
        return []
    out = []
    steps_by = RankSlices(steps)
    for r in ctx.ranks:
        dec = (
            steps_by[r]
            .filter((pl.col("phase") == "decode") & pl.col("batch_size").is_not_null())
            .with_columns((100 * pl.col("gpu_busy_ms") / pl.col("gpu_ms")).alias("__busy"))
        )
        if dec.height == 0:
            continue
        small = dec.filter((pl.col("batch_size") < SMALL_DECODE_BATCH) & (pl.col("__busy") < SMALL_DECODE_BUSY_PCT))
        share = small.height / dec.height
        if small.height == 0 or share < SMALL_DECODE_SHARE:
            continue
        idle_ms = float((small["gpu_ms"] - small["gpu_busy_ms"]).sum())
        all_ms = float(dec["gpu_ms"].sum())
        impact = idle_ms / all_ms if all_ms else 0.0
        out.append(
            Finding(
                rule="small-decode-batch",
                title="Small decode batches leave the GPU idle",
                severity=_sev(impact, 0.50, 0.25),
                impact=_r(impact, 4),
                ranks=[r],
                summary=f"rank {r}: {small.height} of {dec.height} decode steps run fewer than {SMALL_DECODE_BATCH} "
                f"requests (mean {_mean(small['batch_size']):.1f}) and keep the GPU busy only "
                f"{_mean(small['__busy']):.0f}% of their GPU span",
                evidence={
                    "decode_steps": dec.height,
                    "small_steps": small.height,
                    "batch_sizes": {
                        str(b): int(n) for b, n in small.group_by("batch_size").len().sort("batch_size").iter_rows()
                    },
                    "gpu_busy_pct_mean": _r(_mean(small["__busy"])),
                    "idle_ms_in_small_steps": _r(idle_ms, 3),
                    "threshold_batch": SMALL_DECODE_BATCH,
                    "threshold_busy_pct": SMALL_DECODE_BUSY_PCT,
                },
                fixes=[
                    "batch more requests per decode step when latency allows: raise the concurrency limit (vLLM "
                    "`--max-num-seqs`, SGLang `--max-running-requests`) and send more concurrent requests",
                    "if the load is this low by nature, the GPU is idle by design: a smaller GPU, or more model "
                    "replicas per GPU, uses it better",
                    _INFERENCE_FIXES_HOST,
                ],
            )
        )
    return out


def rule_capture_as_run(ctx: Context) -> list[Finding]:
    """A capture-only trace given as if it were a run (``run-context`` graphs ``capture``): its launches were
    recorded into CUDA/HIP graphs, not executed, so its GPU time says nothing about the workload.

    Judged on every context, capture traces included (it exists for them). Contradicting facts, checked: a
    trace that also replays graphs (``capture+replay``) measures the replay and is not a finding; no launch
    recorded under capture, no finding."""
    out = []
    for r in ctx.ranks:
        c = ctx.run_context(r)
        if c is None or c.graphs != "capture" or not c.captured_launches:
            continue
        api = c.graph_api or "CUDA"
        out.append(
            Finding(
                rule="capture-as-run",
                title=f"This is a {api} graph capture, not a run",
                severity="medium",
                impact=1.0,
                ranks=[r],
                summary=f"rank {r}: {c.graph_captures} graph capture(s): {c.captured_launches:,} launches were "
                "recorded into graphs and never ran, so GPU time and idle here are not the workload's",
                evidence={
                    "graph_captures": c.graph_captures,
                    "captured_launches": c.captured_launches,
                    "graph_api": api,
                    "mode": c.mode,
                    "evidence": c.evidence.get("graphs", ""),
                },
                fixes=[
                    "profile the replay (steps after warm-up and capture) and analyse that trace",
                    "pass this capture with --capture so the replayed kernels get their operators, modules and "
                    "shapes: `ranksight analyze graphs REPLAY --capture THIS` (and `analyze ops`)",
                ],
            )
        )
    return out


APPLIES["host-bound-serving"] = Applies(modes=("inference",))
APPLIES["decode-outside-graphs"] = Applies(modes=("inference",))
APPLIES["small-decode-batch"] = Applies(modes=("inference",))
APPLIES["capture-as-run"] = Applies(capture=True)
RULES.extend([rule_host_bound_serving, rule_decode_outside_graphs, rule_small_decode_batch, rule_capture_as_run])
