"""HTA v0.6's ``TraceDiff`` and ``LabeledTrace`` (``hta/trace_diff.py``) on ranksight's loader.

>>> from ranksight.hta import LabeledTrace, TraceDiff, DeviceType
>>> c = LabeledTrace(label="Control", trace_dir="control/")    # doctest: +SKIP
>>> t = LabeledTrace(label="Test", trace_dir="test/")          # doctest: +SKIP
>>> TraceDiff.compare_traces(c, t, device_type=DeviceType.GPU)  # doctest: +SKIP

What HTA does, and this facade reproduces (hta-definitions.md §3.15):

- a side is one rank and one iteration (ProfilerStep number): the first rank and its first
  iteration by default; an unknown rank raises ``ValueError("Invalid argument rank=R.")``;
- its events are the complete (``X``) events with a duration, except category ``Trace``; an
  event's iteration is the ProfilerStep containing its start (CPU) or its launch's (GPU);
- ``device_type``: ``GPU`` = events on a GPU stream (kernels, memcpys, memsets, sync events, GPU
  annotations), ``CPU`` = the others, ``ALL`` = both;
- ``compare_traces``: per name (or HTA's ``short_name``) the count and summed duration (µs) of
  each side, outer-joined (control names sorted, then test-only names sorted; a name missing on
  one side counts 0 and the columns become floats), ``diff_counts`` and ``diff_duration`` =
  test − control, ``counts_change_categories`` ``+`` / ``-`` / ``=`` by the sign of
  ``diff_counts``;
- ``ops_diff``: names ``added`` (control count 0), ``deleted`` (test count 0), ``increased``,
  ``decreased`` and ``unchanged`` (by ``diff_counts``), in table order.

Where ranksight differs (``docs/hta-differences.md`` § TraceDiff): durations are exact (ns / 1000)
unless ``hta_compat=True`` asks for HTA's µs rounding of ns traces; AMD kernels (stream
``"0x0"``) are GPU events; a missing label is ``t0``, ``t1``, … in creation order instead of a
random ``t0``–``t10``. For a diff with significance, normalised names and kernels matched across
hardware use :func:`ranksight.analyses.diff.diff` (``ranksight diff``).
"""

from __future__ import annotations

import itertools
import os
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.errors import UsageError
from ranksight.hta import _deps
from ranksight.views.names import hta_short_name

if TYPE_CHECKING:
    import pandas as pd

    from ranksight.model.run import Run

__all__ = ["DeviceType", "LabeledTrace", "TraceDiff"]

_GPU_SIDE = ("kernel", "memcpy", "memset", "sync", "gpu_user_annotation")
_MEMORY = ("memcpy", "memset")
_labels = itertools.count()


class DeviceType(Enum):
    """HTA's ``DeviceType``: which events a side contributes."""

    CPU = 0
    GPU = 1
    ALL = 2


def _pandas() -> Any:
    return _deps.pandas()


