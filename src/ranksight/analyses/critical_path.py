"""Critical path: per rank (HTA's model) and across ranks (the job-wide path of a step).

Per rank (``docs/critical-path.md``): the graph of :mod:`ranksight.views.critical_graph` over a
window (a ProfilerStep with ``--step``, HTA's ``annotation``/``instance_id``, else the whole
trace), its longest path, and the path's edges attributed to events as HTA's
``get_critical_path_breakdown`` does. ``hta_compat=True`` gives HTA v0.6's numbers (golden-tested
on the four ``critical_path_*`` oracles); the default fixes what ``docs/hta-differences.md`` lists.

Across ranks: every rank's graph of the step (fixed model), on the aligned clock (the offsets of
``collectives.comm_data``), joined at every matched collective: a participant's collective kernel
is split into a wait (from its start until the last participant has started; weight 0) and a
transfer (from then to its end), and every participant's start points to the instance's ready
point, so a collective ends on each rank only after its last participant arrives (send/recv pairs
alike; gloo's CPU collectives too, from their ``gloo:*`` annotations, when each rank lists one
process group: :func:`_collective_nodes`, :func:`_gloo_links`). Each crossing of the path from one
rank to another at a collective is recorded (``waiting_on_rank`` on the segment, ``crossings``).
The longest path of the joined graph is the job's critical path; its edges become
segments that tile the step window (``rank, stream, tid, row, name, start_ns, end_ns, type,
category``), with the time per category (compute, communication, host, data loading, waiting on
another rank, idle) summing to the step time, and what-if estimates (see the docs for each
definition and what it ignores).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight import _core
from ranksight.analyses._base import AnalysisResult, AnalysisSpec, Option, register
from ranksight.analyses._session import Session
from ranksight.errors import MissingDataError, RanksightError
from ranksight.views.critical_graph import (
    BLOCKING_CALLS,
    DEPENDENCY,
    EDGE_TYPES,
    KERNEL_KERNEL,
    LAUNCH_DELAY,
    OPERATOR,
    SYNC,
    CriticalGraph,
    critical_graph,
    critical_graphs,
    hta_window,
    longest_path,
)
from ranksight.views.rank_slices import RankSlices, rank_column

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = [
    "DATA_LOAD_PATTERNS",
    "HTA_COMM_KERNEL_RE",
    "CATEGORIES",
    "rank_breakdown",
    "critical_path_segments",
    "job_path",
    "critical_path",
]

#: Event names that are data loading (PyTorch's DataLoader iterator record).
DATA_LOAD_PATTERNS = (r"^enumerate\(DataLoader\)#",)
#: ``rank not late`` what-if scenarios at most: the ranks with the most lateness summed over the
#: collectives they were last to (ties: the lower rank). Each is a replay of every rank's edges.
WHAT_IF_LATE_RANKS = 8
#: HTA's communication-kernel pattern (``is_comm_kernel``), compatibility mode only.
HTA_COMM_KERNEL_RE = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
#: Job-wide categories, in display order.
CATEGORIES = ("compute", "communication", "host", "data_loading", "waiting_on_rank", "idle")
#: Edge code for the cross-rank wait (job-wide graph only).
WAIT = 5

_BD_SCHEMA = {
    "rank": pl.Int32,
    "seq": pl.Int64,
    "type": pl.String,
    "category": pl.String,
    "bound_by": pl.String,
    "event_row": pl.Int64,
    "name": pl.String,
    "pid": pl.Int64,
    "tid": pl.Int64,
    "stream": pl.Int64,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "weight_us": pl.Float64,
    "span_us": pl.Float64,
}


def _step_window(trace: Trace, step: int) -> tuple[int, int] | None:
    st = trace.steps.filter(pl.col("step") == step)
    if st.height == 0:
        return None
    return int(st["start_ns"][0]), int(st["end_ns"][0])


def _window(
    trace: Trace, step: int | None, annotation: str | None, instance_id: int | tuple[int, int] | None
) -> tuple[int, int]:
    if annotation is not None:
        w = hta_window(trace, annotation, instance_id)
        if w is None:
            raise MissingDataError(f"rank {trace.rank}: no event name contains {annotation!r}")
        return w
    if step is not None:
        w = _step_window(trace, step)
        if w is None:
            raise MissingDataError(f"rank {trace.rank}: no ProfilerStep#{step}")
        return w
    w = hta_window(trace, "", None)
    if w is None:
        raise MissingDataError(f"rank {trace.rank}: no timed event")
    return w


def _attr_cols(stream_filled: bool = True) -> list[pl.Expr | str]:
    """The columns of the attributed events: name, pid, tid, stream (−1 on CPU threads: already
    so in a graph's events, filled when read from the trace), kind and kernel class."""
    return [
        pl.col("row").cast(pl.Int64),
        pl.col("name").cast(pl.String),
        pl.col("pid").cast(pl.Int64),
        pl.col("tid").cast(pl.Int64),
        "stream" if stream_filled else pl.col("stream").fill_null(-1),
        "kind",
        pl.col("kernel_class").cast(pl.String),
    ]


def _attributed(trace: Trace, rows: np.ndarray) -> pl.DataFrame:
    """Name, pid, tid, stream, kind and kernel class of the attributed events."""
    want = pl.Series("row", np.unique(rows[rows >= 0]), dtype=pl.Int64)
    return (
        trace.scan()
        .filter(pl.col("row").cast(pl.Int64).is_in(want.implode()))  # rows first, then the columns
        .select(_attr_cols(stream_filled=False))
        .collect()
    )


def _attributed_in(trace: Trace, g: CriticalGraph, rows: np.ndarray) -> pl.DataFrame:
    """:func:`_attributed`, read from the graph's events for the rows that have nodes (most) and
    from the trace for the others (call-stack parents without nodes)."""
    want = np.unique(rows[rows >= 0])
    have = g.events.select(_attr_cols()).filter(pl.col("row").is_in(pl.Series(want, dtype=pl.Int64).implode()))
    rest = np.setdiff1d(want, have["row"].to_numpy(), assume_unique=True)
    if rest.size == 0:
        return have
    more = _attributed(trace, rest)
    return pl.concat([have, more.cast(have.schema)]).sort("row")


def _attributed_many(graphs: dict[int, CriticalGraph], stacked: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """:func:`_attributed_in` of every rank's graph at once (the ranks' stacked events): equal
    frames, no query per rank."""
    rs = [r for r, g in graphs.items() if g.events.width]
    if not rs:
        return {}

    want = pl.concat(
        [pl.DataFrame([rank_column(r, graphs[r].edges.height), graphs[r].edges["attr_row"].alias("row")]) for r in rs]
    )
    want = want.filter(pl.col("row") >= 0).unique()
    events = pl.concat(
        [graphs[r].events.with_columns(rank_column(r, graphs[r].events.height)) for r in rs], how="vertical_relaxed"
    )
    have = events.select("rank", *_attr_cols()).join(want, on=["rank", "row"], how="semi")
    rest = want.join(have.select("rank", "row"), on=["rank", "row"], how="anti")
    if rest.height:
        more = (
            stacked.lazy()
            .select("rank", *_attr_cols(stream_filled=False))
            .join(rest.lazy(), on=["rank", "row"], how="semi")
            .collect()
        )
        have = pl.concat([have, more.cast(have.schema)])
    parts = RankSlices(have.sort(["rank", "row"]), drop=True)
    return {r: parts[r] for r in rs}


def _is_data_load(names: pl.Series, patterns: Sequence[str] | None) -> pl.Series:
    if not patterns:
        return pl.Series([False] * names.len())
    pats = [re.compile(p) for p in patterns]
    u = names.drop_nulls().unique()
    hit = [n for n in u.to_list() if any(p.search(n) for p in pats)]
    return names.is_in(hit).fill_null(False)


def rank_breakdown(
    trace: Trace,
    *,
    step: int | None = None,
    annotation: str | None = None,
    instance_id: int | tuple[int, int] | None = None,
    hta_compat: bool = False,
    data_load: Sequence[str] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """One rank's critical path, one row per path edge in path order (HTA's breakdown plus the
    edge's times, ``category`` and ``span_us``), and notes."""
    lo, hi = _window(trace, step, annotation, instance_id)
    if data_load is None and not hta_compat:
        data_load = DATA_LOAD_PATTERNS
    g = critical_graph(trace, lo, hi, hta_compat=hta_compat, data_load=data_load)
    try:
        p = longest_path(g)
    except ValueError as err:
        raise MissingDataError(f"rank {trace.rank}: the critical-path graph cannot be ordered: {err}") from err
    notes = [f"rank {trace.rank}: {n}" for n in g.notes]
    if p.height == 0:
        raise MissingDataError(f"rank {trace.rank}: no critical path (no CPU op, runtime call or kernel in the window)")
    attr = _attributed_in(trace, g, p["attr_row"].to_numpy())
    bd = p.join(attr.rename({"row": "attr_row"}), on="attr_row", how="left", maintain_order="left")  # path order
    code = bd["type"].to_numpy()
    on_gpu = (bd["stream"].fill_null(-1) != -1).to_numpy()
    names = bd["name"]
    if hta_compat:
        hits = [n for n in names.drop_nulls().unique().to_list() if HTA_COMM_KERNEL_RE.match(n)]  # once per name
        comm = names.is_in(hits).fill_null(False).to_numpy()
    else:
        comm = (bd["kernel_class"] == "COMMUNICATION").fill_null(False).to_numpy()
    dl = _is_data_load(names, data_load).to_numpy()
    weighted = np.isin(code, [OPERATOR, LAUNCH_DELAY, KERNEL_KERNEL])
    # labels chosen by index (np.select over strings, and numpy strings into polars, are slow)
    bound_labels = (
        "gpu_kernel_kernel_overhead",
        "gpu_kernel_launch_overhead",
        "",
        "data_loading",
        "cpu_bound",
        "gpu_communication_bound",
        "gpu_compute_bound",
    )
    bound_i = np.select(
        [
            code == KERNEL_KERNEL,
            code == LAUNCH_DELAY,
            ~weighted,
            ~on_gpu & dl,
            ~on_gpu,
            comm,
        ],
        [0, 1, 2, 3, 4, 5],
        6,
    )
    span = np.maximum(bd["dst_ts_ns"].to_numpy() - bd["src_ts_ns"].to_numpy(), 0)
    w = bd["weight_ns"].to_numpy()
    cat_labels = ("kernel_kernel_delay", "launch_delay", "sync", "idle", "kernel", "cpu_op")
    cat_i = np.select(
        [
            code == KERNEL_KERNEL,
            code == LAUNCH_DELAY,
            code == SYNC,
            code == DEPENDENCY,
            (code == OPERATOR) & on_gpu,
            (code == OPERATOR) & (w == 0) & (span > 0),
        ],
        [0, 1, 2, 3, 4, 2],
        5,
    )

    def labels(name: str, values: Sequence[str], i: np.ndarray) -> pl.Series:
        return pl.Series(name, values, dtype=pl.String).gather(i)

    out = bd.select(
        pl.lit(trace.rank, pl.Int32).alias("rank"),
        pl.col("step").alias("seq"),
        labels("type", EDGE_TYPES, code.astype(np.int64)),
        labels("category", cat_labels, cat_i),
        labels("bound_by", bound_labels, bound_i),
        pl.when(pl.col("attr_row") >= 0).then(pl.col("attr_row")).alias("event_row"),
        "name",
        "pid",
        "tid",
        "stream",
        pl.col("src_ts_ns").alias("start_ns"),
        pl.col("dst_ts_ns").alias("end_ns"),
        (pl.col("weight_ns") / 1e3).alias("weight_us"),
        pl.Series("span_us", span / 1e3),
    )
    return out.cast(_BD_SCHEMA), notes  # type: ignore[arg-type]


def _summaries(bd: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    summary = (
        bd.group_by("rank", "bound_by")
        .agg(pl.col("weight_us").sum().alias("time_us"))
        .with_columns((100 * pl.col("time_us") / pl.col("time_us").sum().over("rank")).alias("pct_of_critical_path"))
        .sort("rank", "bound_by")
    )
    by_type = (
        bd.group_by("rank", "category")
        .agg(pl.col("span_us").sum().alias("time_us"), pl.col("weight_us").sum().alias("weight_us"))
        .with_columns((100 * pl.col("time_us") / pl.col("time_us").sum().over("rank")).alias("pct_of_path_span"))
        .sort("rank", "time_us", "category", descending=[False, True, False])
    )
    by_op = (
        bd.filter(pl.col("event_row").is_not_null())
        .group_by("rank", "name", "category")
        .agg(pl.col("span_us").sum().alias("time_us"), pl.col("event_row").n_unique().alias("events"))
        .sort("rank", "time_us", "name", "category", descending=[False, True, False, False])
    )
    return summary, by_type, by_op


# ---- across ranks -------------------------------------------------------------------------------


def _rank_window(trace: Trace, step: int | None) -> tuple[int, int, tuple[int, int]] | None:
    """The job path's window of one rank (``lo, hi``: the step's CPU span, or the whole trace
    without a step) and its step span (CPU ∪ GPU, own clock); None when the rank lacks the step."""
    if step is None:
        lo, hi = _window(trace, None, None, None)
        return lo, hi, (lo, hi)
    st = trace.steps.filter(pl.col("step") == step)
    if st.height == 0:
        return None
    r = st.row(0, named=True)
    lo, hi = int(r["start_ns"]), int(r["end_ns"])
    gs, ge = r.get("gpu_start_ns"), r.get("gpu_end_ns")
    return lo, hi, (min(lo, gs) if gs is not None else lo, max(hi, ge) if ge is not None else hi)


def _rank_graph(trace: Trace, step: int | None) -> tuple[CriticalGraph, tuple[int, int] | None, pl.DataFrame]:
    """The fixed-model graph of one rank for the job path, the rank's step span (CPU ∪ GPU,
    own clock), and the events its edges are attributed to (:func:`_attributed`)."""
    w = _rank_window(trace, step)
    if w is None:
        return _empty_graph(trace.rank), None, _attributed(trace, np.array([], np.int64))
    g = critical_graph(trace, w[0], w[1], hta_compat=False, data_load=DATA_LOAD_PATTERNS, gloo=True)
    return g, w[2], _attributed_in(trace, g, g.edges["attr_row"].to_numpy())


def _rank_graphs(sess: Session, step: int | None) -> dict[int, Any]:
    """:func:`_rank_graph` of every rank: many small ranks in one pass over their stacked events
    (:func:`~ranksight.views.critical_graph.critical_graphs`, issue 19), else rank by rank."""
    stacked = sess.stacked_events()
    if stacked is not None:
        traces = {r: sess.trace(r) for r in sess.ranks}
        wins = {r: _rank_window(t, step) for r, t in traces.items()}
        graphs = critical_graphs(
            list(traces.values()),
            {r: (w[0], w[1]) for r, w in wins.items() if w is not None},
            stacked,
            data_load=DATA_LOAD_PATTERNS,
            gloo=True,
        )
        if graphs is not None:
            attributed = _attributed_many(graphs, stacked)
            out: dict[int, Any] = {}
            for r, t in traces.items():
                w = wins[r]
                if w is None:
                    out[r] = (_empty_graph(r), None, _attributed(t, np.array([], np.int64)))
                elif r in attributed:
                    out[r] = (graphs[r], w[2], attributed[r])
                else:
                    g = graphs[r]
                    out[r] = (g, w[2], _attributed_in(t, g, g.edges["attr_row"].to_numpy()))
            return out
    return sess.map(_rank_graph, step=step)


def _empty_graph(rank: int) -> CriticalGraph:
    from ranksight.views.critical_graph import _EDGE_SCHEMA

    nodes = pl.DataFrame(schema={"node": pl.Int64, "row": pl.Int64, "ts_ns": pl.Int64, "is_start": pl.Boolean})
    return CriticalGraph(rank, 0, 0, nodes, pl.DataFrame(schema=_EDGE_SCHEMA), pl.DataFrame(), False)


_LATE_SCHEMA = {"instance": pl.Int64, "rank": pl.Int32, "lateness_ns": pl.Int64}
_CROSSING_SCHEMA = {
    "instance": pl.Int64,
    "name": pl.String,
    "ready_ns": pl.Int64,
    "waited_for": pl.Int32,
    "rank": pl.Int32,
    "wait_ns": pl.Int64,
    "lateness_ns": pl.Int64,
}


@dataclass
class JobPath:
    """The job-wide critical path of one step (aligned clock)."""

    step: int | None
    lo_ns: int
    hi_ns: int
    segments: pl.DataFrame
    what_if: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    #: per matched instance, its last participant and that rank's lateness (start − median start,
    #: the stragglers analysis' definition): ``instance, rank, lateness_ns``
    late: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_LATE_SCHEMA))
    #: every collective instance at which the path goes from one rank to another, in path order:
    #: the path reaches the instance's ready point on ``waited_for`` (its last participant, whose
    #: start released the others) and leaves on ``rank``, whose instance had waited ``wait_ns``
    crossings: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=_CROSSING_SCHEMA))


