"""One merged Chrome-trace-format file for the whole job (``ranksight export --perfetto``).

Opens in Perfetto UI (ui.perfetto.dev) and chrome://tracing. Layout (docs/export.md):

- **One process per rank**: ``pid = rank + 1`` named ``rank R``, sorted by rank. Its threads are
  the rank's CPU threads (the one holding the ProfilerSteps first) and GPU streams, each with a
  ``tid`` unique in the file (``pid × stride + k``, stride 1000 or the next power of ten above a
  rank's thread count) and named ``thread T`` / ``GPU d stream s``.
- **Every event** of the selected ranks and steps whose phase is ``X``, ``i``/``I``, ``B`` or
  ``E`` and whose kind is not ``flow``, ``metadata`` or ``counter`` is written once, with its
  name and category; args: ``rank``, ``row`` (its position in the rank's traceEvents), and for
  the events that carry them ``correlation`` / ``External id`` made unique across ranks
  (``rank × 2**40 + id``) and the GPU ``device`` / ``stream``. Other args stay in the rank files.
- **Aligned clocks**: each rank's times are shifted by its clock offset (``alignment``: aligned =
  own time − offset); ``ts`` is µs from ``baseTimeNanoseconds`` (the earliest aligned start
  written) with the ns digits exact. The offsets are in the file's ``ranksight`` metadata.
- **Collectives**: flow arrows (``ph`` ``s``/``f``, ``cat`` ``collective``) from the kernel of
  the rank that arrived last to each other participant's kernel, at the moment the last one
  arrived (where the clocks disagree so the kernels do not overlap, from the earlier kernel's
  middle to the later one's).
- **Critical path**: a process ``critical path`` with the path's segments as slices (when the
  ``critical-path`` analysis is available).
- **Counters**: the tracks of ``ranksight counters`` (queue length per stream, memcpy/memset
  bandwidth per copy kind) under each rank's process.

The JSON is written in chunks of rows, each chunk's text built by polars string expressions (no
Python object per event), into a temporary file renamed into place when complete (gzip when the
name ends in ``.gz``).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import polars as pl

from ranksight.analyses import Session
from ranksight.errors import UsageError
from ranksight.io.output import atomic_path, check_output
from ranksight.report.aligned import (
    DEVICE_KINDS,
    Offsets,
    choose_window,
    clock_offsets,
    collective_links,
    critical_path,
    overlaps,
    rank_main_tid,
    step_table,
)

__all__ = ["write_perfetto", "PerfettoResult", "ID_STRIDE", "SCHEMA_NAME", "WRITTEN_PHASES", "SKIPPED_KINDS"]

SCHEMA_NAME = "ranksight-perfetto"
SCHEMA_VERSION = 1
#: ``correlation`` and ``External id`` in the merged file: ``rank × ID_STRIDE + id``.
ID_STRIDE = 1 << 40
#: Phases written (others are counted in the metadata's ``not_written``).
WRITTEN_PHASES = ("X", "i", "I", "B", "E")
#: Kinds not written (flows are the original launch arrows; metadata is written anew; counters
#: lose their values in the decoded table).
SKIPPED_KINDS = ("flow", "metadata", "counter")
#: Rows per chunk of text.
CHUNK_ROWS = 200_000
COUNTER_KINDS = ("queue", "bw")


@dataclass
class PerfettoResult:
    """What was written: events per rank (input events, each once), flows, counter points,
    critical-path segments, the time base and the offsets."""

    path: str
    ranks: list[int]
    events: dict[int, int]
    flows: int
    counters: dict[int, int]
    path_segments: int
    base_time_ns: int
    offsets_ns: dict[int, int]
    steps: list[int] | None
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


def _ts(ns: pl.Expr) -> pl.Expr:
    """Non-negative integer ns as exact µs text with 3 decimals."""
    return pl.concat_str((ns // 1000).cast(pl.String), pl.lit("."), (ns % 1000).cast(pl.String).str.zfill(3))


def _quoted(df: pl.DataFrame, col: str) -> pl.DataFrame:
    """``df`` with ``__q_<col>``: the JSON text of each distinct value (one dumps per distinct value)."""
    vals = df.get_column(col).cast(pl.String).fill_null("").unique().to_list()
    lut = pl.DataFrame(
        {col: vals, f"__q_{col}": [json.dumps(v, ensure_ascii=False) for v in vals]},
        schema={col: pl.String, f"__q_{col}": pl.String},
    )
    return df.with_columns(pl.col(col).cast(pl.String).fill_null("")).join(
        lut, on=col, how="left", maintain_order="left"
    )


class _Out:
    """Comma-separated JSON values into the open ``traceEvents`` array."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.first = True

    def lines(self, texts: pl.Series) -> None:
        if texts.len() == 0:
            return
        body = texts.str.join(",\n").item()
        self.f.write((("" if self.first else ",\n") + body).encode("utf-8"))
        self.first = False

    def objs(self, objs: Sequence[dict[str, Any]]) -> None:
        if objs:
            self.lines(pl.Series([json.dumps(o, ensure_ascii=False, separators=(",", ":")) for o in objs]))


