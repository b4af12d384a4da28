"""Time per ``nn.Module``, from the module frames of ``with_stack=True`` traces.

A **module frame** is a ``python_function`` event with a ``Python module id`` arg (named
``nn.Module: <Class>_<n>``, one per forward call). Definitions (per rank):

- a frame's **parent module** is the innermost module frame on the same thread that encloses it
  in time (the same answer as walking ``Python parent id`` up to the nearest module frame);
  ``path`` joins the names from the root module down, e.g.
  ``DistributedDataParallel_0/TinyTransformer_0/TransformerEncoder_0/TransformerEncoderLayer_1``;
- ``host_total_us`` = Σ frame durations; ``host_self_us`` = that minus the durations of its
  direct child module frames;
- ``ops`` = ``cpu_op`` events whose innermost enclosing module frame is this one;
- ``device_self_us`` = Σ durations of the GPU activities (kernels, memcpys, memsets) launched by
  runtime/driver calls whose innermost enclosing module frame is this one (plain sums, as the TB
  plugin); ``device_total_us`` adds those of all descendant modules;
- rows are grouped by ``path``: ``calls`` counts frames (one per forward call); ``module`` is the
  class name with instance number, indented by ``depth``; rows are in order of first call.

Only forward calls are frames: backward work runs on the autograd thread outside any module
frame and is not attributed.

CUDA/HIP graph replays (``--capture``, ``docs/graphs.md``): the frames, ops and launches read are those of
:func:`ranksight.views.graph_attribution.attributed_operators`: the capture's module frames are copied
around the replayed kernels they launched, so a replayed kernel counts for the module that captured it.
Those copied frames did not run on the host during the replay: their ``host_*`` time is 0 and their
parent's self time is not reduced by them (the graph launch call holds that time). A capture without module
frames leaves the replayed kernels outside every module (a note says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._replay import CAPTURE_OPTION, replay_notes
from ranksight.analyses._session import Session
from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.views.enclosing import innermost_enclosing, parent_spans
from ranksight.views.graph_attribution import ReplayShare, attributed_operators, replay_copy_start

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["modules", "module_frames", "module_table"]

_PREFIX = "nn.Module: "


def module_frames(trace: Trace) -> pl.DataFrame:
    """Module frames with ``frame`` (0..n-1), ``parent`` (frame id or null), ``depth``, ``path``,
    ``ancestors`` (frame ids from the frame itself up to its root) and ``host_ns`` (the duration; 0 for a
    frame replayed from a graph, see the module doc)."""
    py = trace.kind("python_function").filter(pl.col("dur_ns").is_not_null())
    mods = trace.with_args(py.select("row", "tid", "ts_ns", "end_ns", "dur_ns", "name"), "op").filter(
        pl.col("python_module_id").is_not_null()
    )
    if mods.height == 0:
        return pl.DataFrame()
    f = mods.sort(["tid", "ts_ns", "end_ns"], descending=[False, False, True]).select(
        pl.int_range(0, pl.len(), dtype=pl.Int64).alias("frame"),
        "row",
        "tid",
        "ts_ns",
        "end_ns",
        "dur_ns",
        pl.col("name").cast(pl.String).str.strip_prefix(_PREFIX).alias("module"),
    )
    parent = parent_spans(f).cast(pl.Int64)
    copies = replay_copy_start(trace)
    host = pl.col("dur_ns") if copies is None else pl.when(pl.col("row") >= copies).then(0).otherwise("dur_ns")
    f = f.with_columns(parent.alias("parent"), host.alias("host_ns"))
    return _paths(f)


def _paths(f: pl.DataFrame) -> pl.DataFrame:
    """Walk parents level by level (a loop over tree depth; each level is vectorised)."""
    par, names = f["parent"], f["module"]
    path, depth = names, pl.Series([0] * f.height, dtype=pl.Int32)
    anc = f.select(pl.concat_list(pl.col("frame")).alias("a"))["a"]
    cur = par
    while cur.is_not_null().any():
        live = cur.is_not_null()
        idx = cur.fill_null(0)
        step = pl.DataFrame(
            {"live": live, "pname": names.gather(idx), "path": path, "cur": cur, "anc": anc, "up": par.gather(idx)}
        )
        step = step.select(
            pl.when("live").then(pl.col("pname") + "/" + pl.col("path")).otherwise("path").alias("path"),
            pl.when("live").then(pl.concat_list("anc", pl.col("cur"))).otherwise("anc").alias("anc"),
            pl.when("live").then(pl.col("up")).otherwise(None).alias("up"),
        )
        path, anc, cur = step["path"], step["anc"], step["up"]
        depth = depth + live.cast(pl.Int32)
    return f.with_columns(path.alias("path"), depth.alias("depth"), anc.alias("ancestors"))


def _device_per_launch(trace: Trace) -> pl.DataFrame:
    gpu = trace.kind(*GPU_KINDS, columns=["launch_row", "dur_ns"])  # the columns it reads, not a copy of all
    gpu = gpu.filter(pl.col("launch_row").is_not_null() & pl.col("dur_ns").is_not_null())
    dev = gpu.group_by("launch_row").agg(pl.col("dur_ns").sum().alias("gpu_ns"))
    launches = trace.kind(*LAUNCH_KINDS, columns=["row", "tid", "ts_ns"])
    return launches.join(dev, left_on="row", right_on="launch_row", how="inner")


def module_table(trace: Trace) -> pl.DataFrame | None:
    """Per module path: calls, host and device total/self time, op count (see module doc)."""
    f = module_frames(trace)
    if f.height == 0:
        return None
    spans = f.select("tid", "ts_ns", "end_ns")
    ops = trace.kind("cpu_op").select("tid", "ts_ns")
    op_frame = innermost_enclosing(spans, ops).cast(pl.Int64).drop_nulls()
    op_count = op_frame.value_counts().rename({op_frame.name: "frame", "count": "ops"})
    la = _device_per_launch(trace)
    la = la.with_columns(
        innermost_enclosing(spans, la.select("tid", "ts_ns")).cast(pl.Int64).alias("frame")
    ).drop_nulls("frame")
    dev_self = la.group_by("frame").agg(pl.col("gpu_ns").sum().alias("dev_self_ns"))
    dev_total = (
        la.join(f.select("frame", "ancestors"), on="frame")
        .explode("ancestors")
        .group_by("ancestors")
        .agg(pl.col("gpu_ns").sum().alias("dev_total_ns"))
        .rename({"ancestors": "frame"})
    )
    child = f.filter(pl.col("parent").is_not_null()).group_by("parent").agg(pl.col("host_ns").sum().alias("child_ns"))
    per = (
        f.join(child, left_on="frame", right_on="parent", how="left")
        .join(op_count.with_columns(pl.col("frame").cast(pl.Int64)), on="frame", how="left")
        .join(dev_self, on="frame", how="left")
        .join(dev_total, on="frame", how="left")
        .with_columns(pl.col("child_ns", "ops", "dev_self_ns", "dev_total_ns").fill_null(0))
    )
    has_gpu = trace.kind(*GPU_KINDS, columns=["row"]).height > 0
    out = (
        per.group_by("path")
        .agg(
            pl.col("module").first(),
            pl.col("depth").first(),
            pl.col("ts_ns").min().alias("__first"),
            pl.len().alias("calls"),
            (pl.col("host_ns").sum() / 1e3).alias("host_total_us"),
            ((pl.col("host_ns") - pl.col("child_ns")).sum() / 1e3).alias("host_self_us"),
            (pl.col("dev_total_ns").sum() / 1e3).alias("device_total_us"),
            (pl.col("dev_self_ns").sum() / 1e3).alias("device_self_us"),
            pl.col("ops").sum().alias("ops"),
        )
        .sort("__first")
        .select(
            pl.lit(trace.rank, dtype=pl.Int32).alias("rank"),
            (pl.lit("  ").repeat_by(pl.col("depth")).list.join("") + pl.col("module")).alias("module"),
            "calls",
            "host_total_us",
            "host_self_us",
            "device_total_us",
            "device_self_us",
            "ops",
            "depth",
            "path",
        )
    )
    if not has_gpu:
        out = out.with_columns(
            pl.lit(None, dtype=pl.Float64).alias("device_total_us"),
            pl.lit(None, dtype=pl.Float64).alias("device_self_us"),
        )
    return out


def _rank_modules(trace: Trace, capture: str | None = None) -> tuple[pl.DataFrame | None, ReplayShare, bool]:
    """One rank's module table (None without module frames), the share of replayed GPU time the capture
    attributes, and whether module frames came from the capture."""
    t, share = attributed_operators(trace, capture)
    copies = replay_copy_start(t)  # the copied python_function events are the capture's module frames
    copied = copies is not None and t.kind("python_function", columns=["row"]).filter(pl.col("row") >= copies).height
    return module_table(t), share, bool(copied)


def _no_copied_frames(rank: int, share: ReplayShare) -> str:
    """Why no module frame of the capture came along, from what the capture knows of its launches' modules."""
    if share.module_ns:
        return (
            f"rank {rank}: the capture's nn.Module frames enclose whole capture windows, none lies inside one: the "
            "GPU time replayed from graphs counts for the module frames that enclose the graph launch in the replay"
        )
    return (
        f"rank {rank}: the capture trace records no nn.Module frame around its captured launches (profile the "
        "capture with with_stack=True and with_modules=True): the GPU time replayed from graphs counts for the "
        "module frames that enclose the graph launch in the replay, if any"
    )