def _choose_step(sess: Session) -> int | None:
    # many small ranks held here: their steps in one query
    stacked = sess.stacked_events() is not None
    per = _steps_many([sess.trace(r) for r in sess.ranks]) if stacked else sess.map(_steps_of)
    common: set[int] | None = None
    span: dict[int, int] = {}
    for st in per.values():
        s = {x for x, inc, _ in st if not inc}
        common = s if common is None else common & s
        for x, _, sp in st:
            span[x] = max(span.get(x, 0), sp)
    if not common:
        return None
    # the slowest complete step: the longest of the ranks' step spans (CPU and GPU)
    return max(sorted(common), key=lambda s: span[s])


def _steps_of(trace: Trace) -> list[tuple[int, bool, int]]:
    return _steps_many([trace])[trace.rank]


def _steps_many(traces: Sequence[Trace]) -> dict[int, list[tuple[int, bool, int]]]:
    """Each trace's steps: ``(step, incomplete, span)``, the span over CPU and GPU times."""
    cols = ["step", "incomplete", "start_ns", "end_ns", "gpu_start_ns", "gpu_end_ns"]
    frames = [t.steps.select(cols).with_columns(rank_column(t.rank, t.steps.height)) for t in traces]
    out: dict[int, list[tuple[int, bool, int]]] = {t.rank: [] for t in traces}
    ends = pl.concat(frames, how="vertical_relaxed").select(
        "rank",
        "step",
        "incomplete",
        (pl.max_horizontal("end_ns", "gpu_end_ns") - pl.min_horizontal("start_ns", "gpu_start_ns")).alias("span"),
    )
    for r, a, b, c in ends.iter_rows():
        out[r].append((int(a), bool(b), int(c or 0)))
    return out