def _rank_frame(trace: Any, lo: int | None, hi: int | None) -> tuple[pl.DataFrame, dict[str, int]]:
    """The rank's events to write (own clock) and the counts of those left out by reason."""
    lf = trace.scan().filter(overlaps(lo, hi))
    kind = pl.col("kind").cast(pl.String)
    ph = pl.col("ph").cast(pl.String)
    timed = pl.col("ts_ns").is_not_null()
    left = (
        lf.filter(timed)
        .select(
            kind.is_in(list(SKIPPED_KINDS)).sum().alias("skipped_kind"),
            (~kind.is_in(list(SKIPPED_KINDS)) & ~ph.is_in(list(WRITTEN_PHASES))).sum().alias("other_phase"),
        )
        .collect()
        .row(0, named=True)
    )
    df = (
        lf.filter(timed & ~kind.is_in(list(SKIPPED_KINDS)) & ph.is_in(list(WRITTEN_PHASES)))
        .select(
            "row",
            ph.alias("ph"),
            pl.col("cat").cast(pl.String).fill_null(""),
            pl.col("name").cast(pl.String).fill_null(""),
            kind.alias("kind"),
            "pid",
            "tid",
            "device",
            "stream",
            "ts_ns",
            "dur_ns",
            "correlation",
            "external_id",
        )
        .collect()
    )
    return df, {k: int(v or 0) for k, v in left.items()}


