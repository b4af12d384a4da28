"""Hand-built step traces for the diff tests (times in µs, exact in the trace text).

``steps(lengths, ops)`` writes one ProfilerStep per length, laid end to end from ``t = 1000``.
Each op is ``Op(name, offset, dur, kernels)``: a ``cpu_op`` at ``step start + offset`` on the main
thread; each kernel ``(name, dur)`` is launched by a ``cudaLaunchKernel`` at ``op start + 1``
(2 µs long) and runs on stream 7 from ``op start + 3 + 2 × its index`` (kernels of one op run back
to back when their durations allow). ``dims`` sets the op's ``Input Dims``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Op:
    name: str
    offset: float
    dur: float
    kernels: Sequence[tuple[str, float]] = ()
    dims: Any = None
    children: Sequence[Op] = field(default_factory=list)


def step_events(
    lengths: Sequence[float], ops: Sequence[Op] | Sequence[Sequence[Op]], *, start: float = 1000.0, first_step: int = 1
) -> list[dict[str, Any]]:
    """Events of consecutive steps; ``ops`` is one list for every step or one list per step."""
    per_step = ops if ops and isinstance(ops[0], (list, tuple)) else [ops] * len(lengths)
    ev: list[dict[str, Any]] = []
    corr = 100
    t0 = start
    for i, (length, step_ops) in enumerate(zip(lengths, per_step)):
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{first_step + i}",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": length,
            }
        )
        stack = [(o, t0) for o in step_ops]
        while stack:
            op, base = stack.pop(0)
            ts = base + op.offset
            args: dict[str, Any] = {"External id": corr}
            if op.dims is not None:
                args["Input Dims"] = op.dims
            ev.append(
                {"ph": "X", "cat": "cpu_op", "name": op.name, "pid": 1, "tid": 1, "ts": ts, "dur": op.dur, "args": args}
            )
            gpu_t = ts + 3
            for j, (kname, kdur) in enumerate(op.kernels):
                corr += 1
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                           "ts": ts + 1 + 0.1 * j, "dur": 0.05, "args": {"correlation": corr}})  # fmt: skip
                ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": gpu_t, "dur": kdur,
                           "args": {"correlation": corr, "stream": 7, "device": 0}})  # fmt: skip
                gpu_t += kdur
            stack.extend((c, ts) for c in op.children)
        t0 += length
    return ev


def write_steps(
    make_trace: Any, lengths: Sequence[float], ops: Sequence[Op] | Sequence[Sequence[Op]], **kw: Any
) -> Any:
    return make_trace(step_events(lengths, ops, **kw))