def job_path(run: Run | Session, *, step: int | None = None, ranks: Sequence[int] | None = None) -> JobPath:
    """The job-wide critical path of ``step`` (None: the slowest complete step common to all
    ranks, or the whole trace without steps), memoised per session."""
    sess = Session.of(run, ranks)
    if step is None:
        step = _choose_step(sess)
    return sess.memo(("critical_path", "job", step), lambda: _job_path(sess, step))


def _offsets(sess: Session) -> tuple[dict[int, int], list[str]]:
    zeros = {r: 0 for r in sess.ranks}
    if len(sess.ranks) < 2:
        return zeros, []
    from ranksight.analyses.collectives import comm_data

    try:
        cd = comm_data(sess)
    except RanksightError as err:
        return zeros, [f"clocks not aligned (offsets 0): {err}"]
    off = cd.offset_map()
    return {r: off.get(r, 0) for r in sess.ranks}, []


def _job_path(sess: Session, step: int | None) -> JobPath:
    notes: list[str] = []
    per = _rank_graphs(sess, step)
    offsets, n2 = _offsets(sess)
    notes += n2
    ranks = [r for r in sess.ranks if per[r][1] is not None and per[r][0].nodes.height]
    missing = [r for r in sess.ranks if r not in ranks]
    if missing:
        notes.append(f"rank(s) {missing}: no ProfilerStep#{step} or no event in it; left out of the path")
    if not ranks:
        raise MissingDataError(f"no rank has {'ProfilerStep#' + str(step) if step is not None else 'events'}")
    # one node space: rank r's nodes at base[r]..; aligned times
    base, n = {}, 0
    n_ts, n_rank, n_row, n_cpu = [], [], [], []
    edges = []
    attrs = []
    for r in ranks:
        g = per[r][0]
        base[r] = n
        n_ts.append(g.nodes["ts_ns"].to_numpy() - offsets[r])
        n_rank.append(np.full(g.nodes.height, r, np.int64))
        n_row.append(g.nodes["row"].to_numpy())
        on_cpu = g.nodes.select(pl.col("row").cast(pl.Int64)).join(
            g.events.select(pl.col("row").cast(pl.Int64), "stream"), on="row", how="left", maintain_order="left"
        )["stream"]
        n_cpu.append((on_cpu == -1).fill_null(False).to_numpy())
        edges.append(g.edges.with_columns(pl.col("src") + n, pl.col("dst") + n, pl.lit(r, pl.Int32).alias("rank")))
        n += g.nodes.height
        attrs.append(per[r][2].with_columns(pl.lit(r, pl.Int32).alias("rank")))
    ts = np.concatenate(n_ts)
    nrank = np.concatenate(n_rank)
    nrow = np.concatenate(n_row)
    ncpu = np.concatenate(n_cpu)
    E = pl.concat(edges)
    ev = pl.concat(attrs, how="vertical_relaxed")
    lo = min(per[r][1][0] - offsets[r] for r in ranks)
    hi = max(per[r][1][1] - offsets[r] for r in ranks)
    # start/end node of each (rank, row)
    nodes = pl.DataFrame(
        {
            "node": np.arange(n),
            "rank": nrank.astype(np.int32),
            "row": nrow,
            "is_start": np.concatenate([per[r][0].nodes["is_start"].to_numpy() for r in ranks]),
        }
    )
    se = nodes.group_by("rank", "row").agg(
        pl.col("node").filter(pl.col("is_start")).first().alias("s"),
        pl.col("node").filter(~pl.col("is_start")).first().alias("e"),
    )
    # gloo: the enqueue and the wait within each rank
    gl = _gloo_links(sess, ranks, per, se, offsets)
    if gl is not None:
        E = pl.concat([E, gl.select(E.columns).cast(E.schema)], how="vertical_relaxed")
    # collectives matched across ranks
    coll = _collective_nodes(sess, ranks, se, ts, E, notes)
    late_info = pl.DataFrame()
    p = None
    if coll is not None:
        parts, extra_ts, extra_rank, late_info = coll
        drop = parts.select(pl.col("s").alias("src"), pl.col("e").alias("dst"))
        E = E.join(drop, on=["src", "dst"], how="anti", maintain_order="left")
        r_base = n
        n += len(extra_ts)
        ts = np.concatenate([ts, np.asarray(extra_ts, np.int64)])
        nrank = np.concatenate([nrank, np.asarray(extra_rank, np.int64)])
        nrow = np.concatenate([nrow, np.full(len(extra_ts), -1, np.int64)])
        ncpu = np.concatenate([ncpu, np.zeros(len(extra_ts), bool)])
        p = parts.with_columns(pl.col("R") + r_base, pl.col("C") + r_base)
        R_ts = ts[p["R"].to_numpy()]
        e_ts = ts[p["e"].to_numpy()]
        cross = pl.concat(
            [
                p.select(
                    pl.col("s").alias("src"),
                    pl.col("R").alias("dst"),
                    pl.lit(WAIT).alias("type"),
                    pl.lit(0).alias("weight_ns"),
                    pl.lit(-1).alias("attr_row"),
                    "rank",
                ),
                p.select(
                    pl.col("R").alias("src"),
                    pl.col("C").alias("dst"),
                    pl.lit(WAIT).alias("type"),
                    pl.lit(0).alias("weight_ns"),
                    pl.lit(-1).alias("attr_row"),
                    "rank",
                ),
                p.select(
                    pl.col("C").alias("src"),
                    pl.col("e").alias("dst"),
                    pl.lit(OPERATOR).alias("type"),
                    pl.Series("weight_ns", np.maximum(e_ts - R_ts, 0)),
                    pl.col("row").alias("attr_row"),
                    "rank",
                ),
            ],
            how="vertical_relaxed",
        )
        E = pl.concat([E, cross.cast(E.schema)], how="vertical_relaxed")
        late_info = late_info.with_columns(pl.col("s"), pl.col("R") + r_base)
    E = E.unique(["src", "dst"], keep="last", maintain_order=True)
    path_nodes = _walk(n, E, ts)
    if path_nodes.size < 2:
        raise MissingDataError("no critical path across ranks (no event in the step)")
    c_nodes = p["C"] if p is not None else pl.Series("C", [], dtype=pl.Int64)
    pe = (
        pl.DataFrame({"seq": np.arange(path_nodes.size - 1), "src": path_nodes[:-1], "dst": path_nodes[1:]})
        .join(E, on=["src", "dst"], how="left")
        .sort("seq")
        .with_columns(pl.col("src").is_in(c_nodes.implode()).alias("transfer"))  # a collective's transfer
    )
    cross = _crossings(path_nodes, p, late_info, ts, nrank, ev)
    segs = _segments(pe, ts, nrank, ncpu, ev, lo, hi, {r: per[r][1][0] - offsets[r] for r in ranks}, cross)
    wi = _what_if(n, E, ts, lo, hi, segs, late_info, ev, per, ranks, c_nodes.to_numpy())
    n_late = late_info["rank"].n_unique() if late_info.height else 0
    if n_late > WHAT_IF_LATE_RANKS:
        notes.append(
            f"what-if `rank not late` for the {WHAT_IF_LATE_RANKS} ranks with the most lateness "
            f"(of {n_late} ranks that were last to a collective)"
        )
    late = (
        late_info.select(list(_LATE_SCHEMA)).cast(_LATE_SCHEMA)  # type: ignore[arg-type]
        if late_info.height
        else pl.DataFrame(schema=_LATE_SCHEMA)
    )
    return JobPath(step, lo, hi, segs, wi, notes, late, cross.drop("seq").cast(_CROSSING_SCHEMA))  # type: ignore[arg-type]