def modules(run: Run, *, ranks: Sequence[int] | None = None, capture: str | None = None) -> AnalysisResult:
    """Time per nn.Module (forward), per rank, in call-tree order."""
    from ranksight.errors import MissingDataError

    per = Session.of(run, ranks).map(_rank_modules, capture=capture)
    have = [p for p, _, _ in per.values() if p is not None]
    no_frames = [_no_copied_frames(r, s) for r, (_, s, copied) in per.items() if s.attributed_ns and not copied]
    if not have:
        raise MissingDataError(
            "no nn.Module frames in these traces (python_function events with 'Python module id'; "
            "profile with with_stack=True and with_modules=True)"
            + ("; nor in their graph capture traces" if no_frames else "")
        )
    notes = [f"rank {r}: no nn.Module frames" for r, (p, _, _) in per.items() if p is None]
    notes.append("forward calls only: backward runs outside module frames and is not attributed")
    notes += no_frames
    for _, s, copied in per.values():
        notes += replay_notes([s], "; the capture's module frames hold them, with no host time" if copied else "")
    return AnalysisResult({"modules": pl.concat(have, how="vertical_relaxed")}, notes)


register(
    AnalysisSpec(
        name="modules",
        func=modules,
        help="time per nn.Module (host and device, total and self) from module frames",
        options=(CAPTURE_OPTION,),
    )
)