class LabeledTrace:
    """A labelled run: HTA's ``LabeledTrace(label=None, t=None, trace_dir=None)``.

    ``t`` may be a ranksight :class:`~ranksight.model.run.Run` or a facade ``TraceAnalysis``;
    otherwise ``trace_dir`` is loaded (a folder of rank files or one file). ``hta_compat=True``
    (ranksight extension) rounds ns traces' times to µs as HTA's loader does.
    """

    def __init__(
        self,
        label: str | None = None,
        t: Any = None,
        trace_dir: str | os.PathLike[str] | None = None,
        *,
        hta_compat: bool = False,
    ) -> None:
        from ranksight.model.run import Run, load

        _deps.pandas()
        if t is not None:
            self.run: Run = t if isinstance(t, Run) else t.run
        elif trace_dir is not None:
            self.run = load(trace_dir)
        else:
            raise UsageError("LabeledTrace needs a trace (t=) or a trace_dir")
        self.label = label if label else f"t{next(_labels)}"
        self.trace_dir = os.fspath(trace_dir) if trace_dir is not None else None
        self.hta_compat = hta_compat
        self._events: dict[int, pl.DataFrame] = {}

    def __repr__(self) -> str:
        return f"LabeledTrace(label={self.label!r}, ranks={self.ranks()})"

    def ranks(self) -> list[int]:
        return self.run.ranks

    def iterations(self, rank: int | None = None) -> list[int]:
        """ProfilerStep numbers of a rank (the first rank by default)."""
        r = self._rank(rank)
        return sorted(self.run[r].steps["step"].to_list())

    def _rank(self, rank: int | None) -> int:
        if rank is None:
            return self.run.ranks[0]
        if rank not in self.run.ranks:
            raise UsageError(f"Invalid argument rank={rank}.")
        return rank

    def _timed(self, rank: int) -> pl.DataFrame:
        """Complete events with a duration (HTA's kept rows): name, cat, kind, ts, dur (µs), stream, iteration."""
        if rank in self._events:
            return self._events[rank]
        trace = self.run[rank]
        ev = (
            trace.scan()
            .filter((pl.col("ph") == "X") & pl.col("dur_ns").is_not_null() & (pl.col("cat").cast(pl.String) != "Trace"))
            .select("row", "name", "cat", "kind", "ts_ns", "dur_ns", "stream", "step")
            .collect()
        )
        base = trace.meta.base_time_ns or 0
        if self.hta_compat:
            from ranksight.views.gpu_work import hta_round, needs_hta_rounding

            if needs_hta_rounding(trace) and ev.height:
                ts, end = hta_round(ev["ts_ns"].to_numpy(), ev["dur_ns"].to_numpy(), base)
                ev = ev.with_columns(pl.Series("ts_ns", ts), pl.Series("dur_ns", end - ts))
        ev = ev.select(
            pl.col("name").cast(pl.String),
            pl.col("cat").cast(pl.String),
            pl.col("kind").cast(pl.String),
            ((pl.col("ts_ns") - base) / 1e3).alias("ts"),
            (pl.col("dur_ns") / 1e3).alias("dur"),
            pl.when(pl.col("kind").is_in(_GPU_SIDE)).then(pl.col("stream").fill_null(-1)).otherwise(-1).alias("stream"),
            pl.col("step").fill_null(-1).alias("iteration"),
            pl.col("kind").is_in(_GPU_SIDE).alias("_gpu"),
        )
        self._events[rank] = ev
        return ev

    def _ops(self, rank: int | None, iteration: int | None, device_type: DeviceType) -> pl.DataFrame:
        r = self._rank(rank)
        ev = self._timed(r)
        if iteration is None:
            its = self.iterations(r)
            iteration = its[0] if its else -1
        ev = ev.filter(pl.col("iteration") == iteration)
        if device_type == DeviceType.CPU:
            ev = ev.filter(~pl.col("_gpu"))
        elif device_type == DeviceType.GPU:
            ev = ev.filter(pl.col("_gpu"))
        return ev

    def extract_ops(
        self, rank: int | None = None, iteration: int | None = None, device_type: DeviceType = DeviceType.ALL
    ) -> pd.DataFrame:
        """The events of one rank and iteration (first of each by default) on a device type:
        ``name, cat, ts, dur, stream, iteration`` (µs)."""
        return self._ops(rank, iteration, device_type).drop("_gpu", "kind").to_pandas()

    def _summary(self, ops: pl.DataFrame) -> pl.DataFrame:
        uniq = ops.select("name", "kind").unique()
        short = [hta_short_name(n, is_memory=k in _MEMORY) for n, k in uniq.iter_rows()]  # once per distinct name
        uniq = uniq.with_columns(pl.Series("short_name", short, dtype=pl.String))
        ops = ops.join(uniq, on=["name", "kind"], how="left")
        return (
            ops.group_by("cat", "name", "short_name")
            .agg(pl.len().cast(pl.Int64).alias("counts"), pl.col("dur").sum().alias("total_duration"))
            .sort("name", "cat")
        )

    def get_ops_summary(self, ops_df: pd.DataFrame | pl.DataFrame) -> pd.DataFrame:
        """Per (category, name): ``cat, name, short_name, counts, total_duration, cat_id, name_id``
        (ids are positions in this summary's sorted category and name lists)."""
        ops = ops_df if isinstance(ops_df, pl.DataFrame) else pl.from_pandas(ops_df)
        if "kind" not in ops.columns:
            ops = ops.with_columns(
                pl.when(pl.col("name").str.starts_with("Memcpy") | pl.col("name").str.starts_with("Memset"))
                .then(pl.lit("memcpy"))
                .otherwise(pl.lit("other"))
                .alias("kind")
            )
        s = self._summary(ops)
        cats = sorted(s["cat"].unique().to_list())
        names = sorted(s["name"].unique().to_list())
        s = s.with_columns(
            pl.col("cat").replace_strict({c: i for i, c in enumerate(cats)}, return_dtype=pl.Int64).alias("cat_id"),
            pl.col("name").replace_strict({n: i for i, n in enumerate(names)}, return_dtype=pl.Int64).alias("name_id"),
        )
        return s.to_pandas()