def _crossings(
    path: np.ndarray,
    parts: pl.DataFrame | None,
    late_info: pl.DataFrame,
    ts: np.ndarray,
    nrank: np.ndarray,
    ev: pl.DataFrame,
) -> pl.DataFrame:
    """The collective instances at which the walk changes rank: ``… s_L → R → C_W → e_W`` with
    ``L ≠ W`` (``R`` the instance's ready node, ``s_L`` the start of its last participant's
    collective, ``C_W → e_W`` the transfer of rank W's). ``seq``: the path edge ``C_W → e_W``."""
    empty = pl.DataFrame(schema={"seq": pl.Int64, **_CROSSING_SCHEMA})
    if parts is None or parts.height == 0 or path.size < 3:
        return empty
    c_of = parts.select("C", "instance", "rank", "row", "s")
    prev, mid, nxt = path[:-2], path[1:-1], path[2:]
    # path edge k runs from path[k] to path[k + 1]: C_W → e_W is the edge after R → C_W
    j = pl.DataFrame({"seq": np.arange(2, path.size), "a": prev, "R": mid, "C": nxt})
    j = j.join(c_of, on="C", how="inner").filter(pl.col("R").is_in(parts["R"].unique().implode()))
    if j.height == 0:
        return empty
    j = j.with_columns(
        pl.Series("waited_for", nrank[j["a"].to_numpy()]).cast(pl.Int32),
        pl.Series("ready_ns", ts[j["R"].to_numpy()]),
        pl.Series("w_start", ts[j["s"].to_numpy()]),
    ).filter(pl.col("waited_for") != pl.col("rank"))
    names = ev.select(pl.col("rank").cast(pl.Int32), pl.col("row").cast(pl.Int64), "name").unique(["rank", "row"])
    lat = late_info.select("instance", pl.col("lateness_ns")) if late_info.height else None
    j = j.with_columns(pl.col("rank").cast(pl.Int32), pl.col("row").cast(pl.Int64)).join(
        names, on=["rank", "row"], how="left"
    )
    j = j.join(lat, on="instance", how="left") if lat is not None else j.with_columns(pl.lit(None).alias("lateness_ns"))
    return j.select(
        "seq",
        "instance",
        "name",
        "ready_ns",
        "waited_for",
        "rank",
        (pl.col("ready_ns") - pl.col("w_start")).alias("wait_ns"),
        "lateness_ns",
    ).sort("seq")


def _binding(n: int, E: pl.DataFrame, ts: np.ndarray) -> np.ndarray:
    """Per node, the index in ``E`` of the edge through which it arrived last (latest source
    time; on ties a work edge, then the larger source node), −1 without a predecessor. An edge
    whose source is later than its destination (a call-stack edge between overlapping events of
    two folded threads) is taken only when the node has no other."""
    work = E["type"].is_in([OPERATOR, LAUNCH_DELAY, KERNEL_KERNEL]).to_numpy()
    src, dst = E["src"].to_numpy(), E["dst"].to_numpy()
    forward = ts[src] <= ts[dst]
    o = np.lexsort((src, work, ts[src], forward, dst))
    last = np.r_[dst[o][1:] != dst[o][:-1], True] if o.size else np.zeros(0, bool)
    pred = np.full(n, -1, np.int64)
    pred[dst[o][last]] = o[last]
    return pred


def _walk(n: int, E: pl.DataFrame, ts: np.ndarray) -> np.ndarray:
    """The last-arrival walk: from the node that ends last, back through the predecessor that
    arrived last (:func:`_binding`)."""
    src, dst = E["src"].to_numpy(), E["dst"].to_numpy()
    bind = _binding(n, E, ts)
    pred = np.where(bind >= 0, src[np.maximum(bind, 0)], -1)
    has_edge = np.zeros(n, bool)
    has_edge[src] = True
    has_edge[dst] = True
    cand = np.flatnonzero(has_edge)
    if cand.size == 0:
        return np.array([], np.int64)
    v = int(cand[np.lexsort((cand, ts[cand]))[-1]])
    path = [v]
    seen = {v}
    while pred[v] >= 0 and int(pred[v]) not in seen:
        v = int(pred[v])
        seen.add(v)
        path.append(v)
    return np.array(path[::-1], np.int64)


