"""Run context: what kind of run one trace records, each answer with the evidence for it.

:func:`run_context` reads one trace and returns a :class:`RunContext`:

- ``mode``: ``training`` (backward or optimizer operators), ``inference`` (serving markers of
  vLLM / SGLang / TensorRT-LLM, or GPU work with CPU operators recorded and no backward and no
  optimizer operator), ``unknown`` (no CPU operators recorded, or no GPU work).
- ``graphs``: ``capture`` (graphs captured while profiling: launches recorded under capture ran
  no kernel), ``replay`` (graph launches), ``capture+replay`` (both), ``none`` (runtime calls
  recorded, no graph API), ``unknown`` (no runtime calls recorded).
- ``compiled``: ``yes`` (torch.compile / Inductor evidence), ``no``, ``unknown`` (neither CPU
  operators nor kernels recorded, so absence says nothing).
- ``parallel_hints``: ``tensor``, ``pipeline``, ``expert``, ``data``, ``context``: hints, not
  facts (process group descriptions, send/recv and all-to-all operators, the kernel taxonomy's
  all-to-all kernels such as DeepEP dispatch/combine, DDP/FSDP ranges).
- ``precision``: the precision of more than half of the GPU matrix-kernel time (gemm / attention /
  convolution kernels), from the rank's kernel taxonomy (the name's precision, else the launching
  operator's input dtype), so that it and ``kernel-taxonomy`` give one number; ``unknown`` when no
  precision covers more than half.
- the device: vendor, model, architecture (from ``deviceProperties``, as ``info`` reads them).

Every rule, its evidence and its known limits are in ``docs/run-context.md``. Names are tested
once per distinct name (no Python per event); the result is memoised per trace.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from ranksight.model.kinds import GPU_KINDS, LAUNCH_KINDS
from ranksight.model.taxonomy import LOW_PRECISIONS, MATRIX_FAMILIES, kernel_taxonomy
from ranksight.views.event_source import EventSource
from ranksight.views.kernel_taxonomy import kernel_taxonomy_table
from ranksight.views.rank_slices import RankSlices, seed_memos

if TYPE_CHECKING:
    from ranksight.model.trace import Trace

__all__ = [
    "RunContext",
    "MODES",
    "GRAPHS",
    "COMPILED",
    "HINTS",
    "PRECISIONS",
    "LOW_PRECISIONS",
    "run_context",
    "seed_name_tables",
    "context_line",
    "architecture_of",
]

MODES = ("training", "inference", "unknown")
GRAPHS = ("capture", "replay", "capture+replay", "none", "unknown")
COMPILED = ("yes", "no", "unknown")
#: parallelism hints, in the order they are listed
HINTS = ("tensor", "pipeline", "expert", "data", "context")
#: precisions (the kernel taxonomy's); ``LOW_PRECISIONS`` (below 32 bits) and ``MATRIX_FAMILIES`` (whose
#: kernel time decides the dominant precision) are the taxonomy's too
PRECISIONS = ("fp4", "fp8", "int8", "bf16", "fp16", "tf32", "fp32", "fp64", "unknown")


@dataclass(frozen=True)
class RunContext:
    """What kind of run a trace records (one rank). ``evidence`` maps each answer (``mode``,
    ``graphs``, ``compiled``, ``parallel``, ``precision``, ``device``) to what was seen."""

    mode: str
    graphs: str
    compiled: str
    parallel_hints: tuple[str, ...]
    precision: str
    evidence: dict[str, str] = field(default_factory=dict)
    #: ``CUDA`` or ``HIP`` (the graph API seen), None without graphs
    graph_api: str | None = None
    #: graph launches (``cudaGraphLaunch`` / ``hipGraphLaunch`` / ``cuGraphLaunch``)
    graph_launches: int = 0
    #: GPU activities those launches own (kernels replayed from graphs)
    graph_kernels: int = 0
    #: graphs captured (``*StreamEndCapture`` calls)
    graph_captures: int = 0
    #: launch calls made while a stream was capturing: recorded, not executed (no GPU record)
    captured_launches: int = 0
    #: share (0–1) of matrix-kernel time at ``precision``; None when unknown
    precision_share: float | None = None
    #: where ``precision`` came from: ``kernel names``, ``op dtypes``, both, or None
    precision_source: str | None = None
    gpu_vendor: str | None = None
    gpu_model: str | None = None
    gpu_arch: str | None = None

    @property
    def is_training(self) -> bool:
        return self.mode == "training"

    @property
    def is_inference(self) -> bool:
        return self.mode == "inference"

    @property
    def is_capture(self) -> bool:
        """Graphs were captured while profiling: some recorded launches ran no kernel."""
        return self.graphs in ("capture", "capture+replay")

    @property
    def replays_graphs(self) -> bool:
        return self.graphs in ("replay", "capture+replay")

    @property
    def is_compiled(self) -> bool:
        return self.compiled == "yes"

    @property
    def low_precision(self) -> bool:
        """Most matrix-kernel time runs below 32 bits (fp4/fp8/int8/fp16/bf16)."""
        return self.precision in LOW_PRECISIONS


# ---- the evidence, as patterns tested once per distinct name ------------------------------------

#: autograd nodes (``MmBackward0``, ``CompiledFunctionBackward``), the engine's wrapper, aten backward ops
_BACKWARD = re.compile(
    r"^autograd::engine::evaluate_function: |^[A-Z][A-Za-z0-9]*Backward\d*$|^aten::\w+_backward(?:_\w+)?$"
)
#: optimizer step / zero_grad annotations (``Optimizer.step#AdamW.step``) and fused optimizer kernels' ops
_OPTIMIZER = re.compile(
    r"^Optimizer\.(?:step|zero_grad)#|^optimizer\.zero_grad\b|^aten::_fused_(?:adamw?|sgd|adagrad)_?$"
)
#: serving frameworks: (label, pattern on annotations / ops / Python frames)
_SERVING: tuple[tuple[str, re.Pattern[str]], ...] = (
    # vLLM's step ranges: `execute_context_1(128)_generation_0(0)`; the traces of TraceLens (vLLM and SGLang)
    # also carry `execute_32_context_0(…)_generation_32(…)`
    ("vLLM step annotation", re.compile(r"^execute_(?:\d+_)?context_\d+")),
    ("vLLM model runner frame", re.compile(r"(?:^|/)vllm/(?:v1/)?worker/\w*model_runner\.py\(")),
    ("SGLang step annotation", re.compile(r"^step\[[A-Z_]+ bs=\d+")),
    ("SGLang model executor frame", re.compile(r"(?:^|/)sglang/srt/model_executor/")),
    ("serving graph-capture annotation", re.compile(r"^capture_\d+_(?:FULL|PIECEWISE|DECODE|EXTEND|PREFILL)$")),
    ("TensorRT-LLM frame", re.compile(r"(?:^|/)tensorrt_llm/")),
    ("TensorRT-LLM op", re.compile(r"^trtllm::")),
)
_GRAD_MODE = re.compile(r"(?:^|/)torch/autograd/grad_mode\.py\(")

_CAPTURE_BEGIN = re.compile(r"^(?:cuda|hip|cu)StreamBeginCapture")
_CAPTURE_END = re.compile(r"^(?:cuda|hip|cu)StreamEndCapture")
_INSTANTIATE = re.compile(r"^(?:cuda|hip|cu)GraphInstantiate")
_CAPTURE_FRAME = re.compile(r"(?:^|/)torch/cuda/graphs\.py\(\d+\): capture_begin$|^CUDAGraph::capture_begin")
_GRAPH_LAUNCH = re.compile(r"^(?:cuda|hip|cu)GraphLaunch")
#: launch calls (kernels, copies, sets) that a capture records instead of running
_LAUNCH_CALL = re.compile(r"^(?:cuda|hip|cu)\w*(?:LaunchKernel|Memcpy|Memset)|^cuLaunchKernel")

_COMPILED_OP = re.compile(r"^Torch-Compiled Region|^CompiledFunction(?:Backward)?$|^## Call CompiledFxGraph")
_INDUCTOR_KERNEL = re.compile(r"^triton_(?:poi|red|per|tem)_")
_INDUCTOR_FRAME = re.compile(r"(?:^|/)torch/_inductor/")

_P2P_OP = re.compile(r"^(?:nccl:|c10d::|gloo:)(?:send|recv|isend|irecv|batch_isend_irecv)")
_A2A_OP = re.compile(r"^(?:nccl:|c10d::|gloo:)all_?to_?all|^c10d::alltoall")
#: DistributedDataParallel / FSDP wrappers' own ranges and the DDP reducer
_DATA_PARALLEL_OP = re.compile(
    r"^DistributedDataParallel\.forward$|^FullyShardedDataParallel\.|^FSDP::|^torch\.distributed\.ddp\.reducer::"
)
#: process-group description tokens → hint
_PG_TOKENS = {
    "tp": "tensor",
    "tensor": "tensor",
    "pp": "pipeline",
    "pipeline": "pipeline",
    "ep": "expert",
    "expert": "expert",
    "moe": "expert",
    "dp": "data",
    "ddp": "data",
    "fsdp": "data",
    "cp": "context",
}

_CPU_NAME_KINDS = ("cpu_op", "user_annotation", "gpu_user_annotation", "python_function")


def _tokens(s: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", s.lower()) if t]


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {plural or word + 's'}"


def _pct(x: float) -> str:
    """A share as a whole percentage; a non-zero share under 0.5 % is ``<1%``, not ``0%``."""
    return "<1%" if 0 < x < 0.005 else f"{x:.0%}"


def _examples(names: list[str], k: int = 2) -> str:
    names = list(dict.fromkeys(names))  # one name may come from two kinds (annotation on CPU and GPU)
    shown = ", ".join(f"`{n[:60]}`" for n in names[:k])
    return shown + (f" (+{len(names) - k} more)" if len(names) > k else "")


def architecture_of(props: dict[str, Any] | None, vendor: str | None) -> str | None:
    """The GPU architecture from a ``deviceProperties`` entry (compute capability / gfx major.minor)."""
    if not props:
        return None
    try:
        major, minor = int(props["computeMajor"]), int(props["computeMinor"])
    except (KeyError, TypeError, ValueError):
        return None
    if vendor == "AMD":
        amd = {(9, 0): "CDNA 1/2 (gfx908/gfx90a)", (9, 4): "CDNA 3 (gfx94x)", (9, 5): "CDNA 4 (gfx950)"}
        return amd.get((major, minor), f"gfx{major}.{minor}")
    if vendor == "NVIDIA":
        nv = {7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}
        family = nv.get(major)
        if (major, minor) == (7, 5):
            family = "Turing"
        elif (major, minor) == (8, 9):
            family = "Ada"
        return f"{family} (sm_{major}{minor})" if family else f"sm_{major}{minor}"
    return None


def _name_table(trace: Trace) -> pl.DataFrame:
    """``kind, name, n, gpu_count, dur_ns`` per distinct (kind, name) of the events that carry
    evidence (CPU ranges, runtime calls, GPU work); memoised per trace."""
    table: pl.DataFrame = trace.memo("run_context_names", lambda: _name_tables(trace.scan(), []))
    return table


def seed_name_tables(traces: list[Trace], stacked: pl.DataFrame) -> None:
    """Give each trace its name table from one query over the stacked events (``stacked``: a
    ``rank`` column; issue 19); traces that have theirs keep it."""
    traces = [t for t in traces if not t.has_memo("run_context_names")]
    if not traces:
        return
    tables = RankSlices(_name_tables(EventSource.stacked(traces, stacked).ev, ["rank"]), drop=True)
    seed_memos(traces, "run_context_names", tables)


def _name_tables(ev: pl.LazyFrame, by: list[str]) -> pl.DataFrame:
    kinds = [*_CPU_NAME_KINDS, *LAUNCH_KINDS, *GPU_KINDS]
    return (
        ev.filter(pl.col("kind").is_in(kinds))
        .group_by(*by, "kind", "name")
        .agg(
            pl.len().alias("n"),
            pl.col("gpu_count").fill_null(0).sum().cast(pl.Int64).alias("gpu_count"),
            pl.col("dur_ns").fill_null(0).sum().cast(pl.Int64).alias("dur_ns"),
        )
        .collect()
        .with_columns(pl.col("kind").cast(pl.String), pl.col("name").cast(pl.String))
    )


class _Tab:
    """The name table (:func:`_name_table`) and, per kind, the positions and names of its rows:
    read once, matched per pattern (:func:`_matching`)."""

    def __init__(self, df: pl.DataFrame) -> None:
        self.df = df
        rows: dict[str, list[tuple[str, int]]] = {}
        for i, (k, n) in enumerate(zip(df["kind"].to_list(), df["name"].to_list(), strict=True)):
            if n is not None:
                rows.setdefault(k, []).append((n, i))
        # by name: the same names give the same tuple on every rank (the table's row order varies)
        for v in rows.values():
            v.sort()
        self.pos = {k: [i for _, i in v] for k, v in rows.items()}
        self.names = {k: tuple(n for n, _ in v) for k, v in rows.items()}


@functools.lru_cache(maxsize=4096)  # the ranks of a run mostly share their names (issue 19)
def _hits(pattern: re.Pattern[str], names: tuple[str, ...]) -> tuple[int, ...]:
    """Positions in ``names`` of the names ``pattern`` finds."""
    return tuple(i for i, n in enumerate(names) if _hit(pattern, n))


@functools.lru_cache(maxsize=1 << 18)  # names repeat across ranks (issue 19)
def _hit(pattern: re.Pattern[str], name: str | None) -> bool:
    return bool(pattern.search(name)) if name is not None else False


def _matching(tab: _Tab, pattern: re.Pattern[str], kinds: tuple[str, ...]) -> pl.DataFrame:
    # the names are matched in Python (the table has one row per distinct name, and most patterns
    # match nothing): no polars query per pattern unless something matched
    idx = sorted(tab.pos[k][j] for k in set(kinds) if k in tab.pos for j in _hits(pattern, tab.names[k]))
    if not idx:
        return tab.df.clear()
    # most frequent first, then by name: the examples quoted in the evidence are deterministic
    return tab.df[idx].sort(["n", "name"], descending=[True, False])


def _count(df: pl.DataFrame) -> int:
    return int(df["n"].sum()) if df.height else 0


def _mode(tab: _Tab, has_cpu_ops: bool, has_gpu: bool) -> tuple[str, str]:
    cpu = ("cpu_op", "user_annotation")
    bwd = _matching(tab, _BACKWARD, ("cpu_op",))
    opt = _matching(tab, _OPTIMIZER, cpu)
    serving = []
    for label, pat in _SERVING:
        m = _matching(tab, pat, _CPU_NAME_KINDS)
        if m.height:
            serving.append(f"{label} {_examples(m['name'].to_list(), 1)} ×{_count(m):,}")
    if bwd.height or opt.height:
        parts = []
        if bwd.height:
            parts.append(f"{_plural(_count(bwd), 'backward op')} ({_examples(bwd['name'].to_list())})")
        if opt.height:
            parts.append(f"{_plural(_count(opt), 'optimizer op')} ({_examples(opt['name'].to_list())})")
        if serving:
            parts.append("also serving markers: " + "; ".join(serving))
        return "training", "; ".join(parts)
    if serving:
        return "inference", "serving markers: " + "; ".join(serving)
    if has_cpu_ops and has_gpu:
        gm = _matching(tab, _GRAD_MODE, ("python_function",))
        extra = "; grad-mode frames (no_grad / inference_mode) seen" if gm.height else ""
        return "inference", f"GPU work and CPU operators recorded, no backward and no optimizer op{extra}"
    if not has_cpu_ops:
        return "unknown", "no CPU operators recorded (GPU-only trace): backward and optimizer ops cannot be seen"
    return "unknown", "no GPU work and no backward, optimizer or serving marker"


def _captured_launches(trace: Trace) -> int:
    """Launch calls made between a ``*StreamBeginCapture`` and its ``*StreamEndCapture`` on the
    same thread that own no GPU activity (recorded into a graph, not executed)."""
    rt = (
        trace.scan()
        .filter(pl.col("kind").is_in(list(LAUNCH_KINDS)))
        .select("pid", "tid", "name", "ts_ns", "end_ns", "gpu_count")
        .collect()
    )
    names = rt["name"].unique().cast(pl.String).drop_nulls().to_list()
    begin = [n for n in names if _CAPTURE_BEGIN.search(n)]
    end = [n for n in names if _CAPTURE_END.search(n)]
    launch = [n for n in names if _LAUNCH_CALL.search(n) and not _GRAPH_LAUNCH.search(n)]
    if not begin or not launch:
        return 0
    name = pl.col("name").cast(pl.String)
    marks = pl.concat(
        [
            rt.filter(name.is_in(begin)).select("pid", "tid", pl.col("ts_ns").alias("t"), pl.lit(1).alias("d")),
            rt.filter(name.is_in(end)).select("pid", "tid", pl.col("end_ns").alias("t"), pl.lit(-1).alias("d")),
            rt.filter(name.is_in(launch) & (pl.col("gpu_count").fill_null(0) == 0)).select(
                "pid", "tid", pl.col("ts_ns").alias("t"), pl.lit(0).alias("d")
            ),
        ]
    ).sort("pid", "tid", "t", "d", descending=[False, False, False, True])
    depth = pl.col("d").cum_sum().over("pid", "tid")
    return int(marks.with_columns(depth.alias("depth")).filter((pl.col("d") == 0) & (pl.col("depth") > 0)).height)


def _graphs(trace: Trace, tab: _Tab, vendor: str | None) -> dict[str, Any]:
    rt = LAUNCH_KINDS
    has_rt = any(k in tab.pos for k in rt)
    launches = _matching(tab, _GRAPH_LAUNCH, rt)
    begins = _matching(tab, _CAPTURE_BEGIN, rt)
    ends = _matching(tab, _CAPTURE_END, rt)
    inst = _matching(tab, _INSTANTIATE, rt)
    frames = _matching(tab, _CAPTURE_FRAME, ("python_function", "cpu_op", "user_annotation"))
    n_launch, n_kern = _count(launches), int(launches["gpu_count"].sum()) if launches.height else 0
    graph_id_kernels = 0
    if not n_launch:
        k = trace.table("kernel")
        if "graph_id" in k.columns:
            graph_id_kernels = int(k["graph_id"].drop_nulls().len())
    capture = bool(begins.height or ends.height or inst.height or frames.height)
    replay = bool(n_launch or graph_id_kernels)
    captured = _captured_launches(trace) if begins.height else 0
    api_names = [*launches["name"].to_list(), *begins["name"].to_list(), *inst["name"].to_list()]
    api = "HIP" if any(n.startswith("hip") for n in api_names) else ("CUDA" if api_names else None)
    if api is None and (capture or replay):
        api = "HIP" if vendor == "AMD" else "CUDA"
    parts = []
    if capture:
        bits = [f"{_plural(_count(x), '`' + x['name'][0] + '` call')}" for x in (begins, ends, inst) if x.height]
        if frames.height:
            bits.append(f"capture frames ({_examples(frames['name'].to_list(), 1)})")
        bits.append(
            f"{_plural(captured, 'launch', 'launches')} recorded under capture with no GPU record "
            "(captured, not executed)"
        )
        parts.append("capture: " + ", ".join(bits))
    if replay:
        if n_launch:
            parts.append(
                f"replay: {_plural(n_launch, '`' + launches['name'][0] + '` call')} owning "
                f"{_plural(n_kern, 'GPU activity', 'GPU activities')}"
            )
        else:
            parts.append(f"replay: {_plural(graph_id_kernels, 'kernel')} carry a graph id (no runtime calls recorded)")
    if capture and replay:
        graphs = "capture+replay"
    elif capture:
        graphs = "capture"
    elif replay:
        graphs = "replay"
    elif has_rt:
        graphs = "none"
        parts.append("runtime calls recorded, no graph capture or graph launch API")
    else:
        graphs = "unknown"
        parts.append("no runtime/driver calls recorded: graph launches cannot be seen")
    return {
        "graphs": graphs,
        "evidence": "; ".join(parts),
        "graph_api": api,
        "graph_launches": n_launch,
        "graph_kernels": n_kern,
        "graph_captures": _count(ends) if ends.height else _count(begins),
        "captured_launches": captured,
    }


def _compiled(tab: _Tab, has_cpu_ops: bool, has_kernels: bool) -> tuple[str, str]:
    ops = _matching(tab, _COMPILED_OP, ("cpu_op", "user_annotation"))
    kern = _matching(tab, _INDUCTOR_KERNEL, ("kernel",))
    frames = _matching(tab, _INDUCTOR_FRAME, ("python_function",))
    parts = []
    if ops.height:
        parts.append(f"compiled regions {_examples(ops['name'].to_list())}")
    if kern.height:
        parts.append(f"{_plural(_count(kern), 'Inductor Triton kernel')} ({kern.height:,} distinct)")
    if frames.height:
        parts.append(f"Inductor frames ({_examples(frames['name'].to_list(), 1)})")
    if parts:
        return "yes", "; ".join(parts)
    if has_cpu_ops:
        return "no", "no compiled region, CompiledFunction, Inductor kernel or Inductor frame"
    if has_kernels:
        return "unknown", "no CPU operators recorded and no Inductor kernel: compiled regions cannot be seen"
    return "unknown", "no CPU operators and no kernels recorded"


def _parallel(trace: Trace, tab: _Tab) -> tuple[tuple[str, ...], str]:
    found: dict[str, list[str]] = {}
    descs: set[str] = set()
    for pg in trace.meta.process_groups:
        descs.update(d for d in (pg.desc, pg.name) if d)
    coll = trace.table("collective")
    if "pg_desc" in coll.columns and coll.height:
        descs.update(str(d) for d in coll["pg_desc"].cast(pl.String).drop_nulls().unique().to_list())
    for d in sorted(descs):
        for tok in _tokens(d):
            hint = _PG_TOKENS.get(tok)
            if hint:
                found.setdefault(hint, []).append(f"process group `{d}`")
    cpu = ("cpu_op", "user_annotation")
    p2p = _matching(tab, _P2P_OP, cpu)
    if p2p.height:
        found.setdefault("pipeline", []).append(
            f"{_plural(_count(p2p), 'send/recv op')} ({_examples(p2p['name'].to_list())})"
        )
    a2a = _matching(tab, _A2A_OP, cpu)
    if a2a.height:
        found.setdefault("expert", []).append(
            f"{_plural(_count(a2a), 'all-to-all op')} ({_examples(a2a['name'].to_list())}; "
            "all-to-all also serves embedding sharding and sequence parallelism)"
        )
    kern = tab.df.filter(pl.col("kind") == "kernel")
    if kern.height:
        tax = kernel_taxonomy(kern["name"]).filter(pl.col("family") == "all_to_all")
        a2k = kern.join(tax.select("name", "library"), on="name", how="inner").sort(
            ["n", "name"], descending=[True, False]
        )
        if a2k.height:
            libs = ", ".join(sorted(set(a2k["library"].to_list())))
            found.setdefault("expert", []).append(
                f"{_plural(_count(a2k), 'all-to-all kernel')} ({libs}: {_examples(a2k['name'].to_list())})"
            )
    ddp = _matching(tab, _DATA_PARALLEL_OP, cpu)
    if ddp.height:
        found.setdefault("data", []).append(f"DDP/FSDP ranges ({_examples(ddp['name'].to_list())})")
    hints = tuple(h for h in HINTS if h in found)
    if not hints:
        return (), "no parallel-group description, send/recv, all-to-all or DDP/FSDP evidence"
    return hints, "; ".join(f"{h}: {', '.join(dict.fromkeys(found[h]))}" for h in hints)


def _precision(trace: Trace, captured: int = 0) -> dict[str, Any]:
    """The precision of more than half of the matrix-kernel time, from the kernel taxonomy of the
    rank (:func:`~ranksight.views.kernel_taxonomy.kernel_taxonomy_table`: the name's precision, else
    the launching op's input dtype), so that this and ``kernel-taxonomy`` give one number."""
    none: dict[str, Any] = {"precision": "unknown", "precision_share": None, "precision_source": None}
    tax = kernel_taxonomy_table(trace)
    kernels = tax.filter(pl.col("kind") == "kernel")
    if not kernels.height:
        return {**none, "evidence": "no kernels recorded"}
    m = kernels.filter(pl.col("family").is_in(list(MATRIX_FAMILIES)))
    if not m.height and captured:
        return {
            **none,
            "evidence": f"no executed matrix kernels: {_plural(captured, 'launch', 'launches')} were captured into "
            "graphs, not executed",
        }
    if not m.height:
        return {
            **none,
            "evidence": "no matrix kernels (no gemm / attention / convolution kernel by the kernel taxonomy)",
        }
    total = int(m["dur_ns"].sum())
    by = (
        m.filter(pl.col("precision") != "unknown")
        .group_by("precision")
        .agg(pl.col("dur_ns").sum())
        .sort(["dur_ns", "precision"], descending=[True, False])
    )
    known = int(by["dur_ns"].sum()) if by.height else 0
    if not by.height or total <= 0:
        return {
            **none,
            "evidence": f"{_plural(int(m['count'].sum()), 'matrix kernel')} ({total / 1e6:.3f} ms), none with a "
            "precision in its name or its launching op's input dtypes",
        }
    top, top_ns = by.row(0)
    share = top_ns / total
    shares = ", ".join(f"{p} {_pct(ns / total)}" for p, ns in by.rows()[:4])
    if share <= 0.5:
        return {
            **none,
            "evidence": f"no precision covers more than half of {total / 1e6:.3f} ms of matrix-kernel time "
            f"({shares}; unknown {_pct((total - known) / total)})",
        }
    labels = {"name": "kernel names", "op": "op dtypes"}
    srcs = sorted({labels.get(x, x) for x in m.filter(pl.col("precision") == top)["precision_source"].to_list()})
    source = " and ".join(srcs) if srcs else None
    rest = ", ".join(f"{p} {_pct(ns / total)}" for p, ns in by.rows()[1:4])
    unknown_ns = total - known
    ev_txt = (
        f"{top}: {_pct(share)} of {total / 1e6:.3f} ms of matrix-kernel time (from {source})"
        + (f"; {rest}" if rest else "")
        + (f"; unknown {_pct(unknown_ns / total)}" if unknown_ns > 0 else "")
    )
    return {"precision": top, "precision_share": round(share, 4), "precision_source": source, "evidence": ev_txt}


def _compute(trace: Trace) -> RunContext:
    tab = _Tab(_name_table(trace))
    kinds = set(tab.pos)
    has_cpu_ops = "cpu_op" in kinds
    has_gpu = bool(kinds & set(GPU_KINDS))
    m = trace.meta
    mode, mode_ev = _mode(tab, has_cpu_ops, has_gpu)
    g = _graphs(trace, tab, m.gpu_vendor)
    compiled, comp_ev = _compiled(tab, has_cpu_ops, "kernel" in kinds)
    hints, par_ev = _parallel(trace, tab)
    prec = _precision(trace, g["captured_launches"])
    props = next((p for p in m.device_properties if p.get("id") in m.devices_used), None) or (
        m.device_properties[0] if m.device_properties else None
    )
    arch = architecture_of(props, m.gpu_vendor)
    dev_bits = [b for b in (m.gpu_vendor, m.gpu_model, arch) if b]
    if not dev_bits:
        dev_ev = "no deviceProperties and no vendor runtime call"
    else:
        src = "deviceProperties" if props else "runtime/driver call names; no deviceProperties"
        dev_ev = ", ".join(dev_bits) + f" ({src})"
    return RunContext(
        mode=mode,
        graphs=g["graphs"],
        compiled=compiled,
        parallel_hints=hints,
        precision=prec["precision"],
        evidence={
            "mode": mode_ev,
            "graphs": g["evidence"],
            "compiled": comp_ev,
            "parallel": par_ev,
            "precision": prec["evidence"],
            "device": dev_ev,
        },
        graph_api=g["graph_api"],
        graph_launches=g["graph_launches"],
        graph_kernels=g["graph_kernels"],
        graph_captures=g["graph_captures"],
        captured_launches=g["captured_launches"],
        precision_share=prec["precision_share"],
        precision_source=prec["precision_source"],
        gpu_vendor=m.gpu_vendor,
        gpu_model=m.gpu_model,
        gpu_arch=arch,
    )


def run_context(trace: Trace) -> RunContext:
    """The run context of one trace (memoised on the trace)."""
    ctx: RunContext = trace.memo("run_context", lambda: _compute(trace))
    return ctx


def context_line(ctx: RunContext) -> str:
    """One line for people: ``training, bf16, torch.compile, CUDA graph replay, hints: pipeline``."""
    parts = [ctx.mode if ctx.mode != "unknown" else "mode unknown"]
    parts.append(ctx.precision if ctx.precision != "unknown" else "precision unknown")
    if ctx.compiled == "yes":
        parts.append("torch.compile")
    api = ctx.graph_api or "CUDA"
    graphs = {
        "capture": f"{api} graph capture (captured kernels not executed)",
        "replay": f"{api} graph replay",
        "capture+replay": f"{api} graph capture and replay",
        "none": "no graphs",
        "unknown": "graphs unknown",
    }
    parts.append(graphs[ctx.graphs])
    if ctx.parallel_hints:
        parts.append("parallel hints: " + "/".join(ctx.parallel_hints))
    return ", ".join(parts)