def _tracks(df: pl.DataFrame, main_tid: int | None, pid_out: int, stride: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``df`` with ``side, __kp, __kt`` (track key) and ``tid_out``; tracks ordered as the timeline's."""
    on_gpu = pl.col("kind").is_in(list(DEVICE_KINDS))
    df = df.with_columns(
        pl.when(on_gpu).then(pl.lit("gpu")).otherwise(pl.lit("cpu")).alias("side"),
        pl.when(on_gpu)
        .then(pl.coalesce(pl.col("device").cast(pl.Int64), pl.col("pid").cast(pl.Int64)))
        .otherwise(pl.col("pid").cast(pl.Int64))
        .fill_null(-1)
        .alias("__kp"),
        pl.when(on_gpu)
        .then(pl.coalesce(pl.col("stream"), pl.col("tid").cast(pl.Int64)))
        .otherwise(pl.col("tid").cast(pl.Int64))
        .fill_null(-1)
        .alias("__kt"),
    )
    main = main_tid if main_tid is not None else -2
    keys = (
        df.select("side", "__kp", "__kt")
        .unique()
        .with_columns(((pl.col("side") == "cpu") & (pl.col("__kt") == main)).alias("__m"))
        .sort(["__m", "side", "__kp", "__kt"], descending=[True, False, False, False])
        .with_columns((pid_out * stride + 1 + pl.int_range(pl.len(), dtype=pl.Int64)).alias("tid_out"))
        .drop("__m")
    )
    return df.join(keys, on=["side", "__kp", "__kt"], how="left", maintain_order="left"), keys


def _event_texts(df: pl.DataFrame, rank: int, pid_out: int, shift: int) -> pl.Series:
    """JSON text of each event (``shift``: own clock → file time, ns)."""
    df = _quoted(_quoted(df, "name"), "cat")
    t = pl.col("ts_ns") - shift
    on_gpu = pl.col("side") == "gpu"
    ph = pl.col("ph")
    head = pl.concat_str(
        pl.lit('{"ph":"'),
        pl.when(ph == "I").then(pl.lit("i")).otherwise(ph),
        pl.lit('"'),
        pl.when(ph.is_in(["i", "I"])).then(pl.lit(',"s":"t"')).otherwise(pl.lit("")),
        pl.lit(',"cat":'),
        pl.col("__q_cat"),
        pl.lit(',"name":'),
        pl.col("__q_name"),
        pl.lit(f',"pid":{pid_out},"tid":'),
        pl.col("tid_out").cast(pl.String),
        pl.lit(',"ts":'),
        _ts(t),
    )
    dur = pl.when(ph == "X").then(pl.concat_str(pl.lit(',"dur":'), _ts(pl.col("dur_ns").fill_null(0).clip(0))))
    corr = pl.when(pl.col("correlation").is_not_null()).then(
        pl.concat_str(pl.lit(',"correlation":'), (pl.col("correlation") + rank * ID_STRIDE).cast(pl.String))
    )
    ext = pl.when(pl.col("external_id").is_not_null()).then(
        pl.concat_str(pl.lit(',"External id":'), (pl.col("external_id") + rank * ID_STRIDE).cast(pl.String))
    )
    gpu = pl.when(on_gpu).then(
        pl.concat_str(
            pl.lit(',"device":'),
            pl.col("__kp").cast(pl.String),
            pl.lit(',"stream":'),
            pl.col("__kt").cast(pl.String),
        )
    )
    args = pl.concat_str(
        pl.lit(f',"args":{{"rank":{rank},"row":'),
        pl.col("row").cast(pl.String),
        corr,
        ext,
        gpu,
        pl.lit("}}"),
        ignore_nulls=True,
    )
    return df.select(pl.concat_str(head, dur, args, ignore_nulls=True).alias("t")).to_series()


def _counter_points(trace: Any, kinds: Sequence[str]) -> pl.DataFrame:
    """Counter points of one rank (``name, arg, ts_ns, value``, own clock) as ``ranksight counters`` has them."""
    from ranksight.analyses.memcpy_bw import bw_series, copies
    from ranksight.analyses.queue import queue_series

    parts = []
    if "queue" in kinds:
        q = queue_series(trace)
        if q.height:
            parts.append(
                q.select(
                    pl.concat_str(pl.lit("Queue Length (stream "), pl.col("stream").cast(pl.String), pl.lit(")")).alias(
                        "name"
                    ),
                    pl.lit("Queue Length").alias("arg"),
                    "ts_ns",
                    pl.col("queue_length").cast(pl.Float64).alias("value"),
                )
            )
    if "bw" in kinds:
        s = bw_series(copies(trace))
        if s.height:
            parts.append(
                s.select(
                    (pl.col("copy_kind") + pl.lit(" bandwidth (GB/s)")).alias("name"),
                    pl.lit("GB/s").alias("arg"),
                    "ts_ns",
                    pl.col("bw_gbps").clip(lower_bound=0.0).round(6).alias("value"),
                )
            )
    if not parts:
        return pl.DataFrame(schema={"name": pl.String, "arg": pl.String, "ts_ns": pl.Int64, "value": pl.Float64})
    df = pl.concat(parts).filter(pl.col("value").is_not_null()).sort(["name", "ts_ns"], maintain_order=True)
    return df.unique(["name", "ts_ns"], keep="last", maintain_order=True)


def _counter_texts(df: pl.DataFrame, pid_out: int, shift: int) -> pl.Series:
    df = _quoted(_quoted(df, "name"), "arg")
    val = pl.col("value")
    num = pl.when(val == val.round(0)).then(val.cast(pl.Int64).cast(pl.String)).otherwise(val.cast(pl.String))
    return df.select(
        pl.concat_str(
            pl.lit('{"ph":"C","name":'),
            pl.col("__q_name"),
            pl.lit(f',"pid":{pid_out},"ts":'),
            _ts(pl.col("ts_ns") - shift),
            pl.lit(',"args":{'),
            pl.col("__q_arg"),
            pl.lit(":"),
            num,
            pl.lit("}}"),
        )
    ).to_series()


def _flow_texts(links: pl.DataFrame, tids: pl.DataFrame, base: int) -> pl.DataFrame:
    """Flow pairs for the collectives' kernels (aligned times): one ``s``/``f`` pair per
    participant other than the last to arrive; columns ``s``, ``f`` (JSON texts)."""
    p = links.join(tids, on=["rank", "row"], how="inner")
    p = p.filter(pl.len().over("instance") >= 2)
    if p.height == 0:
        return pl.DataFrame(schema={"s": pl.String, "f": pl.String})
    # the source: the participant of the late rank, else the one that started last
    src = (
        p.with_columns((pl.col("rank") == pl.col("late_rank")).alias("__late"))
        .sort(["instance", "__late", "start_ns", "rank"], descending=[False, True, True, False])
        .group_by("instance", maintain_order=True)
        .first()
        .select(
            "instance",
            pl.col("rank").alias("s_rank"),
            pl.col("row").alias("s_row"),
            pl.col("pid_out").alias("s_pid"),
            pl.col("tid_out").alias("s_tid"),
            pl.col("start_ns").alias("s_start"),
            pl.col("end_ns").alias("s_end"),
        )
    )
    d = p.join(src, on="instance").filter(~((pl.col("rank") == pl.col("s_rank")) & (pl.col("row") == pl.col("s_row"))))
    t = pl.max_horizontal("start_ns", "s_start") + 1
    overlap = (t + 1) < pl.min_horizontal("end_ns", "s_end")
    s_mid = pl.col("s_start") + (pl.col("s_end") - pl.col("s_start")) // 2
    d_mid = pl.col("start_ns") + (pl.col("end_ns") - pl.col("start_ns")) // 2
    src_first = pl.col("s_start") <= pl.col("start_ns")
    d = d.with_columns(
        overlap.alias("__ov"),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("__id"),
        (pl.col("coll_type") + pl.lit(" #") + pl.col("instance").cast(pl.String)).alias("__name"),
    ).with_columns(
        # which end starts the arrow, and the two times
        pl.when(pl.col("__ov") | src_first).then(pl.lit(True)).otherwise(pl.lit(False)).alias("__fwd"),
        pl.when(pl.col("__ov")).then(t).otherwise(pl.when(src_first).then(s_mid).otherwise(d_mid)).alias("__ts_s"),
        pl.when(pl.col("__ov")).then(t + 1).otherwise(pl.when(src_first).then(d_mid).otherwise(s_mid)).alias("__ts_f"),
    )
    d = d.with_columns(pl.max_horizontal("__ts_f", pl.col("__ts_s") + 1).alias("__ts_f"))
    d = _quoted(d, "__name")

    def text(ph: str, pid: pl.Expr, tid: pl.Expr, ts: str) -> pl.Expr:
        return pl.concat_str(
            pl.lit(f'{{"ph":"{ph}","cat":"collective","name":'),
            pl.col("__q___name"),
            pl.lit(',"id":'),
            pl.col("__id").cast(pl.String),
            pl.lit(',"pid":'),
            pid.cast(pl.String),
            pl.lit(',"tid":'),
            tid.cast(pl.String),
            pl.lit(',"ts":'),
            _ts(pl.col(ts) - base),
            pl.lit(',"bp":"e"}' if ph == "f" else "}"),
        )

    fwd = pl.col("__fwd")
    return d.select(
        text(
            "s",
            pl.when(fwd).then(pl.col("s_pid")).otherwise(pl.col("pid_out")),
            pl.when(fwd).then(pl.col("s_tid")).otherwise(pl.col("tid_out")),
            "__ts_s",
        ).alias("s"),
        text(
            "f",
            pl.when(fwd).then(pl.col("pid_out")).otherwise(pl.col("s_pid")),
            pl.when(fwd).then(pl.col("tid_out")).otherwise(pl.col("s_tid")),
            "__ts_f",
        ).alias("f"),
    )


def write_perfetto(
    run: Any,
    path: str,
    *,
    steps: Sequence[int] | None = None,
    ranks: Sequence[int] | None = None,
    counters: Sequence[str] = COUNTER_KINDS,
    force: bool = False,
) -> PerfettoResult:
    """Write the merged trace of ``run`` (a Run or a Session) to ``path``; see the module doc.

    ``steps``: only events overlapping these ProfilerSteps' windows (aligned; from the first
    step's start to the last one's end); ``ranks``: only these ranks (the clock offsets are
    still estimated from all loaded ranks). Never writes over an input; an existing file only
    with ``force``."""
    sess = Session.of(run)
    bad = [k for k in counters if k not in COUNTER_KINDS]
    if bad:
        raise UsageError(f"unknown counter kind(s) {bad}; choose from {', '.join(COUNTER_KINDS)}")
    chosen = list(sess.ranks) if ranks is None else sorted(set(ranks))
    missing = [r for r in chosen if r not in sess.ranks]
    if missing:
        raise UsageError(f"rank(s) {missing} not loaded; loaded: {', '.join(map(str, sess.ranks))}")
    inputs = [sess.trace(r).path for r in sess.ranks]
    check_output(path, inputs=inputs, force=force)
    offsets = clock_offsets(sess)
    notes = list(offsets.notes)
    lo = hi = None
    step_list: list[int] | None = None
    if steps:
        st, spans = step_table(sess, offsets)
        wins = [choose_window(st, spans, int(s)) for s in sorted(set(steps))]
        lo, hi = min(w.lo_ns for w in wins), max(w.hi_ns for w in wins)
        step_list = [int(w.step) for w in wins if w.step is not None]
    # the time base: the earliest aligned start written
    base, stride = _base_time(sess, chosen, offsets, lo, hi)
    gz = path.endswith(".gz")
    res = PerfettoResult(path, chosen, {}, 0, {}, 0, base, {r: offsets.offset_ns.get(r, 0) for r in chosen}, step_list)
    not_written: dict[str, int] = {"skipped_kind": 0, "other_phase": 0}
    rank_meta: list[dict[str, Any]] = []
    tid_maps: list[pl.DataFrame] = []
    with atomic_path(path, suffix=".json.gz.tmp" if gz else ".json.tmp", mode=0o644) as tmp:
        raw = open(tmp, "wb")  # noqa: SIM115 (closed below, after the gzip layer)
        f: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if gz else raw  # type: ignore[assignment]
        try:
            # no displayTimeUnit: Perfetto reads "ns" there as the unit of ``ts`` (µs here)
            f.write(b'{"traceEvents":[\n')
            out = _Out(f)
            links = collective_links(sess, lo, hi) if len(sess.ranks) > 1 else None
            for r in chosen:
                trace = sess.trace(r)
                off = offsets.offset_ns.get(r, 0)
                pid_out = r + 1
                df, left = _rank_frame(trace, None if lo is None else lo + off, None if hi is None else hi + off)
                for k, v in left.items():
                    not_written[k] += v
                df, keys = _tracks(df, rank_main_tid(trace), pid_out, stride)
                out.objs(_process_meta(r, pid_out, keys, trace))
                for i in range(0, df.height, CHUNK_ROWS):
                    out.lines(_event_texts(df.slice(i, CHUNK_ROWS), r, pid_out, off + base))
                res.events[r] = df.height
                if links is not None and links.height:
                    mine = links.filter(pl.col("rank") == r).select("row")
                    tid_maps.append(
                        df.join(mine, on="row", how="inner").select(
                            pl.lit(r, pl.Int32).alias("rank"),
                            pl.col("row").cast(pl.UInt32),
                            pl.lit(pid_out, pl.Int64).alias("pid_out"),
                            "tid_out",
                        )
                    )
                del df
                pts = _counter_points(trace, counters) if counters else None
                n_pts = 0
                if pts is not None and pts.height:
                    if lo is not None and hi is not None:
                        pts = pts.filter((pl.col("ts_ns") >= lo + off) & (pl.col("ts_ns") < hi + off))
                    pts = pts.filter(pl.col("ts_ns") - off >= base)
                    out.lines(_counter_texts(pts, pid_out, off + base))
                    n_pts = pts.height
                res.counters[r] = n_pts
                rank_meta.append(
                    {
                        "rank": r,
                        "pid": pid_out,
                        "offset_ns": off,
                        "clock": offsets.clock.get(r, f"rank {r}"),
                        "file": os.path.basename(trace.path),
                        "events": res.events[r],
                        "counter_points": n_pts,
                    }
                )
            if links is not None and links.height and tid_maps:
                fl = _flow_texts(links, pl.concat(tid_maps), base)
                out.lines(pl.concat([fl["s"], fl["f"]]))
                res.flows = fl.height
            cp_note = _critical_path(sess, out, step_list, lo, hi, base, max(sess.ranks) + 2, stride, res)
            if cp_note:
                notes.append(cp_note)
            meta = {
                "schema": SCHEMA_NAME,
                "version": SCHEMA_VERSION,
                "base_time_ns": base,
                "aligned": offsets.source == "collectives",
                "ranks": rank_meta,
                "steps": step_list,
                "window_ns": None if lo is None else [lo, hi],
                "id_stride": ID_STRIDE,
                "tid_stride": stride,
                "flows": res.flows,
                "critical_path_segments": res.path_segments,
                "counters": list(counters),
                "not_written": not_written,
                "notes": notes,
            }
            other = {
                "generator": "ranksight",
                "ranks": ",".join(map(str, chosen)),
                "clock_offsets_ns": " ".join(f"{m['rank']}:{m['offset_ns']}" for m in rank_meta),
                "steps": "all" if step_list is None else ",".join(map(str, step_list)),
            }
            # otherData first: Perfetto's reader stops at the first top-level key it does not know
            tail = (
                f'\n],\n"otherData":{json.dumps(other, ensure_ascii=False)},\n"baseTimeNanoseconds":{base},\n'
                f'"ranksight":{json.dumps(meta, ensure_ascii=False)}}}\n'
            )
            f.write(tail.encode("utf-8"))
        finally:
            f.close()
            if gz:
                raw.close()
    res.notes = notes
    res.bytes = os.path.getsize(path)
    return res


def _base_time(
    sess: Session, ranks: Sequence[int], offsets: Offsets, lo: int | None, hi: int | None
) -> tuple[int, int]:
    """The earliest aligned start among the events to write (0 when there are none) and the
    ``tid`` stride: a power of ten above every rank's number of tracks (at least 1000)."""
    per = sess.map(_rank_first_start, ranks=ranks, lo=lo, hi=hi, offsets=dict(offsets.offset_ns))
    vals = [v for v, _ in per.values() if v is not None]
    tracks = max((n for _, n in per.values()), default=0)
    stride = 1000
    while stride <= tracks + 1:
        stride *= 10
    if (max(ranks, default=0) + 3) * stride >= 1 << 32:
        raise UsageError(
            f"too many ranks and threads for one trace file ({len(ranks)} ranks, up to {tracks} threads and streams "
            "per rank: thread ids would not fit 32 bits); select ranks with --rank"
        )
    return (min(vals) if vals else 0), stride


def _rank_first_start(trace: Any, lo: int | None, hi: int | None, offsets: dict[int, int]) -> tuple[int | None, int]:
    """The rank's earliest aligned start to write and an upper bound of its tracks."""
    off = offsets.get(trace.rank, 0)
    lf = trace.scan().filter(
        pl.col("ts_ns").is_not_null()
        & ~pl.col("kind").cast(pl.String).is_in(list(SKIPPED_KINDS))
        & pl.col("ph").cast(pl.String).is_in(list(WRITTEN_PHASES))
    )
    lf = lf.filter(overlaps(None if lo is None else lo + off, None if hi is None else hi + off))
    v, n = (
        lf.select(
            pl.col("ts_ns").min(),
            (pl.struct("pid", "tid").n_unique() + pl.struct("device", "stream").n_unique()).alias("n"),
        )
        .collect()
        .row(0)
    )
    return (None if v is None else int(v) - off), int(n or 0)


def _process_meta(rank: int, pid_out: int, keys: pl.DataFrame, trace: Any) -> list[dict[str, Any]]:
    """Process and thread names and sort indices of one rank (one object per thread: a handful)."""
    host = getattr(trace.meta, "host_name", None)
    out: list[dict[str, Any]] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": pid_out,
            "args": {"name": f"rank {rank}" + (f" ({host})" if host else "")},
        },
        {"ph": "M", "name": "process_sort_index", "pid": pid_out, "args": {"sort_index": rank}},
    ]
    for i, (side, kp, kt, tid) in enumerate(keys.select("side", "__kp", "__kt", "tid_out").iter_rows()):
        label = f"GPU {kp} stream {kt}" if side == "gpu" else f"thread {kt}"
        out.append({"ph": "M", "name": "thread_name", "pid": pid_out, "tid": tid, "args": {"name": label}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid_out, "tid": tid, "args": {"sort_index": i}})
    return out