class _Replay:
    """The graph of a what-if replay, ordered once (:class:`ranksight._core.LongestPathGraph`):
    :meth:`end` replays it under one weighting of its edges."""

    def __init__(self, n: int, E: pl.DataFrame, ts: np.ndarray, lo: int) -> None:
        src, dst = E["src"].to_numpy(), E["dst"].to_numpy()
        has_pred = np.zeros(n, bool)
        has_pred[dst] = True
        roots = np.flatnonzero(~has_pred)
        # every node without a predecessor starts at its measured time: an edge from an extra
        # source node n, pinned at lo, weighing the node's start after lo
        s2 = np.r_[src, np.full(roots.size, n)].astype(np.int64)
        d2 = np.r_[dst, roots].astype(np.int64)
        self._root_w = np.maximum(ts[roots] - lo, 0).astype(np.int64)
        try:
            self._graph = _core.LongestPathGraph(n + 1, s2.tobytes(), d2.tobytes())
        except ValueError as err:
            raise MissingDataError(f"the job-wide critical-path graph cannot be ordered: {err}") from err

    def end(self, d: np.ndarray) -> int:
        """End of the step (ns after ``lo``) when every edge takes ``d``: the longest path's
        length (the sum of its edges' weights) from the source pinned at ``lo``."""
        w2 = np.r_[d, self._root_w].astype(np.int64)
        return int(self._graph.length(w2.tobytes()))


def _collective_nodes(  # noqa: ANN202
    sess: Session, ranks: list[int], se: pl.DataFrame, ts: np.ndarray, E: pl.DataFrame, notes: list[str]
):
    """Per matched instance with two or more participants in the graphs: the ready node R (at the
    last participant's arrival) and a per-participant node C (the end of its wait). A GPU
    collective's arrival is its kernel's start and its transfer ends at the kernel's end; a gloo
    collective's (:func:`_gloo_exchange`) are the ends of the longest gap on its gloo thread
    inside its annotation. Gloo instances are joined only when every rank that ran them lists one
    process group (their events carry neither the group nor a sequence number: the k-th
    collective of a type and size of the one group is paired with the k-th on the other ranks)."""
    if len(ranks) < 2:
        return None
    from ranksight.analyses.collectives import comm_data

    try:
        cd = comm_data(sess)
    except RanksightError:
        return None
    pr = cd.per_rank.filter(pl.col("instance").is_not_null() & pl.col("rank").is_in(ranks)).select(
        "instance", "rank", pl.col("row").cast(pl.Int64), "name", "source"
    )
    cpu = pr.filter(pl.col("source") == "cpu")
    if cpu.height:
        groups = {r: len(sess.trace(r).meta.process_groups) for r in sorted(set(cpu["rank"].to_list()))}
        bad = {r: k for r, k in groups.items() if k != 1}
        if bad:
            notes.append(
                f"gloo collectives not joined across ranks: {_ranks_text(sorted(bad))} list "
                f"{', '.join(sorted({str(k) for k in bad.values()}))} process group(s) and gloo's events carry "
                "neither a process group nor a sequence number, so their instances cannot be paired"
            )
            pr = pr.filter(pl.col("source") != "cpu")
        else:
            notes.append(
                "gloo collectives joined across ranks by their order in the one process group (k-th of a type "
                "and size on each rank; their events carry no sequence number); a participant arrives when its "
                "gloo thread enters the exchange (the longest gap inside its gloo:* annotation)"
            )
    pr = pr.join(se, on=["rank", "row"], how="inner").filter(pl.col("s").is_not_null() & pl.col("e").is_not_null())
    pr = _gloo_exchange(pr, E, ts)
    pr = pr.filter(pl.len().over("instance") >= 2)
    if pr.height == 0:
        return None
    pr = pr.with_columns(pl.Series("start", ts[pr["s"].to_numpy()])).sort("instance", "rank")
    inst = pr.group_by("instance", maintain_order=True).agg(
        pl.col("start").max().alias("ready"),
        pl.col("rank").sort_by("start").last().alias("late_rank"),
        # the stragglers analysis' lateness: start − the median start of the instance
        # (on offsets from the earliest start: a median of epoch ns in float64 is not exact)
        (
            (pl.col("start").max() - pl.col("start").min())
            - (pl.col("start") - pl.col("start").min()).median().round().cast(pl.Int64)
        ).alias("lateness_ns"),
    )
    inst = inst.with_row_index("R").with_columns(pl.col("R").cast(pl.Int64))
    k = inst.height
    pr = pr.join(inst, on="instance", how="left").with_row_index("C").with_columns(pl.col("C").cast(pl.Int64) + k)
    extra_ts = inst["ready"].to_list() + pr["ready"].to_list()
    extra_rank = [-1] * k + pr["rank"].to_list()
    late = pr.filter(pl.col("rank") == pl.col("late_rank")).select("instance", "rank", "s", "R", "lateness_ns")
    return pr.select("instance", "rank", "row", "s", "e", "R", "C"), extra_ts, extra_rank, late


def _gloo_exchange(pr: pl.DataFrame, E: pl.DataFrame, ts: np.ndarray) -> pl.DataFrame:
    """For the gloo participants of ``pr`` (``source == "cpu"``; ``s``/``e`` the nodes of their
    ``gloo:*`` annotation): ``s``/``e`` replaced by the ends of the exchange, the longest edge of the
    annotation's thread chain attributed to it (the time its gloo thread ran no profiled event:
    gloo's algorithm is not instrumented; the calls around it copy the tensors in and out); the
    whole annotation when it has no nested event. GPU participants are returned as they are."""
    cpu = pr.filter(pl.col("source") == "cpu")
    if cpu.height == 0:
        return pr
    cand = (
        E.with_row_index("__i")
        .filter(pl.col("type") == OPERATOR)
        .join(cpu.select("rank", pl.col("row").alias("attr_row")), on=["rank", "attr_row"], how="semi")
    )
    cand = cand.with_columns(pl.Series("__span", ts[cand["dst"].to_numpy()] - ts[cand["src"].to_numpy()]))
    gap = (
        cand.sort(["rank", "attr_row", "__span", "__i"], descending=[False, False, True, False])
        .unique(["rank", "attr_row"], keep="first")
        .select("rank", pl.col("attr_row").alias("row"), pl.col("src").alias("__u"), pl.col("dst").alias("__v"))
    )
    return pr.join(gap, on=["rank", "row"], how="left", maintain_order="left").select(
        pl.exclude("s", "e", "__u", "__v"),
        pl.when(pl.col("source") == "cpu").then(pl.coalesce("__u", "s")).otherwise(pl.col("s")).alias("s"),
        pl.when(pl.col("source") == "cpu").then(pl.coalesce("__v", "e")).otherwise(pl.col("e")).alias("e"),
    )


