"""The section registry: each report section is declared once.

A :class:`Section` names the analyses it needs and a builder that turns their
:class:`~ranksight.analyses.AnalysisResult` tables into blocks (tables, charts, key facts). A section
is shown only when every analysis it needs is registered and its builder finds data; otherwise the
report lists it under "Not shown" with the reason (analysis not available, :class:`Skip` raised by
the builder, or the analysis' ``MissingDataError``). Builders live in ``sections_*.py`` modules and
register with :func:`section`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np
import polars as pl

from ranksight.analyses import AnalysisResult, Missing, Session
from ranksight.report.html import ranks as rkmod
from ranksight.report.html.payload import StringTable, encode_table, series

__all__ = ["Section", "SECTIONS", "GROUPS", "section", "Skip", "Omit", "Ctx", "downsample", "histogram"]

#: Rows embedded per table at most (the CLI's ``--format csv`` has every row).
MAX_TABLE_ROWS = 20_000
#: Heatmap columns at most (adjacent columns are averaged beyond).
MAX_HEATMAP_COLS = 400

#: Groups in page order.
GROUPS = (
    "Findings",
    "Run",
    "GPU time",
    "Kernels",
    "CPU and launches",
    "Steps",
    "Memory",
    "Distributed",
    "Health",
    "More analyses",
)


_obj_id = id  # Ctx.table's `id` is the block's


class Skip(Exception):
    """Raised by a builder when the data does not support the section; the message says why."""


class Omit(Skip):
    """Raised by a builder whose section does not apply to this kind of run at all (the section is
    left out of the report, not listed under "Not shown"): e.g. "Across ranks" for 32 ranks or fewer."""


@dataclass
class _Deferred:
    """A per-rank table of a many-rank report, encoded once the size budget is shared out."""

    block: dict[str, Any]
    df: pl.DataFrame
    max_rows: int
    kw: dict[str, Any]
    #: the ranks an operator-level analysis ran on (:meth:`Ctx.detail_subset`), None: every rank
    detail: list[int] | None = None


@dataclass(frozen=True)
class Section:
    """One report section."""

    slug: str
    title: str
    needs: tuple[str, ...]
    build: Callable[[Ctx], list[dict[str, Any]]]
    group: str = "Run"
    order: int = 50
    help: str = ""


SECTIONS: list[Section] = []


def section(
    slug: str, title: str, *, needs: Sequence[str] = (), group: str = "Run", order: int = 50, help: str = ""
) -> Callable[[Callable[[Ctx], list[dict[str, Any]]]], Callable[[Ctx], list[dict[str, Any]]]]:
    """Register the decorated builder as a section."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}")

    def deco(fn: Callable[[Ctx], list[dict[str, Any]]]) -> Callable[[Ctx], list[dict[str, Any]]]:
        if any(s.slug == slug for s in SECTIONS):
            raise ValueError(f"section {slug!r} declared twice")
        SECTIONS.append(Section(slug, title, tuple(needs), fn, group, order, help))
        return fn

    return deco


def _skip_if_missing(res: Any) -> Any:
    """``res``, or :class:`Skip` with the reason when it is a :class:`Missing`."""
    if isinstance(res, Missing):
        raise Skip(res.reason if res.kind != "no-data" else f"`{res.analysis}`: {res.reason}")
    return res


