"""Compare two runs: what changed per step, is it more than noise, and what explains it.

``diff(base, test)`` takes two :class:`~ranksight.model.run.Run` s (any number of ranks each) and
returns a :class:`DiffResult` with these tables (definitions in ``docs/diff.md``):

- ``summary``: step time and the step-breakdown categories of the ``overview`` analysis (Kernel,
  Memcpy, Memset, Communication, Runtime, DataLoader, CPU Exec, Other), GPU memory peak per step;
- ``contributors``: the few kernels, operators and runtime calls whose per-step time changed
  beyond noise, largest first, with their share of the step-time change;
- ``ops``: every CPU operator, annotation, Python function and runtime call (normalised names):
  calls, time, mean and share per step on each side, added and removed ones;
- ``kernels``: every kernel, memcpy and memset keyed by normalised name and launching op, matched
  across names that differ through that op (:mod:`ranksight.views.diff_match`);
- ``collectives``: per collective type: calls, bytes, time and bus bandwidth per step.

**Samples.** Every quantity is measured per (rank, step). The significance test uses one sample
per step: the mean over the ranks that have that step (ranks of one synchronous step wait for each
other, so they are not independent samples). A side with a single step uses its (rank, step)
values instead. **Significance**: Welch's t-test (:mod:`ranksight.views.significance`); a
difference is a change only when p < ``alpha`` (Benjamini–Hochberg adjusted within the ops,
kernels and contributors tables) *and* it is at least ``min_change`` of the base value. The
``median`` and ``iqr`` columns describe all (rank, step) values of a side.

:func:`gate` turns a result into the CI verdict of ``ranksight diff --fail-if-slower``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses._base import AnalysisResult
from ranksight.analyses._replay import capture_option, replay_notes
from ranksight.analyses._session import Missing, Session
from ranksight.errors import MissingDataError, UsageError
from ranksight.views.diff_match import kernel_key_table, match_keys
from ranksight.views.diff_op_perf import op_perf_diff
from ranksight.views.diff_profile import rank_profile, step_windows
from ranksight.views.graph_attribution import ReplayShare, attributed_operators
from ranksight.views.significance import METHOD, Welch, bh_adjust, welch

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["DiffResult", "GateVerdict", "diff", "gate", "CATEGORIES", "METRICS"]

#: Step-breakdown categories (columns ``<name>_us`` of the overview analysis' ``steps`` table).
CATEGORIES = ("kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu_exec", "other")
#: Metrics of the summary table that a gate can use, with the direction that is a regression.
METRICS: dict[str, str] = {
    "step_time": "higher",
    **{c: "higher" for c in CATEGORIES},
    "memory_peak": "higher",
    "mfu": "lower",
}

_CHANGE_UP, _CHANGE_DOWN, _SAME = "increased", "decreased", "unchanged"


@dataclass
class DiffResult(AnalysisResult):
    """The tables of :func:`diff` plus what the gate and the renderers need."""

    method: str = ""
    verdict: str = ""
    labels: tuple[str, str] = ("base", "test")
    alpha: float = 0.05
    min_change: float = 0.02
    samples: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


@dataclass(frozen=True)
class GateVerdict:
    """``failed`` is the exit-code decision; ``line`` is the one-line explanation."""

    failed: bool
    line: str
    metric: str
    change: float | None
    p_value: float | None


# ---- one side -------------------------------------------------------------------------------


def _concat(parts: list[pl.DataFrame]) -> pl.DataFrame:
    parts = [p for p in parts if p.height]
    return pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()


def _run_optional(name: str, sess: Session, notes: list[str], **options: Any) -> AnalysisResult | None:
    """A registered analysis, or None when it is absent, lacks data, or fails (with a note): one
    optional part must not lose the whole comparison."""
    res = sess.try_result(name, **options)
    if isinstance(res, Missing):
        if res.kind == "failed":
            notes.append(f"{res.reason}; its part of the comparison is left out")
        return None
    return res


def _steps(sess: Session, notes: list[str]) -> pl.DataFrame:
    """``rank, step, total_ns`` and ``<category>_ns``: from the overview analysis when it is
    available, else step time alone (:func:`step_windows`)."""
    res = _run_optional("overview", sess, notes)
    if res is not None and "steps" in res.tables:
        st = res["steps"]
        need = {"rank", "step", "total_us", *(f"{c}_us" for c in CATEGORIES)}
        if need <= set(st.columns):
            return st.select(
                pl.col("rank").cast(pl.Int32),
                pl.col("step").cast(pl.Int32),
                *((pl.col(f"{c}_us") * 1e3).round().cast(pl.Int64).alias(f"{c}_ns") for c in ("total", *CATEGORIES)),
            )
    notes.append("step-breakdown categories need the `overview` analysis; only step time is compared")
    return _concat(list(sess.map(step_windows).values()))


def _collectives(sess: Session, notes: list[str]) -> pl.DataFrame:
    """``rank, step, coll_type, count, bytes, time_ns, bus_bytes`` (collectives analysis)."""
    res = _run_optional("collectives", sess, notes)
    if res is None or "collectives" not in res.tables:
        return pl.DataFrame()
    per = res["collectives"]
    if per.height == 0 or not {"rank", "step", "coll_type", "bytes", "dur_us", "group_size"} <= set(per.columns):
        return pl.DataFrame()
    from ranksight.views.comm_types import busbw_factor

    per = per.with_columns(pl.col("coll_type").cast(pl.String), pl.col("group_size").cast(pl.Int64))
    fac = per.select("coll_type", "group_size").unique()
    fac = fac.with_columns(pl.Series("factor", [busbw_factor(t, n) for t, n in fac.iter_rows()], dtype=pl.Float64))
    per = per.join(fac, on=["coll_type", "group_size"], how="left", nulls_equal=True)
    return (
        per.filter(pl.col("step").is_not_null())
        .group_by("rank", pl.col("step").cast(pl.Int32), "coll_type")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("bytes").sum().cast(pl.Float64).alias("bytes"),
            (pl.col("dur_us") * 1e3).sum().alias("time_ns"),
            (pl.col("bytes") * pl.col("factor")).sum().alias("bus_bytes"),
            pl.when(pl.col("bytes").is_not_null() & pl.col("factor").is_not_null())
            .then(pl.col("dur_us") * 1e3)
            .otherwise(0.0)
            .sum()
            .alias("bw_time_ns"),
        )
    )


def _mfu(sess: Session, notes: list[str], capture: str | None = None) -> pl.DataFrame:
    """``rank, step, mfu_pct``: model FLOPs utilisation per step (mfu analysis), when known."""
    res = _run_optional("mfu", sess, notes, **capture_option(capture))
    st = res.tables.get("steps") if res is not None else None
    if st is None or "mfu" not in st.columns or st["mfu"].is_null().all():
        notes.append(
            "MFU: not known for these traces (no FLOPs from shapes or no peak for the GPU; see `ranksight analyze mfu`)"
        )
        return pl.DataFrame()
    return st.filter(pl.col("mfu").is_not_null()).select(
        pl.col("rank").cast(pl.Int32),
        pl.col("step").cast(pl.Int32).fill_null(0),
        (pl.col("mfu") * 100.0).alias("mfu_pct"),
    )


@dataclass
class _Side:
    steps: pl.DataFrame
    tables: dict[str, pl.DataFrame]
    units: pl.DataFrame  # rank, step, sid
    n_per_sid: pl.DataFrame  # sid, nr
    sids: list[int]
    by_step: bool
    notes: list[str]


def _rank_profile(
    trace: Trace, *, kernel_templates: bool, shapes: bool, capture: str | None
) -> tuple[dict[str, pl.DataFrame], ReplayShare]:
    """:func:`rank_profile` with kernels keyed by their graph-attributed launching op (docs/graphs.md)."""
    operators, share = attributed_operators(trace, capture)
    return rank_profile(trace, kernel_templates=kernel_templates, shapes=shapes, operators=operators), share


def _side(
    run: Run,
    ranks: Sequence[int] | None,
    label: str,
    *,
    kernel_templates: bool,
    shapes: bool,
    capture: str | None = None,
) -> _Side:
    sess = Session.of(run, ranks)
    notes: list[str] = []
    steps = _steps(sess, notes)
    if steps.height == 0:
        raise MissingDataError(f"{label}: no complete step in these traces")
    per = sess.map(_rank_profile, kernel_templates=kernel_templates, shapes=shapes, capture=capture)
    prof = {r: p for r, (p, _) in per.items()}
    notes += replay_notes((s for _, s in per.values()), "; kernels are keyed by that launching op")
    tables = {k: _concat([p[k] for p in prof.values()]) for k in ("ops", "kernels", "kernel_sigs", "exposed", "memory")}
    tables["collectives"] = _collectives(sess, notes)
    tables["mfu"] = _mfu(sess, notes, capture)
    keep = steps.select("rank", "step")
    for k in ("ops", "kernels", "exposed", "memory", "collectives", "mfu"):
        if tables[k].height:
            tables[k] = tables[k].join(keep, on=["rank", "step"], how="semi")
    by_step = steps["step"].n_unique() >= 2
    if by_step:
        units = keep.with_columns(pl.col("step").cast(pl.Int64).alias("sid"))
    else:
        units = keep.with_columns(
            (pl.col("rank").cast(pl.Int64) * (1 << 32) + pl.col("step").cast(pl.Int64)).alias("sid")
        )
        if keep.height > 1:
            notes.append(f"{label}: one step, so the samples are its {keep.height} (rank, step) values")
    n_per = units.group_by("sid").agg(pl.len().alias("nr"))
    sids = sorted(n_per["sid"].to_list())
    return _Side(steps, tables, units, n_per, sids, by_step, notes)


# ---- samples --------------------------------------------------------------------------------


def _matrix(
    side: _Side, df: pl.DataFrame, keys: pl.DataFrame, on: list[str], value: str, *, how: str = "mean"
) -> np.ndarray:
    """(len(keys) × len(sids)) samples of ``value`` summed per key and (rank, step), then
    averaged over the ranks of each sample (``mean``: a rank without the key counts 0), over the
    ranks that have a value (``avg``), or their maximum (``max``)."""
    out = np.zeros((keys.height, len(side.sids)))
    if df.height == 0 or keys.height == 0:
        return out
    kidx = keys.select(on).with_row_index("__k")
    d = df.join(side.units, on=["rank", "step"]).group_by([*on, "rank", "sid"]).agg(pl.col(value).sum())
    if how == "max":
        d = d.group_by([*on, "sid"]).agg(pl.col(value).max().alias("__v"))
    elif how == "avg":
        d = d.group_by([*on, "sid"]).agg(pl.col(value).mean().alias("__v"))
    else:
        d = (
            d.group_by([*on, "sid"])
            .agg(pl.col(value).sum())
            .join(side.n_per_sid, on="sid")
            .with_columns((pl.col(value) / pl.col("nr")).alias("__v"))
        )
    d = d.join(kidx, on=on, nulls_equal=True)
    si = np.searchsorted(np.asarray(side.sids, dtype=np.int64), d["sid"].to_numpy())
    out[d["__k"].to_numpy(), si] = d["__v"].to_numpy()
    return out


def _rank_step_values(side: _Side, col: str) -> np.ndarray:
    return side.steps[col].to_numpy().astype(float)


def _describe(values: np.ndarray) -> tuple[float | None, float | None]:
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None, None
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return float(med), float(q3 - q1)


def _change(w: Welch, p: np.ndarray, alpha: float, min_change: float, min_abs: float) -> np.ndarray:
    """``increased`` / ``decreased`` when p < alpha and |delta| ≥ max(min_change × |base|,
    min_abs); ``untested`` without a noise estimate (unless delta is 0); else ``unchanged``."""
    big = np.abs(w.delta) >= np.maximum(min_change * np.abs(w.mean_base), min_abs)
    with np.errstate(invalid="ignore"):
        sig = (p < alpha) & big
    return np.select(
        [np.isnan(p) & (w.delta != 0), np.isnan(p), sig & (w.delta > 0), sig],
        ["untested", _SAME, _CHANGE_UP, _CHANGE_DOWN],
        default=_SAME,
    ).astype(object)


def _nan_to_none(a: np.ndarray) -> list[float | None]:
    return [None if (x is None or (isinstance(x, float) and math.isnan(x))) else float(x) for x in a.tolist()]


# ---- tables ---------------------------------------------------------------------------------


def _summary(
    b: _Side, t: _Side, alpha: float, min_change: float, samples: dict[str, tuple[np.ndarray, np.ndarray]]
) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    one = pl.DataFrame({"k": [0]})

    def add(
        metric: str, unit: str, scale: float, bs: np.ndarray, ts: np.ndarray, bvals: np.ndarray, tvals: np.ndarray
    ) -> None:
        samples[metric] = (bs, ts)
        w = welch(bs, ts, alpha=alpha)
        ch = str(_change(w, w.p_value, alpha, min_change, 0.0)[0])
        bm, bi = _describe(bvals)
        tm, ti = _describe(tvals)
        base_mean = float(w.mean_base[0])
        rows.append(
            {
                "metric": metric,
                "unit": unit,
                "base_median": None if bm is None else bm / scale,
                "base_iqr": None if bi is None else bi / scale,
                "test_median": None if tm is None else tm / scale,
                "test_iqr": None if ti is None else ti / scale,
                "delta": float(w.delta[0]) / scale,
                "delta_pct": 100.0 * float(w.delta[0]) / base_mean if base_mean else None,
                "ci_low": _nan_to_none(w.ci_low / scale)[0],
                "ci_high": _nan_to_none(w.ci_high / scale)[0],
                "p_value": _nan_to_none(w.p_value)[0],
                "change": ch,
            }
        )

    cols = ["total"] + [c for c in CATEGORIES if f"{c}_ns" in b.steps.columns and f"{c}_ns" in t.steps.columns]
    for c in cols:
        bs = _matrix(b, b.steps.with_columns(pl.lit(0).alias("k")), one, ["k"], f"{c}_ns")[0]
        ts = _matrix(t, t.steps.with_columns(pl.lit(0).alias("k")), one, ["k"], f"{c}_ns")[0]
        add(
            "step_time" if c == "total" else c,
            "ms",
            1e6,
            bs,
            ts,
            _rank_step_values(b, f"{c}_ns"),
            _rank_step_values(t, f"{c}_ns"),
        )
    bm, tm = b.tables["memory"], t.tables["memory"]
    if bm.height and tm.height:
        bs = _matrix(b, bm.with_columns(pl.lit(0).alias("k")), one, ["k"], "peak_bytes", how="max")[0]
        ts = _matrix(t, tm.with_columns(pl.lit(0).alias("k")), one, ["k"], "peak_bytes", how="max")[0]
        add(
            "memory_peak",
            "GB",
            1e9,
            bs,
            ts,
            bm["peak_bytes"].to_numpy().astype(float),
            tm["peak_bytes"].to_numpy().astype(float),
        )
    bf, tf = b.tables["mfu"], t.tables["mfu"]
    if bf.height and tf.height:
        bs = _matrix(b, bf.with_columns(pl.lit(0).alias("k")), one, ["k"], "mfu_pct", how="avg")[0]
        ts = _matrix(t, tf.with_columns(pl.lit(0).alias("k")), one, ["k"], "mfu_pct", how="avg")[0]
        add("mfu", "%", 1.0, bs, ts, bf["mfu_pct"].to_numpy(), tf["mfu_pct"].to_numpy())
    schema = {
        "metric": pl.String,
        "unit": pl.String,
        **{
            c: pl.Float64
            for c in (
                "base_median",
                "base_iqr",
                "test_median",
                "test_iqr",
                "delta",
                "delta_pct",
                "ci_low",
                "ci_high",
                "p_value",
            )
        },
        "change": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def _item_table(
    b: _Side,
    t: _Side,
    keys: pl.DataFrame,
    on: list[str],
    bdf: pl.DataFrame,
    tdf: pl.DataFrame,
    value: str,
    count: str | None,
    step_ns: tuple[float, float],
    alpha: float,
    min_change: float,
    min_abs_ns: float,
) -> tuple[pl.DataFrame, Welch, np.ndarray]:
    """Per-key per-step time (µs), calls, mean, share, delta and significance."""
    bt = _matrix(b, bdf, keys, on, value)
    tt = _matrix(t, tdf, keys, on, value)
    w = welch(bt, tt, alpha=alpha)
    q = bh_adjust(w.p_value)
    ch = _change(w, q, alpha, min_change, min_abs_ns)
    present_b = (bt != 0).any(axis=1) if bt.size else np.zeros(keys.height, bool)
    present_t = (tt != 0).any(axis=1) if tt.size else np.zeros(keys.height, bool)
    if count is not None:
        bc = _matrix(b, bdf, keys, on, count).mean(axis=1) if b.sids else np.zeros(keys.height)
        tc = _matrix(t, tdf, keys, on, count).mean(axis=1) if t.sids else np.zeros(keys.height)
        present_b |= bc > 0
        present_t |= tc > 0
    else:
        bc = tc = np.full(keys.height, np.nan)
    ch = np.where(present_t & ~present_b, "added", np.where(present_b & ~present_t, "removed", ch.astype(str)))
    with np.errstate(invalid="ignore", divide="ignore"):
        df = keys.with_columns(
            pl.Series("base_calls", bc),
            pl.Series("test_calls", tc),
            pl.Series("base_us", w.mean_base / 1e3),
            pl.Series("test_us", w.mean_test / 1e3),
            pl.Series("base_mean_us", np.where(bc > 0, w.mean_base / 1e3 / bc, np.nan)),
            pl.Series("test_mean_us", np.where(tc > 0, w.mean_test / 1e3 / tc, np.nan)),
            pl.Series(
                "base_share_pct", 100.0 * w.mean_base / step_ns[0] if step_ns[0] else np.full(keys.height, np.nan)
            ),
            pl.Series(
                "test_share_pct", 100.0 * w.mean_test / step_ns[1] if step_ns[1] else np.full(keys.height, np.nan)
            ),
            pl.Series("delta_us", w.delta / 1e3),
            pl.Series("delta_pct", np.where(w.mean_base != 0, 100.0 * w.delta / w.mean_base, np.nan)),
            pl.Series("q_value", q),
            pl.Series("change", ch.tolist(), dtype=pl.String),
        )
    df = df.with_columns(pl.col(pl.Float64).fill_nan(None))
    return df, w, q


def _mean_step(side: _Side) -> float:
    s = _matrix(side, side.steps.with_columns(pl.lit(0).alias("k")), pl.DataFrame({"k": [0]}), ["k"], "total_ns")[0]
    return float(s.mean()) if s.size else 0.0


def _ops_table(
    b: _Side, t: _Side, step_ns: tuple[float, float], alpha: float, min_change: float, min_abs_ns: float
) -> pl.DataFrame:
    on = ["kind", "name"]
    keys = _concat([b.tables["ops"].select(on), t.tables["ops"].select(on)]).unique().sort(on)
    df, _, _ = _item_table(
        b, t, keys, on, b.tables["ops"], t.tables["ops"], "total_ns", "count", step_ns, alpha, min_change, min_abs_ns
    )
    return df.sort(pl.col("delta_us").abs(), "kind", "name", descending=[True, False, False], nulls_last=True)


def _kernel_rows(b: _Side, t: _Side) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Matched kernel rows: (rows with labels, base per-step by row_id, test per-step by row_id)."""
    kb = (
        kernel_key_table(b.tables["kernels"], b.tables["kernel_sigs"])
        if b.tables["kernels"].height
        else pl.DataFrame(
            schema={
                "kind": pl.String,
                "name": pl.String,
                "op": pl.String,
                "dims": pl.String,
                "pos_dims": pl.Int32,
                "pos": pl.Int32,
            }
        )
    )
    kt = kernel_key_table(t.tables["kernels"], t.tables["kernel_sigs"]) if t.tables["kernels"].height else kb.clear()
    mb, mt = match_keys(kb, kt)
    key = ["kind", "name", "op"]
    pb = (
        b.tables["kernels"].join(mb.select(*key, "row_id"), on=key, nulls_equal=True)
        if b.tables["kernels"].height
        else pl.DataFrame()
    )
    pt = (
        t.tables["kernels"].join(mt.select(*key, "row_id"), on=key, nulls_equal=True)
        if t.tables["kernels"].height
        else pl.DataFrame()
    )

    def labels(m: pl.DataFrame, side: str) -> pl.DataFrame:
        return m.group_by("row_id").agg(
            pl.col("kind").first().alias(f"{side}_kind"),
            pl.col("name").unique().sort().str.join(" | ").alias(f"{side}_kernel"),
            pl.col("op").drop_nulls().unique().sort().str.join(" | ").alias(f"{side}_op"),
            pl.col("match").first().alias(f"{side}_match"),
        )

    rows = labels(mb, "b").join(labels(mt, "t"), on="row_id", how="full", coalesce=True)
    rows = rows.select(
        "row_id",
        pl.coalesce("b_kind", "t_kind").alias("kind"),
        pl.coalesce("b_kernel", "t_kernel").alias("kernel"),
        pl.when(
            pl.col("b_kernel").is_not_null()
            & pl.col("t_kernel").is_not_null()
            & (pl.col("b_kernel") != pl.col("t_kernel"))
        )
        .then(pl.col("t_kernel"))
        .otherwise(None)
        .alias("test_kernel"),
        pl.when((pl.col("b_op") != pl.col("t_op")) & (pl.col("b_op") != "") & (pl.col("t_op") != ""))
        .then(pl.concat_str([pl.col("b_op"), pl.lit(" → "), pl.col("t_op")]))
        .otherwise(
            pl.coalesce(
                pl.when(pl.col("b_op") != "").then(pl.col("b_op")), pl.when(pl.col("t_op") != "").then(pl.col("t_op"))
            )
        )
        .alias("op"),
        pl.coalesce("b_match", "t_match").alias("match"),
    ).sort("row_id")
    return rows, pb, pt