def _gloo_links(
    sess: Session, ranks: list[int], per: dict, se: pl.DataFrame, offsets: dict[int, int]
) -> pl.DataFrame | None:
    """Edges within a rank around its gloo collectives (the job path's graphs only), in the
    global node space: **enqueue**, from the start of the ``c10d::*`` op that enqueued the
    collective (``collectives``' pairing: the k-th such op of the type on the rank) to the start
    of its ``gloo:*`` annotation; **wait**, from the annotation's end to the next event of the
    enqueueing thread when that thread ran no event at that end (it waited in ``Work.wait()``,
    which the trace does not record), from the collective that ended last before that event."""
    from ranksight.analyses.collectives import comm_data

    try:
        cd = comm_data(sess)
    except RanksightError:
        return None
    rows = cd.per_rank.filter((pl.col("source") == "cpu") & pl.col("rank").is_in(ranks))
    if rows.height == 0:
        return None
    out = []
    rows_by, se_by = RankSlices(rows), RankSlices(se)  # each rank's rows without a query over all ranks
    for r in sorted(set(rows["rank"].to_list())):
        g = per[r][0]
        se_r = se_by[r]
        mine = (
            rows_by[r]
            .select(
                pl.col("row").cast(pl.Int64),
                (pl.col("launch_ns") + offsets[r]).alias("launch_ns"),  # own clock, as the graph's events
                "launch_tid",
            )
            .join(se_r.select("row", "s", "e"), on="row", how="inner")
        )
        ops = g.events.filter((pl.col("kind") == "cpu_op") & (pl.col("stream") == -1)).select(
            pl.col("row").cast(pl.Int64).alias("op_row"),
            pl.col("tid").alias("launch_tid"),
            pl.col("ts_ns").alias("launch_ns"),
        )
        enq = (
            mine.join(ops, on=["launch_tid", "launch_ns"], how="inner")
            .filter(pl.col("op_row") != pl.col("row"))
            .unique("row", keep="first", maintain_order=True)
            .join(
                se_r.select(pl.col("row").alias("op_row"), pl.col("s").alias("op_s")),
                on="op_row",
                how="inner",
            )
        )
        if enq.height == 0:
            continue
        out.append(
            enq.select(
                pl.col("op_s").alias("src"),
                pl.col("s").alias("dst"),
                pl.lit(DEPENDENCY).alias("type"),
                pl.lit(r).alias("rank"),
            )
        )
        # the enqueueing thread: idle at the collective's end, its next event waited
        thread_ev = g.events.filter(
            (pl.col("stream") == -1) & pl.col("tid").is_in(enq["launch_tid"].unique().implode())
        )
        ends = enq.select("launch_tid", "e", pl.col("row")).join(
            g.events.select(pl.col("row").cast(pl.Int64), pl.col("end_ns").alias("t_e")), on="row", how="inner"
        )
        for tid in sorted(set(ends["launch_tid"].to_list())):
            te = thread_ev.filter(pl.col("tid") == tid).sort("ts_ns", "row")
            if te.height == 0:
                continue
            t_ts = te["ts_ns"].to_numpy()
            busy_until = np.maximum.accumulate(te["end_ns"].to_numpy())
            mine_t = ends.filter(pl.col("launch_tid") == tid)
            t_e = mine_t["t_e"].to_numpy()
            nxt = np.searchsorted(t_ts, t_e, side="left")
            idle = (nxt < t_ts.size) & ((nxt == 0) | (busy_until[np.maximum(nxt - 1, 0)] <= t_e))
            if not idle.any():
                continue
            nxt_rows = te["row"].cast(pl.Int64).to_numpy()[nxt[idle]]
            w = (
                pl.DataFrame({"e": mine_t["e"].to_numpy()[idle], "t_e": t_e[idle], "row": nxt_rows})
                .sort("t_e", "e")
                .unique("row", keep="last", maintain_order=True)
                .join(se_r.select("row", pl.col("s").alias("dst")), on="row", how="inner")
            )
            out.append(w.select(pl.col("e").alias("src"), "dst", pl.lit(SYNC).alias("type"), pl.lit(r).alias("rank")))
    if not out:
        return None
    return pl.concat(out, how="vertical_relaxed").with_columns(
        pl.lit(0).alias("weight_ns"), pl.lit(-1).alias("attr_row")
    )


def _segments(
    pe: pl.DataFrame,
    ts: np.ndarray,
    nrank: np.ndarray,
    ncpu: np.ndarray,
    ev: pl.DataFrame,
    lo: int,
    hi: int,
    rank_start: dict[int, int],
    cross: pl.DataFrame,
) -> pl.DataFrame:
    """The path's edges as segments tiling ``[lo, hi]``; ``ncpu``: the node is an event on a CPU
    thread; ``ev``: the attributed events (``rank, row, name, kind, pid, tid, stream, kernel_class``);
    ``rank_start``: each rank's step start (aligned); ``cross``: :func:`_crossings` (the transfer
    edge after each crossing gets ``waiting_on_rank``, the rank it waited for)."""
    src, dst = pe["src"].to_numpy(), pe["dst"].to_numpy()
    code = pe["type"].to_numpy()
    w = pe["weight_ns"].to_numpy()
    attr = pe["attr_row"].to_numpy()
    # segments tile time: each starts where the previous ended, clipped to the window
    t = np.maximum.accumulate(np.r_[ts[src[0]], ts[dst]])
    t = np.clip(t, lo, hi)
    start, end = t[:-1], t[1:]
    rank = np.where(nrank[src] >= 0, nrank[src], nrank[dst])
    info = ev.select(
        "rank",
        pl.col("row").cast(pl.Int64),
        "name",
        "kind",
        "pid",
        "tid",
        "stream",
        pl.col("kernel_class").cast(pl.String),
    )
    seg = pl.DataFrame(
        {
            "seq": pe["seq"],
            "rank": rank.astype(np.int32),
            "row": np.where(attr >= 0, attr, -1),
            "code": code,
            "cpu_gap": (code == DEPENDENCY) & ncpu[src] & ncpu[dst],
            "transfer": pe["transfer"].fill_null(False).to_numpy(),
            "w": w,
            "start_ns": start,
            "end_ns": end,
        }
    ).join(info, on=["rank", "row"], how="left", maintain_order="left")
    seg = seg.join(
        cross.select("seq", pl.col("waited_for").alias("waiting_on_rank")), on="seq", how="left", maintain_order="left"
    )
    dl = _is_data_load(seg["name"], DATA_LOAD_PATTERNS)
    on_gpu = pl.col("stream").fill_null(-1) != -1
    typ = (
        pl.when(pl.col("code") == KERNEL_KERNEL)
        .then(pl.lit("kernel_kernel_delay"))
        .when(pl.col("code") == LAUNCH_DELAY)
        .then(pl.lit("launch_delay"))
        .when(pl.col("code") == SYNC)
        .then(pl.lit("sync"))
        .when(pl.col("code") == WAIT)
        .then(pl.lit("wait"))
        .when(pl.col("cpu_gap"))
        .then(pl.lit("cpu_gap"))
        .when(pl.col("code") == DEPENDENCY)
        .then(pl.lit("idle"))
        .when(on_gpu)
        .then(pl.lit("kernel"))
        .when((pl.col("w") == 0) & (pl.col("end_ns") > pl.col("start_ns")))
        .then(pl.lit("sync"))
        .otherwise(pl.lit("cpu_op"))
    )
    seg = seg.with_columns(typ.alias("type"), dl.alias("__dl"))
    cat = (
        pl.when(pl.col("transfer") & pl.col("type").is_in(["kernel", "cpu_op"]))
        .then(pl.lit("communication"))
        .when(pl.col("type") == "kernel")
        .then(
            pl.when(pl.col("kernel_class") == "COMMUNICATION")
            .then(pl.lit("communication"))
            .otherwise(pl.lit("compute"))
        )
        .when(pl.col("type") == "cpu_op")
        .then(pl.when(pl.col("__dl")).then(pl.lit("data_loading")).otherwise(pl.lit("host")))
        .when(pl.col("type").is_in(["launch_delay", "cpu_gap"]))
        .then(pl.lit("host"))
        .when(pl.col("type") == "wait")
        .then(pl.lit("waiting_on_rank"))
        .otherwise(pl.lit("idle"))
    )
    seg = seg.with_columns(cat.alias("category"))
    idle_name = pl.when(pl.col("type") == "wait").then(pl.lit("waiting for another rank")).otherwise(pl.col("type"))
    seg = seg.with_columns(
        pl.when(pl.col("row") >= 0).then(pl.col("name")).otherwise(idle_name).alias("name"),
        pl.when(pl.col("row") >= 0).then(pl.col("row")).alias("row"),
    )
    # leading and trailing idle to the step window
    first, last = seg.row(0, named=True), seg.row(seg.height - 1, named=True)
    pad = []
    # before the first node: the time its rank had not begun the step, then idle
    entered = min(max(rank_start.get(int(first["rank"]), lo), lo), int(start[0]))
    for a, b, name, sq in (
        (lo, entered, f"rank {first['rank']} not in the step yet", -2),
        (entered, int(start[0]), "idle", -1),
    ):
        if b > a:
            pad.append(
                {
                    **first,
                    "start_ns": a,
                    "end_ns": b,
                    "row": None,
                    "name": name,
                    "type": "idle",
                    "category": "idle",
                    "seq": sq,
                    "waiting_on_rank": None,
                }
            )
    if int(end[-1]) < hi:
        pad.append(
            {
                **last,
                "start_ns": int(end[-1]),
                "end_ns": hi,
                "row": None,
                "name": "idle",
                "type": "idle",
                "category": "idle",
                "seq": seg.height,
                "waiting_on_rank": None,
            }
        )
    if pad:
        seg = pl.concat([seg, pl.DataFrame(pad, schema=seg.schema)]).sort("seq")
    seg = seg.filter(pl.col("end_ns") > pl.col("start_ns"))
    # merge consecutive pieces of the same event / gap
    key = pl.struct("rank", "row", "type", "category", "name")
    seg = seg.with_columns((key != key.shift(1)).fill_null(True).cum_sum().alias("__g"))
    out = seg.group_by("__g", maintain_order=True).agg(
        pl.col("rank").first(),
        pl.col("stream").first(),
        pl.col("tid").first(),
        pl.col("row").first().cast(pl.UInt32),
        pl.col("name").first(),
        pl.col("start_ns").first(),
        pl.col("end_ns").last(),
        pl.col("type").first(),
        pl.col("category").first(),
        pl.col("waiting_on_rank").drop_nulls().first(),
    )
    return out.drop("__g").with_columns(pl.col("stream").fill_null(-1), pl.col("tid").cast(pl.Int64))


