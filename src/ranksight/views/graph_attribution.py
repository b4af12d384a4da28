"""Graph attribution: for every GPU activity replayed from a CUDA/HIP graph, the operator, module, shapes and
call stack that produced it when the graph was captured.

A replay trace has no operator above the kernels a graph launch runs. The capture trace (the same graphs
recorded while they were captured, with their operators) has the operators but no executed kernels. This
view matches the two (``docs/graphs.md`` has every definition):

1. **sources** (:func:`capture_sources`): ``--capture PATH`` (a trace, a folder with TraceLens's
   ``execution_details.json``, a folder holding ``capture_traces/``, or a folder of traces; ``none``: no
   source), else the ``capture_traces/`` folder beside the trace
   (its ``execution_details.json`` when present, else every trace in it), plus the trace itself when it
   records captures too (capture and replay in one process). A source whose file name names another
   rank (``rank_3``) is used only for that rank.
2. **graphs**: each distinct replayed sequence (:mod:`ranksight.views.graph_replays`: same stream and
   matching-key sequence) is matched to the capture graphs (:mod:`ranksight.views.graph_capture`) by
   kernel sequence. With kernel names on the capture side (ROCm records them on the launch calls): the
   score of a capture graph is the number of activities an exact-name alignment pairs, over the longer of
   the two sequences; the best wins. Alignment: on one stream, the longest matching blocks
   (``difflib.SequenceMatcher``, no junk heuristic) — a kernel missing from either side is skipped; on
   several streams, each captured launch goes to the stream whose next unmatched kernel has its name (ties:
   the stream that then matches the longest run), the rest aligned per stream. Without names (CUDA launch
   calls name no kernel) a capture graph matches only with the same number of activities, and its
   copies and sets at the same positions, position by position.
   Capture graphs tied on the best score (e.g. the 23 identical layers of a piecewise vLLM capture) are
   used in turn: the j-th replay of a sequence gets the (j mod n)-th tied capture graph in capture order.
3. **attribution** per replayed activity (``match``): ``exact`` (the whole sequence paired 1:1 by name,
   confidence 1), ``aligned`` (paired by name with gaps; confidence = the graph's score), ``position``
   (no names recorded, counts equal; confidence 0.5), else no capture match: ``graph node`` (the profiler
   recorded ``graph id`` / ``graph node id``: the node is named, not its operator) or ``taxonomy`` (the
   kernel taxonomy's family and library only), confidence null.

:func:`operator_trace` turns the attribution into a trace the operator analyses read as they read an eager
one (see its doc).
"""

from __future__ import annotations

import difflib
import json
import os
import warnings
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from ranksight.errors import UsageError
from ranksight.io.discovery import rank_from_name
from ranksight.model.taxonomy import kernel_taxonomy
from ranksight.model.trace import LazyTables
from ranksight.views.graph_capture import CaptureGraphs, capture_graphs
from ranksight.views.graph_replays import graph_replays, replay_activities
from ranksight.views.serving_steps import serving_steps

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "CaptureSource",
    "Attribution",
    "capture_sources",
    "graph_attribution",
    "operator_trace",
    "replay_copy_start",
    "attributed_operators",
    "ReplayShare",
    "NO_CAPTURE",
    "MATCH_KINDS",
]

#: ``--capture none``: no capture source (not even one found beside the trace)
NO_CAPTURE = "none"
MATCH_KINDS = ("exact", "aligned", "position", "graph node", "taxonomy")
_CONFIDENCE_POSITION = 0.5
_TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class CaptureSource:
    """One capture trace: where it came from (``how``), TraceLens's ``batch_size`` / ``mode`` when listed,
    and ``problem`` (why it is not used) or None."""

    path: str
    how: str
    batch_size: int | None = None
    mode: str | None = None
    problem: str | None = None


def _traces_in(folder: str) -> list[str]:
    return sorted(
        os.path.join(folder, f)
        for f in os.listdir(folder)
        if f.endswith(_TRACE_SUFFIXES) and f != "execution_details.json"
    )