@dataclass
class Ctx:
    """What a builder gets: the session (the run and its analyses, each computed once), the
    optional baseline and memory snapshot, and block constructors."""

    session: Session
    strings: StringTable = field(default_factory=StringTable)
    notes: list[str] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)
    #: the run compared against and the two labels (``ranksight report --baseline``), if any
    baseline: tuple[Any, tuple[str, str]] | None = None
    #: a PyTorch memory snapshot file (``ranksight report --snapshot``), if any
    snapshot: str | None = None
    #: the ranks of the operator-level analyses (``ranksight report --detail-ranks``): ``"all"``,
    #: ranks added to the focus ranks, or None (the default: see :meth:`detail_subset`)
    detail_ranks: Sequence[int] | str | None = None

    #: per-rank tables of a many-rank report waiting for :meth:`finish_tables`
    deferred: list[_Deferred] = field(default_factory=list)
    _focus: rkmod.Focus | None = None
    _headlines: pl.DataFrame | None = None
    #: the section being built read an operator-level analysis on a subset of ranks
    _detail_used: list[int] | None = None
    #: tables (by id) of analyses in PARTIAL_DETAIL computed for a subset of ranks: that subset
    _detail_tables: dict[int, list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.session, Session):  # a Run
            self.session = Session.of(self.session)

    @property
    def many(self) -> bool:
        """More than :data:`~ranksight.report.html.ranks.MANY_RANKS` ranks: the many-rank report."""
        return len(self.session.ranks) > rkmod.MANY_RANKS

    @property
    def run(self) -> Any:
        return self.session.run

    @property
    def failures(self) -> list[str]:
        """Analyses and sections that failed with a bug (one line each)."""
        return self.session.failures

    # ---- analyses ---------------------------------------------------------------------------

    def result(self, name: str, **options: Any) -> AnalysisResult:
        """The analysis ``name`` (computed once per set of options by the session); its notes go
        to the section. Raises :class:`Skip` with the reason when the result is :class:`Missing`.
        An operator-level analysis (:data:`~ranksight.report.html.ranks.DETAIL_ANALYSES`) runs on
        :meth:`detail_subset`, and the section's per-rank tables say so."""
        sess = self.session
        partial = rkmod.PARTIAL_DETAIL.get(name)
        sub = self.detail_subset() if name in rkmod.DETAIL_ANALYSES or partial is not None else None
        if sub is not None:
            if partial is None:
                sess = sess.with_ranks(sub)
                self._detail_used = sub
            else:  # the option restricts the operator-level tables; the others cover every rank
                options = {**options, partial[0]: sub}
            note = (
                f"operator-level detail for {len(sub)} of {len(self.session.ranks)} ranks (the focus ranks"
                f"{' and those asked for' if self.detail_ranks not in (None, 'all') else ''}: "
                f"{rkmod.rank_ranges(sub)}); `ranksight report --detail-ranks all` computes every rank's"
            )
            if note not in self.notes:
                self.notes.append(note)
        res = _skip_if_missing(sess.try_result(name, **options))
        if sub is not None and partial is not None:
            self._detail_tables.update({id(res.tables[t]): sub for t in partial[1] if t in res.tables})
        for n in res.notes:
            if n not in self.notes:
                self.notes.append(n)
        return res

    def call(self, key: tuple[Any, ...], fn: Callable[[], Any], label: str) -> Any:
        """``fn()`` once per ``key`` for this session (data a section reads that is not an
        analysis, e.g. a memory snapshot's tables); a ``RanksightError`` or a bug becomes
        :class:`Skip` with the reason (bugs are also listed in :attr:`failures` and warned)."""
        return _skip_if_missing(self.session.try_memo(("report", *key), fn, label))

    def findings(self) -> tuple[list[Any], list[str], list[str]]:
        """``diagnose``'s findings (worst first), the rules run, and notes (computed once)."""
        from ranksight.analyses.diagnose import findings

        return _skip_if_missing(
            self.session.try_memo(("report", "findings"), lambda: findings(self.session), "diagnose")
        )

    def tables(self, name: str, *needed: str, **options: Any) -> dict[str, pl.DataFrame]:
        """The analysis' tables; :class:`Skip` when one of ``needed`` is absent or empty."""
        res = self.result(name, **options)
        for t in needed:
            if t not in res.tables:
                raise Skip(f"`{name}` has no table {t!r}")
            if res.tables[t].height == 0:
                why = res.notes[0] if res.notes else f"table {t!r} is empty for these traces"
                raise Skip(f"`{name}`: {why}")
        return res.tables

    # ---- blocks -----------------------------------------------------------------------------

    def table(
        self, df: pl.DataFrame, *, id: str, title: str, max_rows: int = MAX_TABLE_ROWS, **kw: Any
    ) -> dict[str, Any]:
        """A paged table block. Beyond ``max_rows`` rows only the first ones are embedded (after
        sorting by ``sort`` when given) and the block says how many there were. In a many-rank
        report a table with a ``rank`` column is encoded by :meth:`finish_tables`: every rank's
        rows while the size budget lasts, else the focus ranks' rows (the block says which)."""
        if self.many and "rank" in df.columns and df.schema["rank"].is_integer():
            block: dict[str, Any] = {"type": "table", "id": id, "title": title}
            detail = self._detail_tables.get(_obj_id(df), self._detail_used)
            self.deferred.append(_Deferred(block, df, max_rows, kw, detail))
            return block
        total = df.height
        if total > max_rows:
            sort = kw.get("sort")
            if sort is not None and sort[0] in df.columns:
                df = df.sort(sort[0], descending=sort[1], nulls_last=True)
            df = df.head(max_rows)
        out = encode_table(df, self.strings, id=id, title=title, **kw)
        if total > max_rows:
            out["total_rows"] = total
        return out

    # ---- many ranks ---------------------------------------------------------------------------

    def headlines(self) -> pl.DataFrame:
        """``ranksight summary``'s per-rank headline table (one definition per metric, read from
        the analyses by :func:`ranksight.report.headline.build_summary`), computed once."""
        if self._headlines is None:
            from ranksight.report.headline import build_summary

            got = self.session.try_memo(("report", "summary"), lambda: build_summary(self.session), "summary")
            self._headlines = (
                pl.DataFrame({"rank": list(self.session.ranks)}, schema={"rank": pl.Int64})
                if isinstance(got, Missing)
                else got.tables["per_rank"]
            )
        return self._headlines

    def end_detail(self) -> None:
        """The per-rank tables the section makes from here on are not an operator-level
        analysis' (a section that reads one only to choose what to show, e.g. ``sequences``)."""
        self._detail_used = None

    def detail_subset(self) -> list[int] | None:
        """The ranks the operator-level analyses run on: None (every rank) up to
        :data:`~ranksight.report.html.ranks.DETAIL_RANKS_MAX` ranks or with ``detail_ranks="all"``;
        beyond, the focus ranks and the ranks of ``detail_ranks``."""
        ranks = list(self.session.ranks)
        if self.detail_ranks == "all" or len(ranks) <= rkmod.DETAIL_RANKS_MAX or not self.many:
            return None
        asked = [] if self.detail_ranks is None else [int(r) for r in self.detail_ranks]
        sub = sorted((set(self.focus().ranks) | set(asked)) & set(ranks))
        return sub if len(sub) < len(ranks) else None

    def focus(self) -> rkmod.Focus:
        """The ranks a many-rank report shows in full (worst, outliers, minimum and maximum ranks)."""
        if self._focus is None:
            self._focus = rkmod.focus_of(self.headlines(), self.session.ranks)
        return self._focus

    def rank_bar(
        self,
        ranks: Sequence[Any],
        bars: Mapping[str, Sequence[Any]],
        *,
        id: str,
        title: str,
        labels: Sequence[str] | None = None,
        stacked: bool = True,
        unit: str = "",
        y_label: str = "",
    ) -> list[dict[str, Any]]:
        """Bars per rank (``labels`` name the rows when a rank has several, e.g. GPUs). Up to
        ``MANY_RANKS`` ranks: one bar per rank (:meth:`bar`). Beyond: every rank as a column of
        a canvas strip (``rankbars``; click picks the rank) and the distribution of each series
        across ranks (percentiles, minimum and maximum rank, outliers)."""
        names = list(labels) if labels is not None else rank_labels(ranks)
        if not self.many:
            return [self.bar(names, bars, id=id, title=title, stacked=stacked, unit=unit, y_label=y_label)]
        chart = {
            "type": "chart",
            "chart": "rankbars",
            "id": id,
            "title": title,
            "ranks": [int(r) for r in ranks],
            "labels": self.strings.many(names) if labels is not None else None,
            "series": [{"name": self.strings(k), "values": series(v)} for k, v in bars.items()],
            "stacked": stacked,
            "unit": unit,
            "y_label": y_label,
        }
        keys = [str(x) for x in (labels if labels is not None else [int(r) for r in ranks])]
        rows = [(k, unit, rkmod.spread(keys, list(v))) for k, v in bars.items()]
        dist = self.table(
            rkmod.spread_frame(rows),
            id=f"{id}-spread",
            title=f"{title}: distribution across ranks",
            help=SPREAD_HELP,
        )
        return [chart, dist]

    def rank_series_bar(
        self,
        categories: Sequence[Any],
        per_rank: Mapping[Any, Sequence[Any]],
        *,
        id: str,
        title: str,
        **kw: Any,
    ) -> dict[str, Any]:
        """Bars per category with one series per rank (``per_rank``: rank → values by category).
        Beyond ``MANY_RANKS`` ranks the series are the minimum, median and maximum over ranks, and
        each category names the rank with the maximum."""
        if not self.many:
            return self.bar(categories, {f"rank {r}": v for r, v in per_rank.items()}, id=id, title=title, **kw)
        rk = list(per_rank)
        cats, lo, mid, hi = [], [], [], []
        for j, c in enumerate(categories):
            sp = rkmod.spread(rk, [per_rank[r][j] for r in rk])
            cats.append(f"{c} (max: rank {sp.max_label})" if sp is not None else str(c))
            lo.append(sp.min if sp else None)
            mid.append(sp.p50 if sp else None)
            hi.append(sp.max if sp else None)
        kw["stacked"] = False
        return self.bar(
            cats,
            {"min over ranks": lo, "median over ranks": mid, "max over ranks": hi},
            id=id,
            title=f"{title}: minimum, median and maximum over {len(rk)} ranks",
            **kw,
        )

    def finish_tables(self) -> None:
        """Encode the per-rank tables of a many-rank report: those with the fewest bytes per rank
        first get every rank's rows while the budget lasts (``TABLE_BUDGET_BYTES`` of estimated
        compressed JSON, the page's size; ``TABLE_BUDGET_RAW_BYTES`` of JSON, what the browser
        parses); the others the focus ranks' rows, and say so."""
        if not self.deferred:
            return
        focus = self.focus().ranks
        cands = []
        for d in self.deferred:
            n = max(1, d.df["rank"].drop_nulls().n_unique())
            est, raw = _estimate_bytes(d.df, d.kw)
            cands.append((est / n, str(d.block["id"]), est, raw, d))
        budget, budget_raw = rkmod.TABLE_BUDGET_BYTES, rkmod.TABLE_BUDGET_RAW_BYTES
        for _, _, est, raw, d in sorted(cands, key=lambda t: (t[0], t[1])):
            n_ranks = d.df["rank"].drop_nulls().n_unique()
            fits = est <= min(budget, rkmod.TABLE_MAX_BYTES) and raw <= min(budget_raw, rkmod.TABLE_MAX_RAW_BYTES)
            if fits and d.df.height <= rkmod.TABLE_MAX_ROWS:
                budget -= est
                budget_raw -= raw
                d.block.update(encode_table(d.df, self.strings, id=d.block["id"], title=d.block["title"], **d.kw))
                if d.detail is not None:  # every row there is, of the ranks the analysis ran on
                    d.block["rank_subset"] = {"ranks": d.detail, "of": len(self.session.ranks), "reason": "detail"}
                continue
            sub = d.df.filter(pl.col("rank").is_in(focus) | pl.col("rank").is_null())  # null: not a rank's row
            if sub.height > d.max_rows:
                sort = d.kw.get("sort")
                if sort is not None and sort[0] in sub.columns:
                    sub = sub.sort(sort[0], descending=sort[1], nulls_last=True)
                sub = sub.head(d.max_rows)
            d.block.update(encode_table(sub, self.strings, id=d.block["id"], title=d.block["title"], **d.kw))
            d.block["total_rows"] = d.df.height
            d.block["rank_subset"] = {
                "ranks": sorted(int(r) for r in sub["rank"].drop_nulls().unique().to_list()),
                "of": len(self.session.ranks) if d.detail is not None else int(n_ranks),
                "reason": "size" if d.df.height <= rkmod.TABLE_MAX_ROWS else "rows",
            }
        self.deferred.clear()

    def kv(self, items: Sequence[tuple[str, Any]], *, id: str, title: str = "") -> dict[str, Any]:
        """Key facts: labels are ours, values may come from traces (interned)."""
        return {
            "type": "kv",
            "id": id,
            "title": title,
            "items": [
                {"label": k, "text": self.strings(v)} if isinstance(v, str) else {"label": k, "value": _num(v)}
                for k, v in items
            ],
        }

    def text(self, text: str, *, id: str) -> dict[str, Any]:
        return {"type": "text", "id": id, "text": self.strings(text)}

    def bar(
        self,
        categories: Sequence[Any],
        bars: Mapping[str, Sequence[Any]],
        *,
        id: str,
        title: str,
        stacked: bool = True,
        horizontal: bool = False,
        unit: str = "",
        x_label: str = "",
        y_label: str = "",
    ) -> dict[str, Any]:
        """Bars per category; one series per key of ``bars`` (stacked by default)."""
        return {
            "type": "chart",
            "chart": "bar",
            "id": id,
            "title": title,
            "categories": self.strings.many(categories),
            "series": [{"name": self.strings(k), "values": series(v)} for k, v in bars.items()],
            "stacked": stacked,
            "horizontal": horizontal,
            "unit": unit,
            "x_label": x_label,
            "y_label": y_label,
        }

    def line(
        self,
        lines: Sequence[tuple[Any, Sequence[Any], Sequence[Any]]],
        *,
        id: str,
        title: str,
        mode: str = "line",
        x_label: str = "",
        y_label: str = "",
        x_unit: str = "",
        y_unit: str = "",
        max_points: int = 2000,
    ) -> dict[str, Any]:
        """Lines ``(name, x, y)``; ``mode`` is ``line``, ``step`` or ``markers``; long series are
        reduced to at most ``max_points`` (min and max of each bucket kept)."""
        out = []
        for name, x, y in lines:
            xs, ys = downsample(np.asarray(x, dtype=float), np.asarray(y, dtype=float), max_points)
            out.append({"name": self.strings(name), "x": series(xs.tolist()), "y": series(ys.tolist())})
        return {
            "type": "chart",
            "chart": "line",
            "id": id,
            "title": title,
            "mode": mode,
            "series": out,
            "x_label": x_label,
            "y_label": y_label,
            "x_unit": x_unit,
            "y_unit": y_unit,
        }

    def heatmap(
        self,
        rows: Sequence[Any],
        cols: Sequence[Any],
        values: Any,
        *,
        id: str,
        title: str,
        unit: str = "",
        x_label: str = "",
        y_label: str = "",
        scale: str = "all",
        reduce: str = "mean",
        row_ranks: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        """``values[i][j]`` for row ``i`` and column ``j`` (null where unknown); colours span all
        values (``scale="all"``) or each row's own range (``"row"``). Beyond ``MAX_HEATMAP_COLS``
        columns, adjacent columns are merged by their ``reduce`` (``mean`` or ``max``).
        ``row_ranks``: the rank of each row (a click on a row picks it). A many-rank report
        draws heatmaps on a canvas (``canvas: true``)."""
        v = np.asarray(values, dtype=float).reshape(len(rows), len(cols))
        cols = list(cols)
        if len(cols) > MAX_HEATMAP_COLS:  # merge buckets of adjacent columns
            edges = np.linspace(0, len(cols), MAX_HEATMAP_COLS + 1).astype(np.int64)
            agg = np.nanmax if reduce == "max" else np.nanmean
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                v = np.stack([agg(v[:, a:b], axis=1) for a, b in pairwise(edges)], axis=1)
            cols = [f"{cols[a]}–{cols[b - 1]}" if b - a > 1 else str(cols[a]) for a, b in pairwise(edges)]
        extra: dict[str, Any] = {}
        if self.many:
            extra["canvas"] = True
        if row_ranks is not None:
            extra["row_ranks"] = [int(r) for r in row_ranks]
        return {
            "type": "chart",
            "chart": "heatmap",
            "id": id,
            "title": title,
            "rows": self.strings.many(rows),
            "cols": self.strings.many(cols),
            "values": [series(r) for r in v.tolist()],
            "scale": scale,
            "unit": unit,
            "x_label": x_label,
            "y_label": y_label,
            **extra,
        }

    def hist(
        self,
        groups: Mapping[str, Any],
        *,
        id: str,
        title: str,
        bins: int = 40,
        log: bool = True,
        x_label: str = "",
        unit: str = "",
    ) -> dict[str, Any]:
        """Histograms of the value arrays in ``groups`` on shared bin edges (log-spaced when
        ``log`` and all values are positive)."""
        arrays = {k: np.asarray(v, dtype=float) for k, v in groups.items()}
        arrays = {k: a[np.isfinite(a)] for k, a in arrays.items()}
        edges, counts, log = histogram(arrays, bins, log)
        return {
            "type": "chart",
            "chart": "hist",
            "id": id,
            "title": title,
            "edges": series(edges.tolist()),
            "series": [{"name": self.strings(k), "counts": c.tolist()} for k, c in counts.items()],
            "log_x": log,
            "x_label": x_label,
            "unit": unit,
        }


#: Column help of the distribution tables of a many-rank report (docs/report.md, "Many ranks").
SPREAD_HELP = {
    "ranks": "ranks with a value",
    "p50": "nearest-rank median over ranks: the value of the rank at position ceil(0.5·n), ascending",
    "p90": "nearest-rank 90th percentile over ranks",
    "p99": "nearest-rank 99th percentile over ranks",
    "min_rank": "the rank with the minimum (the lower rank on ties)",
    "max_rank": "the rank with the maximum (the lower rank on ties)",
    "outliers": f"ranks whose robust z-score exceeds {rkmod.OUTLIER_Z} in absolute value: z = (value − median) "
    "/ (1.4826 · median absolute deviation)",
    "outlier_ranks": f"the outlier ranks, largest |z| first (at most {rkmod.NAMED_OUTLIERS} named)",
}


def _estimate_bytes(df: pl.DataFrame, kw: Mapping[str, Any]) -> tuple[int, int]:
    """Estimated JSON bytes of ``df``'s table block with every rank's rows (its data and the strings
    it uses), compressed and not: measured on all rows when few, else on a sample of ranks and
    scaled."""
    ranks = sorted(df["rank"].drop_nulls().unique().to_list())
    sub, scale = df, 1.0
    if df.height > 2_000 and len(ranks) > rkmod.SIZE_SAMPLE_RANKS:
        pick = ranks[:: max(1, len(ranks) // rkmod.SIZE_SAMPLE_RANKS)][: rkmod.SIZE_SAMPLE_RANKS]
        sub = df.filter(pl.col("rank").is_in(pick))
        scale = df.height / max(1, sub.height)
    scratch = StringTable()
    blk = encode_table(sub, scratch, id="x", title="")
    packed, raw = rkmod.json_sizes([blk["data"], scratch.strings])
    return int(packed * scale), int(raw * scale)


def _num(v: Any) -> Any:
    from ranksight.report.html.payload import clean

    return clean(v)  # full precision: the browser formats it for display


def downsample(x: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` points: the series is cut into equal index buckets and each keeps
    its minimum and maximum (in x order), so peaks survive."""
    n = len(x)
    if n <= max_points:
        return x, y
    nb = max(1, max_points // 2)
    edges = np.linspace(0, n, nb + 1).astype(np.int64)
    starts = edges[:-1]
    starts = starts[starts < n]
    imin = np.minimum.reduceat(np.where(np.isnan(y), np.inf, y), starts)
    imax = np.maximum.reduceat(np.where(np.isnan(y), -np.inf, y), starts)
    # positions of the min / max in each bucket
    bucket = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    is_min = y == imin[bucket]
    is_max = y == imax[bucket]
    first_min = np.unique(bucket[is_min], return_index=True)[1]
    first_max = np.unique(bucket[is_max], return_index=True)[1]
    keep = np.unique(np.concatenate([np.flatnonzero(is_min)[first_min], np.flatnonzero(is_max)[first_max]]))
    return x[keep], y[keep]


def histogram(arrays: Mapping[str, np.ndarray], bins: int, log: bool) -> tuple[np.ndarray, dict[str, np.ndarray], bool]:
    """Shared bin edges over all arrays and the counts of each."""
    allv = np.concatenate([a for a in arrays.values()]) if arrays else np.array([])
    if allv.size == 0:
        raise Skip("no values to histogram")
    lo, hi = float(allv.min()), float(allv.max())
    log = log and lo > 0 and hi / lo > 20
    if hi == lo:
        edges = np.array([lo - 0.5, hi + 0.5]) if not log else np.array([lo / 1.1, hi * 1.1])
    elif log:
        edges = np.geomspace(lo, hi, bins + 1)
    else:
        edges = np.linspace(lo, hi, bins + 1)
    counts = {k: np.histogram(a, bins=edges)[0] for k, a in arrays.items()}
    return edges, counts, log


def wide(
    df: pl.DataFrame, index: str, on: str, values: str, *, scale: float = 1.0, order: Sequence[Any] | None = None
) -> tuple[list[Any], dict[str, list[Any]]]:
    """Long ``(index, on, values)`` rows as bar-chart input: categories (``index`` values, sorted)
    and one series per distinct ``on`` value (in ``order`` when given, else by total, largest first);
    missing cells are 0."""
    agg = df.group_by(index, on).agg(pl.col(values).sum())
    cats = sorted(agg[index].unique().to_list())
    keys = (
        list(order)
        if order is not None
        else (agg.group_by(on).agg(pl.col(values).sum()).sort([values, on], descending=[True, False])[on].to_list())
    )
    cells: dict[Any, dict[Any, Any]] = {}
    for i, k, v in zip(agg[index].to_list(), agg[on].to_list(), agg[values].to_list(), strict=True):
        cells.setdefault(k, {})[i] = v
    out: dict[str, list[Any]] = {}
    for k in keys:
        m = cells.get(k) if k is not None else None  # a null key matched no row before: no series
        if m:
            out[str(k)] = [(m.get(c) or 0) * scale for c in cats]
    return cats, out


def rank_labels(ranks: Sequence[Any]) -> list[str]:
    return [f"rank {r}" for r in ranks]