def _what_if(
    n: int,
    E: pl.DataFrame,
    ts: np.ndarray,
    lo: int,
    hi: int,
    segs: pl.DataFrame,
    late: pl.DataFrame,
    ev: pl.DataFrame,
    per: dict,
    ranks: list[int],
    c_nodes: np.ndarray,
) -> pl.DataFrame:
    """Step time estimates by replaying the graph (:class:`_Replay`): the edge through which a
    node arrived last keeps its measured time (work and gaps alike); every other edge takes its
    event's time if it is an operator edge of a call that does not block, else none (a launch
    delay or a kernel-kernel gap that did not decide a start may have been a wait for something
    else, a blocking call's time is a wait), so the baseline replay
    reproduces the measured times; a scenario changes some edges; estimate = step − (replayed end
    − the scenario's replayed end)."""
    rows = []
    src, dst, code = E["src"].to_numpy(), E["dst"].to_numpy(), E["type"].to_numpy()
    span = ts[dst] - ts[src]
    bind = _binding(n, E, ts)
    # a blocking call's duration is a wait (the lock edge of cudaMemcpyAsync carries it as work)
    blocking = ev.filter(pl.col("name").is_in(list(BLOCKING_CALLS))).select(
        "rank", pl.col("row").cast(pl.Int64).alias("attr_row"), pl.lit(True).alias("b")
    )
    is_blocking = (
        E.select("rank", "attr_row")
        .join(blocking, on=["rank", "attr_row"], how="left", maintain_order="left")["b"]
        .fill_null(False)
        .to_numpy()
    )
    intrinsic = (code == OPERATOR) & ~is_blocking
    d0 = np.where(intrinsic, np.minimum(np.maximum(E["weight_ns"].to_numpy(), 0), span), 0)
    b = bind[bind >= 0]
    d0[b] = span[b]
    replay = _Replay(n, E, ts, lo)
    base = replay.end(d0)
    step_ns = hi - lo

    def est(label: str, target: str, d: np.ndarray, what: str) -> None:
        save = base - replay.end(d)
        rows.append(
            {
                "scenario": label,
                "target": target,
                "step_ms": step_ns / 1e6,
                "est_step_ms": (step_ns - save) / 1e6,
                "saving_ms": save / 1e6,
                "assumes": what,
            }
        )

    comm_rows = ev.filter(pl.col("kernel_class") == "COMMUNICATION").select(
        "rank", pl.col("row").cast(pl.Int64).alias("attr_row"), pl.lit(True).alias("c")
    )
    is_comm = E.select("rank", "attr_row").join(comm_rows, on=["rank", "attr_row"], how="left", maintain_order="left")
    # communication kernels, and the transfers of matched collectives (gloo's included)
    comm = (is_comm["c"].fill_null(False).to_numpy() | np.isin(src, c_nodes)) & (code == OPERATOR)
    if comm.any():
        est("no exposed communication", "all ranks", np.where(comm, 0, d0), "collective transfers take no time")
    if late.height:
        # one join for every late rank's arrival edges, then a slice per rank; a replay per rank
        # for the WHAT_IF_LATE_RANKS latest ranks only (a replay is over every rank's edges)
        arrivals = RankSlices(
            E.select("src", "dst")
            .with_row_index("__i")
            .join(
                late.select(pl.col("s").alias("src"), pl.col("R").alias("dst"), "lateness_ns", "rank"),
                on=["src", "dst"],
            )
        )
        totals = late.group_by("rank").agg(pl.col("lateness_ns").sum().alias("t"), pl.len().alias("n"))
        chosen = totals.sort(["t", "rank"], descending=[True, False]).head(WHAT_IF_LATE_RANKS)
        for r, n_late, lateness in chosen.sort("rank").select("rank", "n", "t").iter_rows():
            k = arrivals[int(r)]
            d = d0.copy()
            d[k["__i"].to_numpy()] = -k["lateness_ns"].to_numpy()
            est(
                "rank not late",
                f"rank {r}",
                d,
                f"rank {r} starts the {n_late} collective(s) it was last to at their median start "
                f"({int(lateness) / 1e3:,.1f} µs of lateness removed)",
            )
    ops = (
        segs.filter(pl.col("type").is_in(["cpu_op", "kernel"]) & pl.col("row").is_not_null())
        .group_by("name")
        .agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("t"))
        .sort(["t", "name"], descending=[True, False])
        .head(5)["name"]
        .to_list()
    )
    # one key per (rank, row) so that each operator is one np.isin over all ranks' edges (a
    # per-rank isin over every edge grew with ranks squared)
    e_key = E["rank"].to_numpy().astype(np.int64) * _ROW_SPAN + E["attr_row"].to_numpy().astype(np.int64)
    marked = {r: _ops_rows(per[r][0], per[r][2], ops) for r in ranks} if ops else {}
    for i, op in enumerate(ops):
        keys = [r * _ROW_SPAN + marked[r][i] for r in ranks if marked[r][i].size]
        mask = np.isin(e_key, np.concatenate(keys)) if keys else np.zeros(E.height, bool)
        if mask.any():
            est(
                "operator removed", op, np.where(mask, 0, d0), f"{op}, its nested calls and their GPU work take no time"
            )
    return pl.DataFrame(
        rows,
        schema={
            "scenario": pl.String,
            "target": pl.String,
            "step_ms": pl.Float64,
            "est_step_ms": pl.Float64,
            "saving_ms": pl.Float64,
            "assumes": pl.String,
        },
    )


def _no_null(s: pl.Series, fill: Any = "\0") -> pl.Series:
    """``s`` without nulls (``fill`` in their place; no polars query when there is none): a
    comparison then gives a plain boolean array."""
    return s.fill_null(fill) if s.null_count() else s


#: (rank, event row) keys of the what-if scenarios: ``rank * _ROW_SPAN + row`` (rows are below it)
_ROW_SPAN = 1 << 40