def _kernels_table(
    b: _Side, t: _Side, step_ns: tuple[float, float], alpha: float, min_change: float, min_abs_ns: float
) -> tuple[pl.DataFrame, Welch, np.ndarray]:
    rows, pb, pt = _kernel_rows(b, t)
    df, w, q = _item_table(
        b, t, rows.select("row_id"), ["row_id"], pb, pt, "total_ns", "count", step_ns, alpha, min_change, min_abs_ns
    )
    df = rows.join(df, on="row_id", maintain_order="left")
    return df, w, q


def _contributors(
    b: _Side,
    t: _Side,
    kernels: pl.DataFrame,
    step_delta_ns: float,
    step_ns: tuple[float, float],
    alpha: float,
    min_change: float,
    min_abs_ns: float,
    top: int,
) -> pl.DataFrame:
    on = ["kind", "name"]
    keys = _concat([b.tables["exposed"].select(on), t.tables["exposed"].select(on)]).unique().sort(on)
    cpu, _, _ = _item_table(
        b,
        t,
        keys,
        on,
        b.tables["exposed"],
        t.tables["exposed"],
        "exposed_ns",
        None,
        step_ns,
        alpha,
        min_change,
        min_abs_ns,
    )
    step_self = (
        pl.when(pl.col("name") == "ProfilerStep#*")
        .then(pl.lit("ProfilerStep#* (self: outside every op)"))
        .otherwise(pl.col("name"))
    )
    cpu = cpu.select(
        pl.col("kind").replace(
            {"cpu_op": "op", "user_annotation": "op", "cuda_runtime": "runtime", "cuda_driver": "runtime"}
        ),
        step_self.alias("name"),
        pl.lit(None, dtype=pl.String).alias("op"),
        "base_us",
        "test_us",
        "delta_us",
        "q_value",
        "change",
    )
    kname = (
        pl.when(pl.col("test_kernel").is_not_null())
        .then(pl.concat_str([pl.col("kernel"), pl.lit(" → "), pl.col("test_kernel")]))
        .otherwise(pl.col("kernel"))
    )
    gpu = kernels.select("kind", kname.alias("name"), "op", "base_us", "test_us", "delta_us", "q_value", "change")
    both = _concat([gpu, cpu])
    if both.height == 0:
        return both
    pick = both.filter(
        pl.col("change").is_in([_CHANGE_UP, _CHANGE_DOWN, "added", "removed", "untested"])
        & (pl.col("delta_us").abs() * 1e3 >= min_abs_ns)
    )
    if "added" in pick["change"].to_list() or "removed" in pick["change"].to_list():
        # added/removed rows are significant only when their per-step time is (test against 0)
        pick = pick.filter(
            ~pl.col("change").is_in(["added", "removed"]) | (pl.col("q_value") < alpha) | pl.col("q_value").is_null()
        )
    share = pl.lit(None, dtype=pl.Float64) if step_delta_ns == 0 else (pl.col("delta_us") * 1e3 / step_delta_ns * 100.0)
    return (
        pick.sort(pl.col("delta_us").abs(), descending=True)
        .head(top)
        .with_columns(share.alias("share_of_change_pct"))
        .select("kind", "name", "op", "base_us", "test_us", "delta_us", "share_of_change_pct", "q_value", "change")
    )


