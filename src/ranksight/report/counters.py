"""Counter tracks for a trace copy: queue length per GPU stream and memcpy/memset bandwidth.

Each rank's trace is copied with ``"ph": "C"`` events appended (Chrome trace format counters,
which Perfetto and chrome://tracing draw as tracks under the GPU's process):

- ``Queue Length (stream N)``, arg ``Queue Length``: the launch queue length of stream N
  (:mod:`ranksight.analyses.queue`);
- ``<copy kind> bandwidth (GB/s)`` (``Memcpy HtoD``, ``Memcpy DtoH``, ``Memset``, ...), arg
  ``GB/s``: the bandwidth in use by that copy kind (:mod:`ranksight.analyses.memcpy_bw`).

Points at equal timestamps are collapsed to the last value. Timestamps are written in the file's
own time base (µs; ``baseTimeNanoseconds`` removed again) with ns digits, exactly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from ranksight.analyses.memcpy_bw import bw_series, copies
from ranksight.analyses.queue import queue_series
from ranksight.errors import UsageError
from ranksight.io.output import check_output
from ranksight.io.rewrite import rewrite_trace

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["KINDS", "counter_events", "output_name", "write_counters"]

KINDS = ("queue", "bw")


def _ts_text(ts_ns: pl.Expr, base_ns: int) -> pl.Expr:
    """Exact µs text with ns digits: ``1234.567``."""
    t = ts_ns - base_ns
    return pl.concat_str((t // 1000).cast(pl.String), pl.lit("."), (t % 1000).cast(pl.String).str.zfill(3))


def _events(df: pl.DataFrame, base_ns: int) -> list[str]:
    """``df``: ``name, pid, ts_ns, arg, value`` → JSON texts of counter events."""
    if df.height == 0:
        return []
    df = df.filter(pl.col("value").is_not_null()).sort(["name", "pid", "ts_ns"], maintain_order=True)
    df = df.unique(["name", "pid", "ts_ns"], keep="last", maintain_order=True)
    # JSON-quote the few distinct names once
    names = df.select("name", "arg").unique()
    names = names.with_columns(
        pl.Series("__name", [json.dumps(n) for n in names["name"].to_list()], dtype=pl.String),
        pl.Series("__arg", [json.dumps(a) for a in names["arg"].to_list()], dtype=pl.String),
    )
    df = df.join(names, on=["name", "arg"], how="left", maintain_order="left")
    is_int = df.schema["value"].is_integer()
    val = pl.col("value").cast(pl.String) if is_int else pl.col("value").cast(pl.Float64).round(6).cast(pl.String)
    return (
        df.select(
            pl.concat_str(
                pl.lit('{"ph":"C","name":'),
                pl.col("__name"),
                pl.lit(',"pid":'),
                pl.col("pid").cast(pl.String),
                pl.lit(',"ts":'),
                _ts_text(pl.col("ts_ns"), base_ns),
                pl.lit(',"args":{'),
                pl.col("__arg"),
                pl.lit(":"),
                val,
                pl.lit("}}"),
            )
        )
        .to_series()
        .to_list()
    )


def counter_events(trace: Trace, kinds: Sequence[str] = KINDS) -> dict[str, list[str]]:
    """Counter events of one rank by counter family (``queue``, ``bw``)."""
    base = int(trace.meta.base_time_ns or 0)
    out: dict[str, list[str]] = {}
    if "queue" in kinds:
        q = queue_series(trace)
        out["queue"] = _events(
            q.select(
                pl.concat_str(pl.lit("Queue Length (stream "), pl.col("stream").cast(pl.String), pl.lit(")")).alias(
                    "name"
                ),
                "pid",
                "ts_ns",
                pl.lit("Queue Length").alias("arg"),
                pl.col("queue_length").alias("value"),
            ),
            base,
        )
    if "bw" in kinds:
        s = bw_series(copies(trace))
        out["bw"] = _events(
            s.select(
                (pl.col("copy_kind") + pl.lit(" bandwidth (GB/s)")).alias("name"),
                "pid",
                "ts_ns",
                pl.lit("GB/s").alias("arg"),
                pl.col("bw_gbps").clip(lower_bound=0.0).alias("value"),
            ),
            base,
        )
    return out


def output_name(path: str, suffix: str = "_with_counters") -> str:
    """``rank-0.json.gz`` → ``rank-0_with_counters.json.gz`` (always gzip)."""
    base = os.path.basename(path)
    for ext in (".json.gz", ".json", ".gz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
            break
    return f"{base}{suffix}.json.gz"


def write_counters(
    run: Run,
    out_dir: str | None,
    *,
    kinds: Sequence[str] = KINDS,
    force: bool = False,
    suffix: str = "_with_counters",
) -> list[tuple[int, str, dict[str, int]]]:
    """Write one augmented trace per rank; returns ``(rank, path, counter events per family)``.

    ``out_dir`` None writes next to each input (HTA's behaviour). Every output is checked first
    (never an input; an existing file only with ``force``), so a refusal writes nothing.
    """
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise UsageError(f"unknown counter kind(s) {bad}; choose from {', '.join(KINDS)}")
    inputs = [t.path for t in run]
    plan = []
    for t in run:
        if "offset" not in t.spans.columns:  # an Nsight Systems export (docs/nsys.md): no JSON to rewrite
            raise UsageError(
                f"{os.path.basename(t.path)} is not a Kineto JSON trace: counter tracks are written into Kineto traces "
                "only"
            )
        d = out_dir if out_dir is not None else os.path.dirname(t.path)
        plan.append((t, os.path.join(d, output_name(t.path, suffix))))
    dsts = [p for _, p in plan]
    if len(set(map(os.path.realpath, dsts))) != len(dsts):
        raise UsageError("two inputs have the same file name; their outputs would collide")
    for _, dst in plan:
        check_output(dst, inputs=inputs, force=force)
    done = []
    for t, dst in plan:
        ev = counter_events(t, kinds)
        sp = t.spans
        rewrite_trace(
            t.path,
            dst,
            offsets=sp["offset"].to_list(),
            lengths=sp["length"].to_list(),
            extra_events=[e for k in kinds for e in ev.get(k, [])],
            inputs=inputs,
            force=force,
        )
        done.append((t.rank, dst, {k: len(v) for k, v in ev.items()}))
    return done