def _ops_rows(g: CriticalGraph, attr: pl.DataFrame, ops: Sequence[str]) -> list[np.ndarray]:
    """For each operator name of ``ops``, in order: the rows of the CPU events of that name, their
    descendants on the call stack and the GPU activities launched from any of them, and of the GPU
    activities of that name (one pass over the rank's graph for all names: a bit per name)."""
    ev = g.events
    ev_rows = ev["row"].cast(pl.Int64).to_numpy()
    ev_names = _no_null(ev["name"].cast(pl.String))
    on_gpu = _no_null(ev["stream"].cast(pl.Int64), -1).to_numpy() != -1
    gpu_hit = [ev_rows[on_gpu & (ev_names == op).to_numpy()] for op in ops]
    t = g.tree
    if t.height == 0:
        return gpu_hit
    rows = t["row"].cast(pl.Int64).to_numpy()
    parent = t["parent_row"].cast(pl.Int64).to_numpy()
    size = int(max(rows.max(), parent.max(), 0)) + 1
    in_tree = np.zeros(size, bool)
    in_tree[rows] = True
    at_rows = attr["row"].cast(pl.Int64).to_numpy()
    at_names = _no_null(attr["name"].cast(pl.String))
    out: list[np.ndarray] = []
    for lo in range(0, len(ops), 64):  # 64 names per pass (one bit each)
        chunk = ops[lo : lo + 64]
        mark = np.zeros(size, np.uint64)
        for i, op in enumerate(chunk):
            hit = np.concatenate([ev_rows[(ev_names == op).to_numpy()], at_rows[(at_names == op).to_numpy()]])
            hit = hit[(hit >= 0) & (hit < size)]
            hit = hit[in_tree[hit]]
            mark[hit] |= np.uint64(1) << np.uint64(i)
        par = np.full(size, -1, np.int64)
        par[rows] = parent
        ok = par[rows] >= 0
        child, up = rows[ok], par[rows[ok]]
        for _ in range(256):
            nxt = mark.copy()
            nxt[child] |= mark[up]
            if (nxt == mark).all():
                break
            mark = nxt
        rt = _no_null(ev["rt_row"].cast(pl.Int64), -1).to_numpy()
        rt_ok = (rt >= 0) & (rt < size)
        rt_mark = np.zeros(rt.size, np.uint64)
        rt_mark[rt_ok] = mark[rt[rt_ok]]
        for i in range(len(chunk)):
            bit = np.uint64(1) << np.uint64(i)
            cpu_rows = np.flatnonzero(mark & bit)
            gpu = ev_rows[(rt_mark & bit) != 0]
            out.append(np.concatenate([cpu_rows, gpu, gpu_hit[lo + i]]))
    return out


def critical_path_segments(
    run: Run | Session, step: int | None = None, *, ranks: Sequence[int] | None = None
) -> pl.DataFrame:
    """The job-wide critical path of ``step`` as segments on the aligned clock: ``rank, stream,
    tid, row, name, start_ns, end_ns, type`` (and ``category``); they tile the step window.
    ``type``: cpu_op, kernel, launch_delay, kernel_kernel_delay, sync, wait, idle."""
    return job_path(run, step=step, ranks=ranks).segments


def _rank_tables(trace: Trace, step, annotation, instance_id, hta_compat):  # noqa: ANN001, ANN202
    return rank_breakdown(trace, step=step, annotation=annotation, instance_id=instance_id, hta_compat=hta_compat)


def _ranks_text(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"ranks 0–2, 5"``."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{g[0]}–{g[-1]}" if len(g) > 2 else ", ".join(map(str, g)) for g in runs]
    return ("ranks " if len(ranks) > 1 else "rank ") + ", ".join(parts)


def _grouped_notes(rank_notes: list[tuple[int, str]]) -> list[str]:
    """One line per kind of per-rank note (its text with the numbers masked), in first-seen order:
    the ranks, and the text (the first rank's, when the numbers differ between ranks)."""
    groups: dict[str, list[tuple[int, str]]] = {}
    for r, text in rank_notes:
        groups.setdefault(re.sub(r"\d[\d,.]*", "#", text), []).append((r, text))
    out = []
    for members in groups.values():
        ranks = [r for r, _ in members]
        texts = {t for _, t in members}
        if len(texts) == 1 or len(members) == 1:
            out.append(f"{_ranks_text(ranks)}: {members[0][1]}")
        else:
            out.append(f"{_ranks_text(ranks)}: {members[0][1]} (on rank {members[0][0]}; likewise on the others)")
    return out


def critical_path(
    run: Run,
    *,
    ranks: Sequence[int] | None = None,
    step: int | None = None,
    annotation: str | None = None,
    instance_id: int | None = None,
    hta_compat: bool = False,
    per_rank_only: bool = False,
    path_ranks: Sequence[int] | None = None,
) -> AnalysisResult:
    """Per-rank critical paths (HTA's model) and the job-wide path of a step. ``path_ranks``: the
    ranks whose own path is computed (default: every selected rank; the job-wide path always
    joins every selected rank): the report of many ranks computes the focus ranks' own."""
    sess = Session.of(run, ranks)
    own = sess.ranks if path_ranks is None else [r for r in sess.ranks if r in set(path_ranks)]
    per = sess.map(_rank_tables, own, step=step, annotation=annotation, instance_id=instance_id, hta_compat=hta_compat)
    parts = []
    rank_notes: list[tuple[int, str]] = []
    for r in own:
        bd, n = per[r]
        parts.append(bd)
        rank_notes += [(r, t.removeprefix(f"rank {r}: ")) for t in n]
    notes = _grouped_notes(rank_notes)
    bd = pl.concat(parts) if parts else pl.DataFrame(schema=_BD_SCHEMA)
    summary, by_type, by_op = _summaries(bd)
    tables = {"summary": summary, "by_type": by_type, "by_operator": by_op}
    if not per_rank_only and annotation is None and not hta_compat:
        jp = job_path(sess, step=step)
        seg = jp.segments
        dur = (pl.col("end_ns") - pl.col("start_ns")) / 1e3
        total = (jp.hi_ns - jp.lo_ns) / 1e3
        tables["job_by_category"] = (
            seg.group_by("category")
            .agg(dur.sum().alias("time_us"))
            .with_columns((100 * pl.col("time_us") / total).alias("pct_of_step"))
            .sort("time_us", "category", descending=[True, False])
        )
        tables["job_by_rank"] = (
            seg.group_by("rank")
            .agg(dur.sum().alias("time_us"))
            .with_columns((100 * pl.col("time_us") / total).alias("pct_of_step"))
            .sort("time_us", "rank", descending=[True, False])
        )
        tables["job_by_operator"] = (
            seg.filter(pl.col("row").is_not_null())
            .group_by("name", "category")
            .agg(dur.sum().alias("time_us"), pl.col("rank").unique().sort().alias("ranks"))
            .sort("time_us", "name", "category", descending=[True, False, False])
        )
        tables["what_if"] = jp.what_if
        tables["job_crossings"] = jp.crossings.select(
            "instance",
            "name",
            ((pl.col("ready_ns") - jp.lo_ns) / 1e3).alias("t_us"),
            "waited_for",
            "rank",
            (pl.col("wait_ns") / 1e3).alias("wait_us"),
            (pl.col("lateness_ns") / 1e3).alias("lateness_us"),
        )
        tables["job_segments"] = seg.with_columns(
            ((pl.col("start_ns") - jp.lo_ns) / 1e3).alias("t_us"), dur.alias("dur_us")
        )
        notes.append(
            f"job-wide path of {'ProfilerStep#' + str(jp.step) if jp.step is not None else 'the whole trace'}: "
            f"{total / 1e3:.3f} ms on the aligned clock"
        )
        notes += jp.notes
    tables["breakdown"] = bd
    return AnalysisResult(tables, notes)


register(
    AnalysisSpec(
        name="critical-path",
        func=critical_path,
        help="critical path per rank (HTA's model) and across ranks (aligned clocks), with what-if estimates",
        options=(
            Option(
                "step",
                int,
                None,
                "ProfilerStep to analyse (default: the slowest complete step; whole trace without steps)",
            ),
            Option("annotation", str, None, "HTA's window: events whose name contains this (per-rank path only)"),
            Option("instance_id", int, None, "with --annotation: which matching event (0-based)"),
            Option("hta_compat", bool, False, "HTA v0.6's model and numbers (per-rank path only)", flag=True),
            Option("per_rank_only", bool, False, "skip the job-wide path", flag=True),
        ),
    )
)