def _collectives_table(b: _Side, t: _Side, alpha: float, min_change: float) -> pl.DataFrame:
    bc, tc = b.tables["collectives"], t.tables["collectives"]
    if bc.height == 0 and tc.height == 0:
        return pl.DataFrame()
    on = ["coll_type"]
    keys = _concat([bc.select(on), tc.select(on)]).unique().sort(on)
    empty = pl.DataFrame(
        schema={
            "rank": pl.Int32,
            "step": pl.Int32,
            "coll_type": pl.String,
            "count": pl.Int64,
            "bytes": pl.Float64,
            "time_ns": pl.Float64,
            "bus_bytes": pl.Float64,
            "bw_time_ns": pl.Float64,
        }
    )
    bc = bc if bc.height else empty
    tc = tc if tc.height else empty
    out = {}
    for side, s, df in (("base", b, bc), ("test", t, tc)):
        for col in ("count", "bytes", "time_ns", "bus_bytes", "bw_time_ns"):
            out[(side, col)] = _matrix(s, df, keys, on, col)
    w = welch(out[("base", "time_ns")], out[("test", "time_ns")], alpha=alpha)
    q = bh_adjust(w.p_value)
    ch = _change(w, q, alpha, min_change, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        bw = {
            s: np.where(
                out[(s, "bw_time_ns")].sum(1) > 0, out[(s, "bus_bytes")].sum(1) / out[(s, "bw_time_ns")].sum(1), np.nan
            )
            for s in ("base", "test")
        }
        df = keys.with_columns(
            pl.Series("base_calls", out[("base", "count")].mean(1) if b.sids else np.zeros(keys.height)),
            pl.Series("test_calls", out[("test", "count")].mean(1) if t.sids else np.zeros(keys.height)),
            pl.Series("base_mb", out[("base", "bytes")].mean(1) / 1e6 if b.sids else np.zeros(keys.height)),
            pl.Series("test_mb", out[("test", "bytes")].mean(1) / 1e6 if t.sids else np.zeros(keys.height)),
            pl.Series("base_us", w.mean_base / 1e3),
            pl.Series("test_us", w.mean_test / 1e3),
            pl.Series("base_busbw_gbps", bw["base"]),
            pl.Series("test_busbw_gbps", bw["test"]),
            pl.Series("delta_us", w.delta / 1e3),
            pl.Series("q_value", q),
            pl.Series("change", ch.tolist(), dtype=pl.String),
        )
    return df.with_columns(pl.col(pl.Float64).fill_nan(None))


def _verdict(
    samples: dict[str, tuple[np.ndarray, np.ndarray]],
    summary: pl.DataFrame,
    contributors: pl.DataFrame,
    labels: tuple[str, str],
    alpha: float,
) -> str:
    """One sentence on step time (and the top contributor)."""
    if "step_time" not in samples:
        return ""
    bs, ts = samples["step_time"]
    w = welch(bs, ts, alpha=alpha)
    mb, mt, p = float(w.mean_base[0]), float(w.mean_test[0]), float(w.p_value[0])
    pct = 100.0 * (mt - mb) / mb if mb else 0.0
    change = summary.filter(pl.col("metric") == "step_time")["change"][0]
    how = {_CHANGE_UP: "slower", _CHANGE_DOWN: "faster"}.get(change)
    where = f"mean step {mb / 1e6:,.2f} → {mt / 1e6:,.2f} ms"
    if math.isnan(p):
        line = (
            f"{labels[1]} vs {labels[0]}: step time {pct:+.1f}% ({where}); significance not tested (one sample per "
            "side)"
        )
    elif how:
        lo, hi = 100.0 * float(w.ci_low[0]) / mb, 100.0 * float(w.ci_high[0]) / mb
        line = (
            f"{labels[1]} is {abs(pct):.1f}% {how} per step than {labels[0]} ({where}; {100 * (1 - alpha):g}% CI "
            f"{lo:+.1f}% … {hi:+.1f}%, p = {p:.2g})"
        )
    else:
        line = (
            f"no significant step-time change between {labels[0]} and {labels[1]} ({pct:+.1f}%, {where}; p = {p:.2g})"
        )
    if contributors.height:
        c = contributors.row(0, named=True)
        line += f"; top contributor: {c['name']} ({c['kind']}) {c['delta_us'] / 1e3:+,.2f} ms/step"
    return line


def diff(
    base: Run,
    test: Run,
    *,
    ranks: Sequence[int] | None = None,
    alpha: float = 0.05,
    min_change: float = 0.02,
    min_abs_us: float = 1.0,
    top: int = 5,
    kernel_templates: bool = True,
    shapes: bool = False,
    labels: tuple[str, str] = ("base", "test"),
    captures: tuple[str | None, str | None] = (None, None),
) -> DiffResult:
    """Compare ``test`` against ``base`` (module doc; definitions in ``docs/diff.md``).

    ``ranks`` selects the same ranks on both sides. ``alpha`` is the significance level,
    ``min_change`` the smallest relative change called a change, ``min_abs_us`` the smallest
    per-step change in µs for operators and kernels. ``kernel_templates=False`` keeps template
    arguments in kernel names; ``shapes=True`` also normalises shape suffixes. ``captures``: the graph
    capture trace or folder of each side (``--base-capture``, ``--capture``; None: ``capture_traces/`` beside
    the trace, ``"none"``: none): kernels replayed from CUDA/HIP graphs are keyed by, and the operators side
    by side and MFU read, the capture-side operators that launched them (``docs/graphs.md``).
    """
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must be in (0, 1), got {alpha}")
    b = _side(base, ranks, labels[0], kernel_templates=kernel_templates, shapes=shapes, capture=captures[0])
    t = _side(test, ranks, labels[1], kernel_templates=kernel_templates, shapes=shapes, capture=captures[1])
    samples: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    summary = _summary(b, t, alpha, min_change, samples)
    step_ns = (_mean_step(b), _mean_step(t))
    min_abs_ns = min_abs_us * 1e3
    ops = _ops_table(b, t, step_ns, alpha, min_change, min_abs_ns)
    kernels, _, _ = _kernels_table(b, t, step_ns, alpha, min_change, min_abs_ns)
    kernels = kernels.drop("row_id").sort(pl.col("delta_us").abs(), "kernel", descending=[True, False], nulls_last=True)
    contributors = _contributors(b, t, kernels, step_ns[1] - step_ns[0], step_ns, alpha, min_change, min_abs_ns, top)
    coll = _collectives_table(b, t, alpha, min_change)
    tables = {"summary": summary, "contributors": contributors, "ops": ops, "kernels": kernels}
    if coll.height:
        tables["collectives"] = coll
    op_notes: list[str] = []
    tables.update(_op_perf(base, test, ranks, labels, op_notes, captures))
    per_step, per_pair = "steps (one sample per step, averaged over ranks)", "(rank, step) values (one step per side)"
    if b.by_step == t.by_step:
        unit = per_step if b.by_step else per_pair
    else:
        unit = (
            f"{per_step if b.by_step else per_pair} on the {labels[0]} side, {per_step if t.by_step else per_pair} on "
            f"the {labels[1]} side"
        )
    method = METHOD.format(unit=unit, alpha=alpha, ci=100 * (1 - alpha))
    method += (
        f"; a change needs p < {alpha:g} and |delta| ≥ {100 * min_change:g}% of the base (ops, kernels: BH-adjusted q, "
        f"and ≥ {min_abs_us:g} µs/step)"
    )
    notes = [f"significance: {method}"]
    notes += [f"{labels[0]}: {n}" if not n.startswith(labels[0]) else n for n in b.notes]
    notes += [f"{labels[1]}: {n}" if not n.startswith(labels[1]) else n for n in t.notes]
    notes.append(
        f"{labels[0]}: {len(b.sids)} samples from {b.steps.height} (rank, step) values; {labels[1]}: {len(t.sids)} "
        f"samples from {t.steps.height}"
    )
    notes.append(
        "names normalised (addresses, step numbers, DataLoader iterator class, source lines, Triton ids; kernel "
        "template arguments and parameter lists): docs/diff.md"
    )
    notes += op_notes
    if "memory_peak" not in summary["metric"].to_list():
        notes.append("memory peak: needs [memory] events on both sides (profile_memory=True)")
    verdict = _verdict(samples, summary, contributors, labels, alpha)
    return DiffResult(
        tables,
        notes,
        method=method,
        verdict=verdict,
        labels=labels,
        alpha=alpha,
        min_change=min_change,
        samples=samples,
    )


def _op_perf(
    base: Run,
    test: Run,
    ranks: Sequence[int] | None,
    labels: tuple[str, str],
    notes: list[str],
    captures: tuple[str | None, str | None] = (None, None),
) -> dict[str, pl.DataFrame]:
    """The operators side by side (op-perf of each side, :mod:`ranksight.views.diff_op_perf`)."""
    sides = []
    for run, label, capture in ((base, labels[0], captures[0]), (test, labels[1], captures[1])):
        r = Session.of(run, ranks).try_result("op-perf", **capture_option(capture))
        if isinstance(r, Missing):
            notes.append(f"operators side by side: {label}: op-perf {r.kind}: {r.reason}")
            return {}
        sides.append(r["ops"])
    ops, cats = op_perf_diff(sides[0], sides[1], labels)
    return {"op_perf": ops, "op_perf_categories": cats}


# ---- gate -----------------------------------------------------------------------------------


def gate(result: DiffResult, *, threshold: float, metric: str = "step_time") -> GateVerdict:
    """The CI decision: fail when ``metric`` regressed significantly (Welch p < alpha) **and**
    by more than ``threshold`` (a fraction: 0.05 = 5 %) of its base mean.

    Raises :class:`UsageError` for an unknown metric and :class:`MissingDataError` when a side
    has fewer than two samples (no noise estimate, so no significance).
    """
    if metric not in result.samples:
        known = ", ".join(result.samples) or "none"
        raise UsageError(f"unknown metric {metric!r} for these traces; choose from: {known}")
    bs, ts = result.samples[metric]
    if bs.size < 2 or ts.size < 2:
        raise MissingDataError(
            f"the gate needs at least 2 steps (or ranks) per side to measure noise; got {bs.size} and {ts.size}"
        )
    unit = result["summary"].filter(pl.col("metric") == metric)["unit"]
    u = unit[0] if unit.len() else ""
    scale = {"ms": 1e6, "GB": 1e9}.get(u, 1.0)
    return gate_samples(
        bs,
        ts,
        threshold=threshold,
        alpha=result.alpha,
        metric=metric,
        higher_is_worse=METRICS.get(metric, "higher") == "higher",
        unit=u,
        scale=scale,
    )


def gate_samples(
    base: np.ndarray,
    test: np.ndarray,
    *,
    threshold: float,
    alpha: float = 0.05,
    metric: str = "step_time",
    higher_is_worse: bool = True,
    unit: str = "",
    scale: float = 1.0,
) -> GateVerdict:
    """:func:`gate` on raw per-step samples (the property tests use this)."""
    w = welch(np.asarray(base, float), np.asarray(test, float), alpha=alpha)
    mb = float(w.mean_base[0])
    delta = float(w.delta[0])
    p = float(w.p_value[0])
    rel = delta / mb if mb else (math.inf if delta > 0 else 0.0)
    worse = rel if higher_is_worse else -rel
    significant = not math.isnan(p) and p < alpha
    failed = bool(significant and worse > threshold)
    direction = "slower" if metric != "memory_peak" else "more memory"
    if not higher_is_worse:
        direction = "lower"
    lo = float(w.ci_low[0]) / mb * 100 if mb and not math.isnan(float(w.ci_low[0])) else float("nan")
    hi = float(w.ci_high[0]) / mb * 100 if mb and not math.isnan(float(w.ci_high[0])) else float("nan")
    u = f" {unit}" if unit else ""
    ci = f"{100 * (1 - alpha):g}% CI {lo:+.1f}% … {hi:+.1f}%" if not math.isnan(lo) else "no CI"
    stats = (
        f"{metric} {rel * 100:+.1f}% (mean {mb / scale:,.4g} → {(mb + delta) / scale:,.4g}{u}; {ci}, Welch p = {p:.2g})"
    )
    if failed:
        line = f"FAIL: {stats}: significantly {direction} by more than {threshold * 100:g}%"
    elif worse > threshold:
        line = (
            f"PASS: {stats}: above the {threshold * 100:g}% threshold but not significant at alpha {alpha:g} (within "
            "step-to-step noise)"
        )
    else:
        line = f"PASS: {stats}: not {direction} by more than {threshold * 100:g}%"
    return GateVerdict(failed, line, metric, rel, None if math.isnan(p) else p)