class TraceDiff:
    """HTA v0.6's ``TraceDiff``: name-level comparison of two labelled traces (module doc)."""

    @staticmethod
    def _side(
        trace: LabeledTrace, rank: int | None, iteration: int | None, device_type: DeviceType, use_short_name: bool
    ) -> pl.DataFrame:
        s = trace._summary(trace._ops(rank, iteration, device_type))
        key = "short_name" if use_short_name else "name"
        return s.group_by(key).agg(pl.col("counts").sum(), pl.col("total_duration").sum()).sort(key)

    @classmethod
    def compare_traces(
        cls,
        control: LabeledTrace,
        test: LabeledTrace,
        control_rank: int | None = None,
        test_rank: int | None = None,
        control_iteration: int | None = None,
        test_iteration: int | None = None,
        device_type: DeviceType = DeviceType.ALL,
        use_short_name: bool = False,
    ) -> pd.DataFrame:
        """Counts and total durations (µs) per op name on both sides, and their differences."""
        pd = _pandas()
        key = "short_name" if use_short_name else "name"
        c_label = control.label
        t_label = test.label if test.label != control.label else f"{test.label}_control_test"
        c = cls._side(control, control_rank, control_iteration, device_type, use_short_name)
        t = cls._side(test, test_rank, test_iteration, device_type, use_short_name)
        cdf = c.to_pandas().set_index(key).add_prefix(f"{c_label}_")
        tdf = t.to_pandas().set_index(key).add_prefix(f"{t_label}_")
        df = pd.concat([cdf, tdf], axis=1).fillna(0)
        df.index.name = key
        df["diff_counts"] = df[f"{t_label}_counts"] - df[f"{c_label}_counts"]
        df["diff_duration"] = df[f"{t_label}_total_duration"] - df[f"{c_label}_total_duration"]
        df["counts_change_categories"] = np.select(
            [df["diff_counts"] > 0, df["diff_counts"] < 0], ["+", "-"], default="="
        )
        return df

    @classmethod
    def ops_diff(
        cls,
        control: LabeledTrace,
        test: LabeledTrace,
        control_rank: int | None = None,
        test_rank: int | None = None,
        control_iteration: int | None = None,
        test_iteration: int | None = None,
        device_type: DeviceType = DeviceType.ALL,
    ) -> dict[str, list[str]]:
        """Names ``added``, ``deleted``, ``increased``, ``decreased``, ``unchanged`` (by count)."""
        df = cls.compare_traces(control, test, control_rank, test_rank, control_iteration, test_iteration, device_type)
        cc = df.columns[0]
        tc = df.columns[2]
        names = df.index.to_numpy()
        added = (df[cc] == 0) & (df[tc] > 0)
        deleted = (df[tc] == 0) & (df[cc] > 0)
        both = ~added & ~deleted
        return {
            "added": names[added.to_numpy()].tolist(),
            "deleted": names[deleted.to_numpy()].tolist(),
            "increased": names[(both & (df["diff_counts"] > 0)).to_numpy()].tolist(),
            "decreased": names[(both & (df["diff_counts"] < 0)).to_numpy()].tolist(),
            "unchanged": names[(both & (df["diff_counts"] == 0)).to_numpy()].tolist(),
        }

    @classmethod
    def visualize_counts_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: str | None = None
    ) -> None:
        """Bars of both sides' counts for the ops whose count changed (plotly; nothing without it)."""
        cls._bars(df, "counts", "diff_counts", "Number of calls", show_image, export_image_path)

    @classmethod
    def visualize_duration_diff(
        cls, df: pd.DataFrame, show_image: bool = True, export_image_path: str | None = None
    ) -> None:
        """Bars of both sides' total durations (µs) for the ops whose duration changed."""
        cls._bars(df, "total_duration", "diff_duration", "Total duration (us)", show_image, export_image_path)

    @staticmethod
    def _bars(
        df: pd.DataFrame, what: str, diff_col: str, title: str, show_image: bool, export_image_path: str | None
    ) -> None:
        try:
            import plotly  # noqa: F401
        except ImportError:
            from ranksight.errors import warn

            warn(
                "plotly is not installed, so visualize_*_diff draws no figure (the table is returned): "
                "pip install 'ranksight[hta]'"
            )
            return
        from ranksight.report.plots import diff_bars_figure

        fig = diff_bars_figure(df, what, diff_col, title)
        if fig is None:
            return
        if export_image_path:
            if str(export_image_path).endswith(".html"):
                fig.write_html(export_image_path, include_plotlyjs=True)
            else:
                fig.write_image(export_image_path)
        if show_image:
            fig.show()
