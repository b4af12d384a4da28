"""HTA facade methods for the breakdown analyses (temporal, idle, kernels, overlap).

Each method has HTA v0.6's name, arguments, return shape (pandas DataFrames) and column names,
runs on :meth:`TraceAnalysisBase._hta_run` (HTA's last-step filter) and computes with
ranksight's definitions, or HTA's with ``TraceAnalysis(..., hta_compat=True)``.
``visualize=True`` draws the plotly figure when plotly is installed, and does nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ranksight.analyses.idle import idle_gaps_rank, idle_stats, idle_totals
from ranksight.analyses.kernels import kernel_stats_rank
from ranksight.analyses.overlap import overlap_rank
from ranksight.analyses.temporal import temporal_rank, to_hta
from ranksight.hta import _deps

if TYPE_CHECKING:
    import pandas as pd

    from ranksight.analyses import Session
    from ranksight.model.run import Run

__all__ = ["BreakdownMixin"]


def _pandas(df: pl.DataFrame) -> pd.DataFrame:
    _deps.pandas()
    return df.to_pandas()


def _show(draw: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Draw and show a plotly figure from ``ranksight.report.plots`` when plotly is importable."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        from ranksight.errors import warn

        warn(
            "plotly is not installed, so visualize=True draws no figure (the table is returned): "
            "pip install 'ranksight[hta]'"
        )
        return
    renderer = kwargs.pop("renderer", None) or None
    fig = draw(*args, **kwargs)
    fig.show(renderer=renderer)


class BreakdownMixin:
    """HTA's breakdown methods: temporal, idle time, GPU kernels, comm/comp overlap."""

    hta_compat: bool
    _hta_run: Callable[[], Run]
    _session: Callable[[], Session]

    # ---- temporal --------------------------------------------------------------------------

    def get_temporal_breakdown(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank: ``rank, idle_time(us), compute_time(us), non_compute_time(us), kernel_time(us),
        idle_time_pctg, compute_time_pctg, non_compute_time_pctg`` (see :mod:`ranksight.analyses.temporal`).
        Ranks without GPU work are left out (HTA raises ``IndexError``)."""
        df = pl.concat(list(self._session().map(temporal_rank, hta_compat=self.hta_compat).values()))
        df = to_hta(df.filter(pl.col("kernel_time_us").is_not_null()))
        out = _pandas(df)
        if visualize:
            from ranksight.report.plots import temporal_breakdown_figure

            _show(temporal_breakdown_figure, out)
        return out

    # ---- idle time -------------------------------------------------------------------------

    def get_idle_time_breakdown(
        self,
        ranks: Sequence[int] | None = None,
        streams: Sequence[int] | None = None,
        visualize: bool = True,
        visualize_pctg: bool = True,
        show_idle_interval_stats: bool = False,
        consecutive_kernel_delay: int = 30,
    ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        """``(df, stats)``: idle time per rank, stream and category (``rank, stream, idle_category,
        idle_time, idle_time_ratio``; index restarting at 0 per rank, like HTA), and with
        ``show_idle_interval_stats`` the interval statistics indexed by ``idle_category`` (``rank,
        stream, count, mean, std, min, 25%, 50%, 75%, max``), else None. ``ranks=None`` is HTA's
        ``[0]`` (the lowest rank when rank 0 is not loaded)."""
        import pandas as pd

        sess = self._session()
        if ranks is None:
            ranks = [0] if 0 in sess.ranks else sess.ranks[:1]
        per = sess.map(
            idle_gaps_rank, ranks, kernel_wait_us=consecutive_kernel_delay, streams=streams, hta_compat=self.hta_compat
        )
        frames, stat_frames = [], []
        for r in ranks:
            gaps = per[r]
            if gaps.height == 0:
                continue
            order = gaps.select("stream").unique(maintain_order=True)  # HTA: streams in order of appearance
            tot = idle_totals(gaps, ["rank", "stream"])
            tot = order.join(tot, on="stream", how="left", maintain_order="left").select(
                "rank",
                "stream",
                "idle_category",
                pl.col("idle_us").alias("idle_time"),
                pl.col("idle_ratio").alias("idle_time_ratio"),
            )
            frames.append(_pandas(tot))
            if show_idle_interval_stats:
                st = order.join(idle_stats(gaps), on="stream", how="left", maintain_order="left")
                st = st.select(
                    "idle_category",
                    "rank",
                    "stream",
                    pl.col("count").cast(pl.Float64),
                    pl.col("mean_us").alias("mean"),
                    pl.col("std_us").alias("std"),
                    pl.col("min_us").alias("min"),
                    pl.col("p25_us").alias("25%"),
                    pl.col("p50_us").alias("50%"),
                    pl.col("p75_us").alias("75%"),
                    pl.col("max_us").alias("max"),
                )
                stat_frames.append(_pandas(st).set_index("idle_category"))
        if not frames:
            df = _pandas(
                pl.DataFrame(
                    schema={
                        "rank": pl.Int64,
                        "stream": pl.Int64,
                        "idle_category": pl.String,
                        "idle_time": pl.Float64,
                        "idle_time_ratio": pl.Float64,
                    }
                )
            )
        else:
            df = pd.concat(frames)
        stats = (pd.concat(stat_frames) if stat_frames else None) if show_idle_interval_stats else None
        if visualize:
            from ranksight.report.plots import idle_time_figure

            _show(idle_time_figure, df, pctg=visualize_pctg)
        return df, stats

    # ---- GPU kernels -----------------------------------------------------------------------

    def get_gpu_kernel_breakdown(
        self,
        visualize: bool = True,
        duration_ratio: float = 0.8,
        num_kernels: int = 10,
        include_memory_kernels: bool = True,
        image_renderer: str = "",
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(kernel_type_df, kernel_df)``: ``kernel_type, sum, percentage`` over all ranks, and per
        rank and kernel ``name, sum (us), max (us), min (us), stddev, mean (us), kernel_type, rank``
        sorted by ``kernel_type, name, rank``. Statistics are over kernel events, also for named
        kernels and the ``others`` row (HTA puts per-name totals there)."""
        sess = self._session()
        kt = sess.result("kernel-types", include_memory=include_memory_kernels, hta_compat=self.hta_compat)[
            "kernel_types"
        ]
        sums = kt["sum_us"].to_numpy()
        integral = bool(np.all(np.mod(sums, 1.0) == 0))
        kt = kt.select(
            "kernel_type",
            (pl.col("sum_us").cast(pl.Int64) if integral else pl.col("sum_us")).alias("sum"),
            pl.col("pct").alias("percentage"),
        )
        per = pl.concat(
            list(
                sess.map(
                    kernel_stats_rank,
                    num_kernels=num_kernels,
                    duration_ratio=duration_ratio,
                    include_memory=include_memory_kernels,
                    hta_compat=self.hta_compat,
                ).values()
            )
        )
        kdf = per.sort(["kernel_type", "name", "rank"]).select(
            "name",
            pl.col("sum_us").alias("sum (us)"),
            pl.col("max_us").alias("max (us)"),
            pl.col("min_us").alias("min (us)"),
            pl.col("std_us").alias("stddev"),
            pl.col("mean_us").alias("mean (us)"),
            "kernel_type",
            "rank",
        )
        kernel_type_df, kernel_df = _pandas(kt), _pandas(kdf)
        if visualize:
            from ranksight.report.plots import kernel_type_figure, kernels_figure

            _show(kernel_type_figure, kernel_type_df, renderer=image_renderer)
            _show(kernels_figure, kernel_df, renderer=image_renderer)
        return kernel_type_df, kernel_df

    # ---- overlap ---------------------------------------------------------------------------

    def get_comm_comp_overlap(self, visualize: bool = True) -> pd.DataFrame:
        """Per rank ``rank, comp_comm_overlap_pctg``: the share of communication time overlapped by
        computation (NaN without communication)."""
        df = pl.concat(list(self._session().map(overlap_rank, hta_compat=self.hta_compat).values())).select(
            "rank", "comp_comm_overlap_pctg"
        )
        out = _pandas(df)
        if visualize:
            from ranksight.report.plots import overlap_figure

            _show(overlap_figure, out)
        return out