def _critical_path(
    sess: Session,
    out: _Out,
    steps: list[int] | None,
    lo: int | None,
    hi: int | None,
    base: int,
    pid: int,
    stride: int,
    res: PerfettoResult,
) -> str | None:
    """The critical-path process (one slice per segment), or the reason it is absent."""
    todo: list[int | None] = list(steps) if steps else []
    if not todo:
        st, spans = step_table(sess, clock_offsets(sess))
        todo = [int(s) for s in sorted(set(st["step"].to_list()))] if st.height else [None]
    frames, reason = [], None
    for s in todo:
        seg, why = critical_path(sess, s)
        if seg is None:
            reason = why
            continue
        frames.append(seg.with_columns(pl.lit(s, pl.Int32).alias("__step")))
    if not frames:
        return reason
    seg = pl.concat(frames, how="vertical_relaxed")
    if lo is not None and hi is not None:
        seg = seg.filter(overlaps(lo, hi, "start_ns"))
    seg = seg.filter(pl.col("start_ns") >= base).sort("start_ns")
    tid = pid * stride + 1
    meta = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "critical path"}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "critical path"}},
    ]
    out.objs(meta)
    seg = _quoted(_quoted(seg.with_columns(pl.col("type").cast(pl.String)), "name"), "type")
    texts = seg.select(
        pl.concat_str(
            pl.lit('{"ph":"X","cat":"critical_path","name":'),
            pl.col("__q_name"),
            pl.lit(f',"pid":{pid},"tid":{tid},"ts":'),
            _ts(pl.col("start_ns") - base),
            pl.lit(',"dur":'),
            _ts((pl.col("end_ns") - pl.col("start_ns")).clip(0)),
            pl.lit(',"args":{"rank":'),
            pl.col("rank").cast(pl.String),
            pl.lit(',"row":'),
            pl.col("row").cast(pl.String).fill_null("null"),
            pl.lit(',"type":'),
            pl.col("__q_type"),
            pl.lit("}}"),
        )
    ).to_series()
    out.lines(texts)
    res.path_segments = seg.height
    return None
