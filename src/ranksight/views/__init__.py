"""Views: the derived tables under the analyses, one module each, public and documented.

A view is a pure function of one :class:`~ranksight.model.trace.Trace` (or of tables made from
traces) that derives a table several analyses read: GPU work intervals, launch links, op trees,
FLOPs, matched collectives. Views import only :mod:`ranksight.model`, :mod:`ranksight.io`,
:mod:`ranksight.errors` and each other, never an analysis. A view that keeps what it derives does
so through :meth:`Trace.memo <ranksight.model.trace.Trace.memo>` (e.g. ``gpu_work``), never by
writing into the trace. Cross-rank views take per-rank tables (computed by
:meth:`Session.map <ranksight.analyses.Session.map>`), never a run.

Three views nest events on a thread, each by a different definition, named for it:

========================  =======================================================  ==========================
view                      definition                                               read by
========================  =======================================================  ==========================
``enclosing``             ranksight's: innermost span enclosing an instant;        memory, mfu, modules,
                          crossing spans kept (Rust sweep)                         health, diff
``hta_call_stack``        HTA's call stack: open/close marker sweep, partial       op-kernels, sequences,
                          overlaps nested as HTA's stack does                      cupti-counters
``tb_op_tree``            the TensorBoard plugin's operator tree: crossing nodes    ops, overview,
                          dropped, duplicate ops merged                            kernel-config
========================  =======================================================  ==========================

The others, and the analyses that read them:

- ``intervals``: vectorised interval arithmetic (union, intersect, subtract) on sorted ns arrays —
  exposed-comm, bubble, summary, overview, gpu-metrics, memcpy-bw, diagnose, and other views.
- ``gpu_work``: GPU work intervals of a rank (ranksight's and HTA's definitions), step windows —
  temporal, idle, kernels, kernel-types, kernel-spread, overlap, mfu, the HTA facade, diff.
- ``links``: CPU launch ↔ GPU activity pairs — launches, queue, op-kernels, sequences.
- ``idle_gaps``: every GPU idle piece of a rank attributed to what held the next GPU work back
  (DataLoader, collective wait, sync, CPU op, launch latency, unexplained) — idle-causes.
- ``names``: name normalisation and pattern tests per distinct name — overview, memcpy-bw, diff,
  the HTA facade.
- ``kernel_taxonomy``: the kernel taxonomy (:mod:`ranksight.model.taxonomy`: class, family, precision,
  Tensor Core use, library) of a rank's GPU activities with their time — kernel-taxonomy, diagnose.
- ``run_context``: training or inference, CUDA/HIP graph capture or replay, torch.compile,
  parallelism hints, dominant matrix precision (from ``kernel_taxonomy``), device, each with its
  evidence — run-context, info, summary, the report, diagnose rules.
- ``tb_steps``: step windows as the TensorBoard plugin defines them — overview, gpu-metrics.
- ``graph_replays``, ``graph_capture``, ``graph_attribution``: CUDA/HIP graph replays and captures, replayed
  kernels matched to a capture trace's operators, and the trace the operator analyses read on a replay
  (``operator_trace``) — graphs, ops, op-kernels (docs/graphs.md).
- ``serving_steps``: engine steps of vLLM / SGLang servers from their step annotations — serving, graph
  attribution (docs/serving.md).
- ``time_units``: ranks whose span and event durations are ~1000× the others' (ns vs µs) — info,
  diagnose.
- ``flops``, ``peaks``: FLOPs from op shapes, peak throughput per GPU and dtype — mfu.
  ``flops.op_cost``: op-perf's cost model (category, FLOPs and bytes per call); ``peaks`` reads the
  GPU table ``data/gpu_specs.tsv`` (peaks, memory bandwidth) — mfu, op-perf.
- ``tracelens_perf``: TraceLens's perf report sheets, its definitions reproduced — op-perf
  (``--tracelens-csv``).
- ``memory_records``: ``[memory]`` events as allocation records — memory, diff.
- ``memory_snapshot``: tables of a PyTorch CUDA memory snapshot — memory (``--snapshot``), report.
- ``comm_types``, ``comm_extract``, ``comm_match``, ``comm_segments``, ``comm_intervals``: the
  collectives of a rank, matched across ranks into instances, with clock offsets, segments and
  compute intervals — collectives, alignment, bandwidth, all-to-all, alpha-beta, exposed-comm,
  stragglers, bubble, diff.
- ``nccl_join``: NCCL log operations joined to traced collectives — nccl-log.
- ``diff_profile``, ``diff_match``, ``significance``: per-step samples of one side, kernel
  matching between runs, Welch's t-test — diff.
"""