def _from_details(folder: str, how: str) -> list[CaptureSource]:
    details = os.path.join(folder, "execution_details.json")
    try:
        with open(details, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        return [CaptureSource(details, how, problem=f"unreadable: {e}")]
    out = []
    if not isinstance(entries, list):
        return [CaptureSource(details, how, problem="not a list of {file, batch_size, mode} entries")]
    for ent in entries:
        if not isinstance(ent, dict) or not isinstance(ent.get("file"), str):
            out.append(CaptureSource(details, how, problem=f"entry without a file name: {ent!r}"[:200]))
            continue
        p = os.path.join(folder, ent["file"])
        bs = ent.get("batch_size")
        bs = bs if isinstance(bs, int) and not isinstance(bs, bool) else None
        mode = ent.get("mode") if isinstance(ent.get("mode"), str) else None
        problem = None if os.path.isfile(p) else "listed in execution_details.json, file absent"
        out.append(CaptureSource(p, how, bs, mode, problem))
    return out


def _from_folder(folder: str, how: str) -> list[CaptureSource]:
    if os.path.isfile(os.path.join(folder, "execution_details.json")):
        return _from_details(folder, how + "execution_details.json")
    return [CaptureSource(p, how) for p in _traces_in(folder)]


def capture_sources(trace: Trace, capture: str | None = None) -> list[CaptureSource]:
    """The capture traces for ``trace`` (module doc, step 1), each with why it is unusable if it is."""
    out: list[CaptureSource] = []
    if capture == NO_CAPTURE:
        return out
    if capture is not None:
        if os.path.isfile(capture):
            out = [CaptureSource(capture, "--capture")]
        elif os.path.isdir(capture):
            sub = os.path.join(capture, "capture_traces")
            if not os.path.isfile(os.path.join(capture, "execution_details.json")) and os.path.isdir(sub):
                out = _from_folder(sub, "--capture capture_traces/")
            else:
                out = _from_folder(capture, "--capture ")
            if not out:
                raise UsageError(f"--capture {capture}: no trace and no execution_details.json in this folder")
        else:
            raise UsageError(f"--capture {capture}: no such file or folder")
    else:
        beside = os.path.join(os.path.dirname(os.path.abspath(trace.path)), "capture_traces")
        if os.path.isdir(beside):
            out = _from_folder(beside, "capture_traces/")
    checked = []
    for s in out:
        r = rank_from_name(os.path.basename(s.path))
        if s.problem is None and r is not None and r != trace.rank:
            s = CaptureSource(s.path, s.how, s.batch_size, s.mode, f"names rank {r}, not rank {trace.rank}")
        if s.problem is None and os.path.abspath(s.path) == os.path.abspath(trace.path):
            s = CaptureSource(s.path, "this trace", s.batch_size, s.mode)
        checked.append(s)
    if not any(s.how == "this trace" for s in checked) and not capture_graphs(trace).empty:
        checked.append(CaptureSource(trace.path, "this trace"))
    return checked


def _load_capture(trace: Trace, src: CaptureSource) -> Trace:
    if src.how == "this trace":
        return trace
    from ranksight.model.run import load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank-from-order and similar notes about the capture file
        run = load(src.path)
    return run[run.ranks[0]]


@dataclass
class Attribution:
    """The attribution of one replay trace (module doc).

    - ``sources``: every capture source considered (:class:`CaptureSource`);
    - ``captures``: one row per capture graph of the usable sources: ``source`` (index), ``cgraph``,
      ``launches``, ``named``, ``replays`` (replays matched to it), ``graph`` (the replayed graph, or null);
    - ``assignments``: one row per replay: ``launch_row, graph, replay, source, cgraph, method, score,
      candidates`` (tied capture graphs);
    - ``kernels``: one row per replayed GPU activity: ``row, launch_row, graph, replay, pos, kind, name,
      stream, dur_ns, match, confidence, source, cgraph, capture_row, capture_api, op, op_stack,
      input_dims, module, call_stack, attributed_as`` (what the activity is attributed to, in words);
    - ``unmatched``: what did not match: ``what`` (``graph``, ``replay kernel``, ``capture launch``,
      ``capture graph``), ``graph``, ``source``, ``cgraph``, ``pos``, ``name``, ``why``;
    - ``notes``.
    """

    sources: list[CaptureSource]
    captures: pl.DataFrame
    assignments: pl.DataFrame
    kernels: pl.DataFrame
    unmatched: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    graphs: dict[int, CaptureGraphs] = field(default_factory=dict)

    @property
    def matched_ns(self) -> int:
        m = self.kernels.filter(pl.col("capture_row").is_not_null())
        return int(m["dur_ns"].fill_null(0).sum()) if m.height else 0

    @property
    def replayed_ns(self) -> int:
        return int(self.kernels["dur_ns"].fill_null(0).sum()) if self.kernels.height else 0


_ASSIGN_SCHEMA = {
    "launch_row": pl.UInt32,
    "graph": pl.Int64,
    "replay": pl.Int64,
    "source": pl.Int64,
    "cgraph": pl.Int64,
    "method": pl.String,
    "score": pl.Float64,
    "candidates": pl.Int64,
}
_PAIR_SCHEMA = {"signature": pl.UInt64, "seq": pl.Int64, "pos": pl.Int64, "idx": pl.Int64}
_UNMATCHED_SCHEMA = {
    "what": pl.String,
    "graph": pl.Int64,
    "source": pl.Int64,
    "cgraph": pl.Int64,
    "pos": pl.Int64,
    "name": pl.String,
    "why": pl.String,
}
_KERNEL_SCHEMA = {
    "row": pl.UInt32,
    "launch_row": pl.UInt32,
    "graph": pl.Int64,
    "replay": pl.Int64,
    "pos": pl.Int64,
    "kind": pl.String,
    "name": pl.String,
    "stream": pl.Int64,
    "dur_ns": pl.Int64,
    "match": pl.String,
    "confidence": pl.Float64,
    "source": pl.Int64,
    "cgraph": pl.Int64,
    "capture_row": pl.UInt32,
    "capture_api": pl.String,
    "op": pl.String,
    "op_stack": pl.String,
    "input_dims": pl.String,
    "module": pl.String,
    "call_stack": pl.String,
    "attributed_as": pl.String,
}


# ---- alignment -----------------------------------------------------------------------------------


def _blocks(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """Index pairs of the longest matching blocks of two code sequences (``difflib``, no junk heuristic)."""
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(blk.a + i, blk.b + i) for blk in sm.get_matching_blocks() for i in range(blk.size)]


def _multistream(keys: list[int], streams: list[int], ckeys: list[int]) -> list[tuple[int, int]]:
    """Pair captured launches (CPU order) with the replayed activities of several streams (GPU order per
    stream): each launch goes to the stream whose next unmatched activity has its key (ties: the longest
    run that follows); what is left is aligned per stream by matching blocks."""
    queues: dict[int, deque[int]] = {}
    for p, s in enumerate(streams):
        queues.setdefault(s, deque()).append(p)
    pairs: list[tuple[int, int]] = []
    used_c: set[int] = set()
    for ci, ck in enumerate(ckeys):
        cands = [s for s, q in queues.items() if q and keys[q[0]] == ck]
        if not cands:
            continue
        if len(cands) > 1:

            def run(s: int, ci: int = ci) -> int:
                q, n = queues[s], 0
                while n < len(q) and ci + n < len(ckeys) and keys[q[n]] == ckeys[ci + n]:
                    n += 1
                return n

            cands.sort(key=lambda s: -run(s))
        pairs.append((queues[cands[0]].popleft(), ci))
        used_c.add(ci)
    rest_c = [ci for ci in range(len(ckeys)) if ci not in used_c]
    for _s, q in queues.items():
        if not q or not rest_c:
            continue
        left = list(q)
        got = _blocks([keys[p] for p in left], [ckeys[c] for c in rest_c])
        taken = {rest_c[j] for _i, j in got}
        pairs.extend((left[i], rest_c[j]) for i, j in got)
        rest_c = [c for c in rest_c if c not in taken]
    return sorted(pairs)


@dataclass
class _Seq:
    """A capture graph's launch keys as codes (None = no name recorded)."""

    source: int
    cgraph: int
    codes: list[int | None]
    named: bool
    counts: Counter[int]


def _align(
    keys: list[int], streams: list[int], seq: _Seq, fixed: dict[int, int]
) -> tuple[list[tuple[int, int]], str, float]:
    """Pairs (replay position, capture index), the method and the score of one replayed sequence against
    one capture graph. ``fixed``: code → 1 for copy/set keys (matched even without kernel names)."""
    n, m = len(keys), len(seq.codes)
    if not n or not m:
        return [], "none", 0.0
    if not seq.named:
        # no names: same length, and copies/sets at the same positions
        if n != m or len(set(streams)) > 1:
            return [], "none", 0.0
        for p in range(n):
            c = seq.codes[p]
            if (keys[p] in fixed) != (c is not None and c in fixed) or (c is not None and c != keys[p]):
                return [], "none", 0.0
        return [(p, p) for p in range(n)], "position", _CONFIDENCE_POSITION
    ckeys = [c if c is not None else -1 for c in seq.codes]
    pairs = _multistream(keys, streams, ckeys) if len(set(streams)) > 1 else _blocks(keys, ckeys)
    score = len(pairs) / max(n, m)
    method = "exact" if len(pairs) == n == m and all(p == c for p, c in pairs) else "aligned"
    if not pairs:
        method = "none"
    return pairs, method, score


# ---- the attribution ----------------------------------------------------------------------------


def _empty(sources: list[CaptureSource], notes: list[str]) -> Attribution:
    return Attribution(
        sources,
        pl.DataFrame(
            schema={
                "source": pl.Int64,
                "cgraph": pl.Int64,
                "launches": pl.Int64,
                "named": pl.Int64,
                "replays": pl.Int64,
                "graph": pl.Int64,
            }
        ),
        pl.DataFrame(schema=_ASSIGN_SCHEMA),
        pl.DataFrame(schema=_KERNEL_SCHEMA),
        pl.DataFrame(schema=_UNMATCHED_SCHEMA),
        notes,
    )


def _fallback_labels(kern: pl.DataFrame) -> pl.DataFrame:
    """``attributed_as`` for activities without a capture match: the graph node, else the taxonomy."""
    names = kern.filter(pl.col("kind") == "kernel")["name"].unique()
    tax = kernel_taxonomy(names).select("name", "family", "library") if names.len() else None
    out = kern
    if tax is not None:
        out = out.join(tax, on="name", how="left")
    else:
        out = out.with_columns(pl.lit(None, pl.String).alias("family"), pl.lit(None, pl.String).alias("library"))
    tax_label = (
        pl.when(pl.col("kind") != "kernel")
        .then(pl.col("kind"))
        .otherwise(pl.col("family") + pl.lit(" (") + pl.col("library").fill_null("library unknown") + pl.lit(")"))
    )
    node_label = (
        pl.lit("graph ")
        + pl.col("graph_id").cast(pl.String)
        + pl.lit(" node ")
        + pl.col("graph_node_id").cast(pl.String)
    )
    has_node = pl.col("graph_node_id").is_not_null()
    unmatched = pl.col("capture_row").is_null()
    op_label = pl.col("op").fill_null(pl.lit("no operator (") + pl.col("capture_api") + pl.lit(")"))
    return out.with_columns(
        pl.when(~unmatched)
        .then(pl.col("match"))
        .when(has_node)
        .then(pl.lit("graph node"))
        .otherwise(pl.lit("taxonomy"))
        .alias("match"),
        pl.when(~unmatched).then(op_label).when(has_node).then(node_label).otherwise(tax_label).alias("attributed_as"),
    ).drop("family", "library")


def _step_tokens(trace: Trace, reps: pl.DataFrame) -> dict[int, int]:
    """Graph launch row → the tokens (else requests) of the serving step whose CPU span holds the launch."""
    st = serving_steps(trace)
    if not st.height:
        return {}
    size = pl.coalesce(pl.col("prefill_tokens") + pl.col("decode_tokens"), pl.col("batch_size"))
    win = st.select("pid", "cpu_start_ns", "cpu_end_ns", size.alias("size")).sort("cpu_start_ns")
    j = (
        reps.select("launch_row", "pid", "cpu_ts_ns")
        .sort("cpu_ts_ns")
        .join_asof(win, left_on="cpu_ts_ns", right_on="cpu_start_ns", by="pid", check_sortedness=False)
        .filter(pl.col("size").is_not_null() & (pl.col("cpu_ts_ns") <= pl.col("cpu_end_ns")))
    )
    return {int(r): int(n) for r, n in j.select("launch_row", "size").iter_rows()}


def _pick_source(cands: list[int], sources: list[CaptureSource], size: int | None, graph: int, notes: list[str]) -> int:
    """One of several capture sources that match a replay equally: the smallest listed ``batch_size`` that is
    at least the replay's step size (tokens, else requests; TraceLens's rule for its capture folders), else the
    first, with a note."""
    if len(cands) == 1:
        return cands[0]
    sized = [(sources[i].batch_size, i) for i in cands if sources[i].batch_size is not None]
    if size is not None and sized:
        fit = sorted((b, i) for b, i in sized if b is not None and b >= size)
        if fit:
            return fit[0][1]
    note = (
        f"graph {graph}: {len(cands)} capture sources match equally and no listed batch size decides "
        f"(step size {size if size is not None else 'not annotated'}); the first is used ({sources[cands[0]].path})"
    )
    if note not in notes:
        notes.append(note)
    return cands[0]


def _compute(trace: Trace, capture: str | None) -> Attribution:
    reps = graph_replays(trace)
    sources = capture_sources(trace, capture) if reps.height else []
    notes: list[str] = []
    if not reps.height:
        return _empty(sources, ["no graph replay in this trace"])
    acts = replay_activities(trace)
    # capture graphs of every usable source
    graphs: dict[int, CaptureGraphs] = {}
    for i, s in enumerate(sources):
        if s.problem is not None:
            continue
        try:
            cg = capture_graphs(_load_capture(trace, s))
        except Exception as e:  # noqa: BLE001 - an unreadable capture is reported, the replay still analysed
            sources[i] = CaptureSource(s.path, s.how, s.batch_size, s.mode, f"not loaded: {e}")
            continue
        if cg.empty:
            sources[i] = CaptureSource(s.path, s.how, s.batch_size, s.mode, "records no graph capture")
            continue
        graphs[i] = cg
    # codes: one integer per distinct matching key, shared by both sides
    code: dict[str, int] = {}

    def enc(k: str | None) -> int | None:
        if k is None:
            return None
        return code.setdefault(k, len(code))

    fixed = {enc("<memcpy>"): 1, enc("<memset>"): 1}
    fixed_codes = {k: v for k, v in fixed.items() if k is not None}
    seqs: list[_Seq] = []
    for si, cg in graphs.items():
        for (cgi,), part in cg.launches.sort("cgraph", "idx").group_by(["cgraph"], maintain_order=True):
            codes = [enc(k) for k in part["key"].to_list()]
            named = any(c is not None and c not in fixed_codes for c in codes)
            seqs.append(_Seq(si, int(cgi), codes, named, Counter(c for c in codes if c is not None)))
    # one representative sequence per replayed signature
    first = reps.sort("gpu_start_ns").unique("signature", keep="first", maintain_order=True)
    rep_acts = acts.join(first.select("launch_row", "signature", "graph"), on="launch_row").sort("launch_row", "pos")
    pair_rows: list[tuple[int, int, int, int]] = []
    choice: dict[int, tuple[list[int], str, float]] = {}  # signature -> (seq indices tied, method, score)
    unmatched: list[dict[str, object]] = []
    seq_alignments: dict[tuple[int, int], tuple[list[tuple[int, int]], str, float]] = {}
    for (sig,), part in rep_acts.group_by(["signature"], maintain_order=True):
        keys = [enc(k) for k in part["key"].to_list()]
        ikeys = [k for k in keys if k is not None]
        streams = part["stream"].fill_null(-1).to_list()
        graph = int(part["graph"][0])
        kc = Counter(ikeys)
        best: list[int] = []
        best_score, best_method = 0.0, "none"
        # candidates by an upper bound on the score (shared keys), then aligned
        bounds = []
        for j, sq in enumerate(seqs):
            if sq.named:
                ub = sum((kc & sq.counts).values()) / max(len(ikeys), len(sq.codes))
            else:
                ub = _CONFIDENCE_POSITION if len(sq.codes) == len(ikeys) else 0.0
            bounds.append((ub, j))
        bounds.sort(key=lambda x: (-x[0], x[1]))
        for ub, j in bounds:
            if ub <= 0 or ub + 1e-12 < best_score:
                break
            pairs, method, score = _align(ikeys, streams, seqs[j], fixed_codes)
            seq_alignments[(int(sig), j)] = (pairs, method, score)
            if score > best_score + 1e-12:
                best, best_score, best_method = [j], score, method
            elif score > 0 and abs(score - best_score) <= 1e-12:
                best.append(j)
        if not best:
            why = "no capture source" if not graphs else "no capture graph shares its kernels"
            unmatched.append({"what": "graph", "graph": graph, "name": f"{len(keys)} activities", "why": why})
            continue
        best.sort(key=lambda j: (seqs[j].source, seqs[j].cgraph))
        choice[int(sig)] = (best, best_method, best_score)
        for j in best:
            for p, c in seq_alignments[(int(sig), j)][0]:
                pair_rows.append((int(sig), j, p, c))
    # per replay: the source (by batch size when tied sources differ), then its tied capture graphs in turn
    step_tokens = _step_tokens(trace, reps)
    assign_rows: list[tuple[object, ...]] = []
    for (sig,), part in reps.sort("gpu_start_ns").group_by(["signature"], maintain_order=True):
        ch = choice.get(int(sig))
        turn: Counter[int] = Counter()
        for lrow, graph, replay in part.select("launch_row", "graph", "replay").iter_rows():
            if ch is None:
                assign_rows.append((lrow, graph, replay, None, None, None, None, 0, None))
                continue
            tied, method, score = ch
            src = _pick_source(sorted({seqs[j].source for j in tied}), sources, step_tokens.get(lrow), graph, notes)
            mine = [j for j in tied if seqs[j].source == src]
            j = mine[turn[src] % len(mine)]
            turn[src] += 1
            assign_rows.append((lrow, graph, replay, seqs[j].source, seqs[j].cgraph, method, score, len(mine), j))
    assign = pl.DataFrame(
        assign_rows,
        schema={**_ASSIGN_SCHEMA, "seq": pl.Int64},
        orient="row",
    )
    pairs_df = pl.DataFrame(pair_rows, schema=_PAIR_SCHEMA, orient="row")
    # the activities, their capture launch and what the capture knows of it
    kern = acts.join(reps.select("launch_row", "graph", "replay", "signature"), on="launch_row")
    kern = kern.join(assign.select("launch_row", "source", "cgraph", "method", "score", "seq"), on="launch_row")
    kern = kern.join(pairs_df, on=["signature", "seq", "pos"], how="left")
    launch_info = []
    for si, cg in graphs.items():
        launch_info.append(cg.launches.with_columns(pl.lit(si, pl.Int64).alias("source")))
    if launch_info:
        li = pl.concat(launch_info).select(
            "source",
            "cgraph",
            "idx",
            pl.col("row").alias("capture_row"),
            pl.col("api").alias("capture_api"),
            "op",
            "op_stack",
            "input_dims",
            "module",
            "call_stack",
        )
        kern = kern.join(li, on=["source", "cgraph", "idx"], how="left")
    else:
        kern = kern.with_columns(
            pl.lit(None, pl.UInt32).alias("capture_row"),
            *[
                pl.lit(None, pl.String).alias(c)
                for c in ("capture_api", "op", "op_stack", "input_dims", "module", "call_stack")
            ],
        )
    conf = (
        pl.when(pl.col("capture_row").is_null())
        .then(None)
        .when(pl.col("method") == "exact")
        .then(1.0)
        .when(pl.col("method") == "position")
        .then(_CONFIDENCE_POSITION)
        .otherwise(pl.col("score"))
    )
    kern = kern.with_columns(pl.col("method").alias("match"), conf.alias("confidence"))
    kern = _fallback_labels(kern)
    kern = kern.select(list(_KERNEL_SCHEMA)).cast(_KERNEL_SCHEMA).sort("graph", "replay", "pos")  # type: ignore[arg-type]
    # what did not match, per graph (not per replay)
    firsts = kern.join(first.select("launch_row"), on="launch_row", how="semi")
    for graph, pos, name, why_src in (
        firsts.filter(pl.col("capture_row").is_null() & pl.col("source").is_not_null())
        .select("graph", "pos", "name", "source")
        .iter_rows()
    ):
        unmatched.append(
            {
                "what": "replay kernel",
                "graph": graph,
                "source": why_src,
                "pos": pos,
                "name": name,
                "why": "not in the matched capture graph",
            }
        )
    used = assign.filter(pl.col("seq").is_not_null()).select("graph", "source", "cgraph", "seq").unique()
    used_pairs = pairs_df.select("signature", "seq", "idx").unique()
    for graph, si, cgi, j in used.sort("graph", "source", "cgraph").iter_rows():
        sig_of = first.filter(pl.col("graph") == graph)["signature"].to_list()
        got = set(used_pairs.filter(pl.col("seq") == j, pl.col("signature").is_in(sig_of))["idx"].to_list())
        cl = graphs[si].launches.filter(pl.col("cgraph") == cgi).sort("idx")
        for idx, key, api in cl.select("idx", "key", "api").iter_rows():
            if idx not in got:
                unmatched.append(
                    {
                        "what": "capture launch",
                        "graph": graph,
                        "source": si,
                        "cgraph": cgi,
                        "pos": idx,
                        "name": key or api,
                        "why": "recorded in the capture, not replayed",
                    }
                )
    cap_rows = []
    for si, cg in graphs.items():
        cap_rows.append(
            cg.windows.select("cgraph", "launches", "named").with_columns(pl.lit(si, pl.Int64).alias("source"))
        )
    captures = (
        pl.concat(cap_rows)
        if cap_rows
        else pl.DataFrame(schema={"cgraph": pl.Int64, "launches": pl.Int64, "named": pl.Int64, "source": pl.Int64})
    )
    per_cap = (
        assign.filter(pl.col("source").is_not_null())
        .group_by("source", "cgraph")
        .agg(pl.len().cast(pl.Int64).alias("replays"), pl.col("graph").first())
    )
    captures = (
        captures.join(per_cap, on=["source", "cgraph"], how="left")
        .with_columns(pl.col("replays").fill_null(0))
        .select("source", "cgraph", "launches", "named", "replays", "graph")
        .sort("source", "cgraph")
    )
    for si, cgi in captures.filter(pl.col("replays") == 0).select("source", "cgraph").iter_rows():
        unmatched.append(
            {"what": "capture graph", "source": si, "cgraph": cgi, "why": "captured, not replayed in this trace"}
        )
    um = pl.DataFrame(
        [{k: u.get(k) for k in _UNMATCHED_SCHEMA} for u in unmatched], schema=_UNMATCHED_SCHEMA, orient="row"
    )
    return Attribution(sources, captures, assign.drop("seq"), kern, um, notes, graphs)


def graph_attribution(trace: Trace, capture: str | None = None) -> Attribution:
    """The attribution of ``trace``'s graph replays (module doc); ``capture``: a path, :data:`NO_CAPTURE`, or
    None (found beside the trace). Memoised per trace and ``capture``."""
    out: Attribution = trace.memo(f"graph_attribution:{capture}", lambda: _compute(trace, capture))
    return out


# ---- the trace the operator analyses read --------------------------------------------------------

_COPY_START = "graph_attribution:copy_start"


def replay_copy_start(trace: Trace) -> int | None:
    """In a trace made by :func:`operator_trace`: the first row of the copied capture events (rows from it
    on stand for operators replayed from a graph: they took no host time in the replay); else None."""
    out: int | None = trace.memo(_COPY_START, lambda: None)
    return out


def operator_trace(trace: Trace, capture: str | None = None) -> Trace:
    """``trace`` with each matched graph replay's capture-side operators put back (what the operator analyses
    read; every other analysis reads the trace itself).

    For each replay matched to a capture graph, the graph's template (:mod:`ranksight.views.graph_capture`:
    the capture window's operators, annotations, ``nn.Module`` frames and captured launches) is copied onto
    the replaying CPU thread, inside the graph launch call's time: boundaries at ``launch start + 1 +
    rank × min(1, (launch duration − 2) / points)`` ns, so the copies nest as they did at capture time,
    under whatever encloses the launch, and start after the launch (which keeps its own owner). Copies get
    new rows after the trace's last, new External ids (unique per replay), the launch's step; each matched
    activity's ``launch_row`` moves from the graph launch to its captured launch's copy (``gpu_count``
    follows), and the copies' ``op`` side-table rows (``Input Dims``, module ids) come along. The graph
    launch keeps the activities nothing matched. :func:`replay_copy_start` gives the first copied row.
    Returns ``trace`` itself when nothing is matched.
    """
    att = graph_attribution(trace, capture)
    if not att.kernels.height or att.kernels["capture_row"].null_count() == att.kernels.height:
        return trace
    out: Trace = trace.memo(f"graph_attribution:trace:{capture}", lambda: _build(trace, att))
    return out


@dataclass(frozen=True)
class ReplayShare:
    """How much of one rank's GPU work replayed from graphs the operator analyses can give an operator.

    ``replayed_ns``: Σ durations of the activities graph launches ran; ``attributed_ns``: of it, matched to a
    capture-side launch (so counted for the operator that made it); ``by_match``: ``(match, ns)`` of the
    attributed part per match kind (``exact``, ``aligned``, ``position``), in :data:`MATCH_KINDS` order;
    ``min_confidence``: the lowest confidence among the attributed activities (None when none is);
    ``module_ns``: of the attributed part, what the capture knows an ``nn.Module`` frame around."""

    rank: int
    replayed_ns: int
    attributed_ns: int
    by_match: tuple[tuple[str, int], ...] = ()
    min_confidence: float | None = None
    module_ns: int = 0

    @property
    def unattributed_ns(self) -> int:
        return self.replayed_ns - self.attributed_ns


def attributed_operators(trace: Trace, capture: str | None = None) -> tuple[Trace, ReplayShare]:
    """The one entry point of the operator analyses (``ops``, ``op-kernels``, ``modules``, ``mfu``,
    ``op-perf``, ``diff``'s kernels by launching op): :func:`operator_trace` (the trace with each matched
    replay's capture-side operators put back; the trace itself when nothing matched) and the
    :class:`ReplayShare` that says how much of the replayed GPU time it attributes."""
    k = graph_attribution(trace, capture).kernels
    matched = k.filter(pl.col("capture_row").is_not_null())
    by = dict(matched.group_by("match").agg(pl.col("dur_ns").fill_null(0).sum()).iter_rows()) if matched.height else {}
    conf = matched["confidence"].min() if matched.height else None
    share = ReplayShare(
        trace.rank,
        int(k["dur_ns"].fill_null(0).sum()) if k.height else 0,
        int(matched["dur_ns"].fill_null(0).sum()) if matched.height else 0,
        tuple((m, int(by[m])) for m in MATCH_KINDS if m in by),
        None if conf is None else float(conf),  # type: ignore[arg-type]
        int(matched.filter(pl.col("module").is_not_null())["dur_ns"].fill_null(0).sum()) if matched.height else 0,
    )
    return operator_trace(trace, capture), share


def _build(trace: Trace, att: Attribution) -> Trace:
    ev = trace.events
    schema = ev.schema
    start_row = int(ev["row"].max()) + 1  # type: ignore[arg-type]
    ext_max = ev["external_id"].max()
    ext_base = (int(ext_max) if ext_max is not None else 0) + 1  # type: ignore[arg-type]
    reps = graph_replays(trace).select("launch_row", "pid", "tid", "cpu_ts_ns", "cpu_dur_ns", "step")
    inst = (
        att.assignments.filter(pl.col("source").is_not_null())
        .join(reps, on="launch_row")
        .sort("launch_row")
        .with_row_index("inst")
        .with_columns(pl.col("inst").cast(pl.Int64))
    )
    parts, op_parts = [], []
    for si, cg in att.graphs.items():
        t = cg.template.with_columns(pl.lit(si, pl.Int64).alias("source"))
        pts = pl.DataFrame(
            {"cgraph": list(cg.points), "points": list(cg.points.values())},
            schema={"cgraph": pl.Int64, "points": pl.Int64},
        )
        t = t.join(pts, on="cgraph")
        ext_span = int(t["external_id"].fill_null(0).max() or 0) + 1  # type: ignore[arg-type]
        parts.append((t, ext_span))
        op_parts.append(cg.ops.with_columns(pl.lit(si, pl.Int64).alias("source")))
    ext_span = max(s for _, s in parts)
    tmpl = pl.concat([t for t, _ in parts], how="diagonal_relaxed")
    tmpl = tmpl.rename({"row": "capture_row"})
    copies = inst.select(
        "inst", "launch_row", "source", "cgraph", "pid", "tid", "cpu_ts_ns", "cpu_dur_ns", "step"
    ).join(tmpl.drop("pid", "tid", "step"), on=["source", "cgraph"])
    copies = copies.sort("inst", "capture_row").with_row_index("__i")
    scale = pl.min_horizontal(pl.lit(1.0), (pl.col("cpu_dur_ns") - 2).clip(0) / pl.col("points"))
    at = lambda c: pl.col("cpu_ts_ns") + 1 + (pl.col(c) * scale).floor().cast(pl.Int64)  # noqa: E731
    copies = copies.with_columns(
        (pl.col("__i").cast(pl.Int64) + start_row).alias("row"),
        at("t_start").alias("ts_ns"),
        at("t_end").alias("end_ns"),
        pl.when(pl.col("external_id").is_null() | (pl.col("external_id") == 0))
        .then(pl.col("external_id"))
        .otherwise(ext_base + pl.col("inst") * ext_span + pl.col("external_id"))
        .alias("external_id"),
        pl.lit(None, pl.Int64).alias("correlation"),
        pl.lit(None, pl.UInt32).alias("launch_row"),
    ).with_columns((pl.col("end_ns") - pl.col("ts_ns")).alias("dur_ns"))
    # the matched activities move to their captured launch's copy
    moved = (
        att.kernels.filter(pl.col("capture_row").is_not_null())
        .select("row", pl.col("launch_row").alias("graph_launch"), "source", "capture_row")
        .join(inst.select(pl.col("launch_row").alias("graph_launch"), "inst"), on="graph_launch")
        .join(
            copies.select("inst", "source", "capture_row", pl.col("row").alias("new_launch")),
            on=["inst", "source", "capture_row"],
        )
    )
    n_new = moved.group_by("new_launch").agg(pl.len().cast(pl.Int32).alias("__n"))
    copies = copies.join(n_new, left_on="row", right_on="new_launch", how="left").with_columns(
        pl.when(pl.col("kind").is_in(["cuda_runtime", "cuda_driver"]))
        .then(pl.col("__n").fill_null(0))
        .otherwise(pl.col("gpu_count"))
        .alias("gpu_count")
    )
    left = moved.group_by("graph_launch").agg(pl.len().cast(pl.Int32).alias("__moved"))
    base = (
        ev.join(moved.select("row", "new_launch"), on="row", how="left", maintain_order="left")
        .join(left, left_on="row", right_on="graph_launch", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce(pl.col("new_launch").cast(pl.UInt32), pl.col("launch_row")).alias("launch_row"),
            (pl.col("gpu_count") - pl.col("__moved").fill_null(0)).alias("gpu_count"),
        )
        .select(list(schema))
    )
    new = copies.with_columns(pl.col("row").cast(pl.UInt32)).select(list(schema)).cast(schema)
    events = pl.concat([base, new])
    out = trace.with_events(events)
    row_map = copies.select("source", "capture_row", "inst", pl.col("row").cast(pl.UInt32).alias("__new"))
    op_table = trace.table("op")
    if op_parts:
        cops = pl.concat(op_parts, how="diagonal_relaxed").rename({"row": "capture_row"})
        cops = cops.join(row_map, on=["source", "capture_row"]).drop("source", "capture_row", "inst")
        cops = cops.rename({"__new": "row"})
        cops = cops.select([c for c in op_table.columns if c in cops.columns])
        op_table = pl.concat([op_table, cops], how="diagonal_relaxed")
    tables = {name: trace.table(name) for name in trace.tables}
    tables["op"] = op_table
    out.tables = LazyTables(tables)
    out.memo(_COPY_START, lambda: start_row)
    return out
