"""The one place where analyses run: :class:`Session`.

A session is opened over a :class:`~ranksight.model.run.Run` (and optionally a subset of its
ranks). Everything that runs an analysis goes through it: the CLI, the report, ``summary``,
``diagnose``, ``diff`` and the HTA facade, and analyses that read other analyses. It

- runs each analysis once per (name, ranks, options) and keeps the result
  (:meth:`Session.result`);
- says why a result is missing with a typed :class:`Missing` instead of an exception whose
  text a caller would have to read (:meth:`Session.try_result`);
- is the only place that iterates ranks (:meth:`Session.map`): per-rank work runs on the run's
  engine (this process, a process pool, or a Dask cluster), so ``--jobs`` and ``--scheduler``
  reach every analysis.

Analyses take ``(run, *, ranks=None, **options)`` where ``run`` is a :class:`Run` or a
:class:`Session`; :meth:`Session.of` turns either into a session over the selected ranks that
shares the caller's cache.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ranksight.analyses._base import REGISTRY, AnalysisResult, load_all, selected
from ranksight.errors import RanksightError, UsageError

if TYPE_CHECKING:
    import polars as pl

    from ranksight.model.run import Run
    from ranksight.model.trace import Trace

__all__ = ["Session", "Missing", "MISSING_KINDS"]

#: Why a result is missing: the analysis is not registered (``unknown``), the traces lack its
#: data (``no-data``: a :class:`~ranksight.errors.MissingDataError` or another
#: :class:`~ranksight.errors.RanksightError`), or it raised something else (``failed``: a bug,
#: also listed in :attr:`Session.failures` and warned once).
MISSING_KINDS = ("unknown", "no-data", "failed")

_Key = tuple[str, tuple[int, ...] | None, tuple[tuple[str, Any], ...]]


@dataclass(frozen=True)
class Missing:
    """A result that could not be had, and why (``kind`` is one of :data:`MISSING_KINDS`)."""

    analysis: str
    kind: str
    reason: str

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return self.reason


@dataclass
class _Store:
    """What the sessions over one run share: results, failures, and how often each analysis ran."""

    results: dict[_Key, AnalysisResult | Missing] = field(default_factory=dict)
    memos: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    defaults: dict[str, Any] = field(default_factory=dict)


def _freeze(v: Any) -> Any:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, set | frozenset):
        return tuple(sorted(_freeze(x) for x in v))
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


class Session:
    """Analyses over a run (or some of its ranks), each computed once.

    >>> s = Session(ranksight.load("traces/"))          # doctest: +SKIP
    >>> s.result("temporal").main                        # doctest: +SKIP
    """

    def __init__(self, run: Run | None, ranks: Sequence[int] | None = None, *, _store: _Store | None = None) -> None:
        self.run = run
        self.ranks: list[int] = selected(run, ranks)
        #: the ranks as asked (None: the run's default; a few analyses, e.g. ``sequences``, then
        #: cover fewer ranks)
        self.requested: list[int] | None = None if ranks is None else list(ranks)
        self._store = _store if _store is not None else _Store()

    @classmethod
    def of(cls, run: Run | Session | None, ranks: Sequence[int] | None = None) -> Session:
        """A session over ``ranks`` (default: all of the session's, or of the run's): ``run``
        itself when it already is one over those ranks, else one that shares its cache."""
        if isinstance(run, Session):
            if ranks is None or list(ranks) == run.requested:
                return run
            return cls(run.run, ranks, _store=run._store)
        return cls(run, ranks)

    def with_ranks(self, ranks: Sequence[int] | None) -> Session:
        """This session over other ranks, sharing the cache."""
        return Session.of(self, ranks)

    def __repr__(self) -> str:
        return f"Session(ranks={self.ranks}, results={len(self._store.results)})"

    # ---- analyses ---------------------------------------------------------------------------

    @property
    def failures(self) -> list[str]:
        """Analyses that raised something other than a RanksightError (bugs), one line each."""
        return self._store.failures

    @property
    def calls(self) -> Counter[str]:
        """How many times each analysis was computed (not served from the cache)."""
        return self._store.calls

    def set_default(self, option: str, value: Any) -> None:
        """Give ``option`` = ``value`` to every analysis that declares the option and is asked without it
        (``ranksight report --capture PATH``: every operator analysis the report reads gets the capture);
        shared by the sessions over the same run."""
        self._store.defaults[option] = value

    def default(self, option: str) -> Any:
        """The value :meth:`set_default` gave ``option`` (None when none was)."""
        return self._store.defaults.get(option)

    def _with_defaults(self, name: str, options: dict[str, Any]) -> dict[str, Any]:
        if not self._store.defaults or name not in REGISTRY:
            return options
        declared = {o.name for o in REGISTRY[name].options}
        add = {k: v for k, v in self._store.defaults.items() if k in declared and k not in options}
        return {**add, **options} if add else options

    def _key(self, name: str, options: dict[str, Any]) -> _Key:
        asked = None if self.requested is None else tuple(self.requested)
        return (name, asked, tuple(sorted((k, _freeze(v)) for k, v in options.items())))

    def result(self, name: str, **options: Any) -> AnalysisResult:
        """The analysis ``name`` on this session's ranks, computed once per set of options.

        Raises :class:`~ranksight.errors.UsageError` for an unknown name and the analysis' own
        error (e.g. :class:`~ranksight.errors.MissingDataError`) when it cannot be computed.
        """
        load_all()
        spec = REGISTRY.get(name)
        if spec is None:
            raise UsageError(f"unknown analysis {name!r}; choose from: {', '.join(sorted(REGISTRY))}")
        options = self._with_defaults(name, options)
        key = self._key(name, options)
        hit = self._store.results.get(key)
        if isinstance(hit, AnalysisResult):
            return hit
        self._store.calls[name] += 1
        if (
            self.run is not None
            and os.environ.get("POLARS_ENGINE_AFFINITY") != "in-memory"  # not already (a nested analysis)
            and self.run.small_ranks
        ):
            # small ranks: polars' in-memory engine (the streaming engine's fixed cost per query
            # is most of a small rank's time; the answers are the same)
            import polars as pl

            with pl.Config(engine_affinity="in-memory"):
                res = spec.func(self, ranks=self.requested, **options)
        else:
            res = spec.func(self, ranks=self.requested, **options)
        self._store.results[key] = res
        return res

    def seed(self, name: str, result: AnalysisResult, **options: Any) -> None:
        """Use ``result`` as the analysis ``name`` with these options (a result computed
        elsewhere, or a hand-built one in a test)."""
        self._store.results[self._key(name, options)] = result

    def try_result(self, name: str, **options: Any) -> AnalysisResult | Missing:
        """Like :meth:`result`, but a result that cannot be had is a :class:`Missing` with the
        reason (also cached: a failing analysis is run once)."""
        load_all()
        if name not in REGISTRY:
            return Missing(name, "unknown", f"the `{name}` analysis is not available in this ranksight version")
        options = self._with_defaults(name, options)
        key = self._key(name, options)
        hit = self._store.results.get(key)
        if hit is not None:
            return hit
        res = self._guarded(name, lambda: self.result(name, **options))
        if isinstance(res, Missing):
            self._store.results[key] = res
        return res

    def try_memo(self, key: tuple[Any, ...], compute: Callable[[], Any], label: str) -> Any:
        """:meth:`memo` with :meth:`try_result`'s guard: the value, or a :class:`Missing` named
        ``label`` when ``compute`` raises (cached either way; a bug is warned once)."""
        return self.memo(key, lambda: self._guarded(label, compute))

    def _guarded(self, label: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, or the :class:`Missing` that says why it could not be had."""
        try:
            return compute()
        except RanksightError as err:  # MissingDataError, or another reason the traces cannot give it
            return Missing(label, "no-data", str(err))
        except Exception as err:  # a bug in one analysis must not lose the callers' other parts
            msg = f"analysis `{label}` failed: {type(err).__name__}: {err}"
            self._store.failures.append(msg)
            warnings.warn(msg, stacklevel=4)
            return Missing(label, "failed", msg)

    def memo(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """``compute()`` once per ``key`` and this session's ranks: cross-rank data that several
        analyses read (e.g. the matched collectives)."""
        full = (*key, None if self.requested is None else tuple(self.requested))
        if full not in self._store.memos:
            self._store.memos[full] = compute()
        return self._store.memos[full]

    # ---- per-rank work ----------------------------------------------------------------------

    def map(self, fn: Callable[..., Any], ranks: Sequence[int] | None = None, **kwargs: Any) -> dict[int, Any]:
        """``{rank: fn(trace, **kwargs)}`` over this session's ranks (or ``ranks``), on the run's
        engine. ``fn`` must be a module-level function returning something small: on a process
        pool or a Dask cluster each rank's trace is loaded where ``fn`` runs, and only results
        come back. This is the only place that iterates ranks."""
        if self.run is None:
            return {}
        rs = self.ranks if ranks is None else selected(self.run, ranks)
        return self.run.map(fn, rs, **kwargs)

    def stacked_events(self) -> pl.DataFrame | None:
        """The events of this session's ranks as one frame with a ``rank`` column (Int32), in rank
        order, when there are several and every one is small and held in this process
        (:attr:`Run.small_ranks <ranksight.model.run.Run.small_ranks>`) and the run's engine is this
        process (with a process pool or Dask the per-rank work goes there): what an analysis written
        over a rank column reads once instead of once per rank (issue 19). None otherwise (the
        analysis maps over the ranks). Made once per session cache; the traces' columns are
        referenced, not copied."""
        from ranksight.model.engine import LocalEngine

        run = self.run
        if run is None or len(self.ranks) < 2 or not run.small_ranks:
            return None
        if not isinstance(run.engine, LocalEngine):  # a process pool or Dask: the work goes there
            return None
        return self.memo(("stacked_events",), lambda: _stack([run[r] for r in self.ranks]))

    def trace(self, rank: int) -> Trace:
        """One rank's trace in this process (for work on one rank that is not per-rank work:
        prefer :meth:`map`)."""
        if self.run is None:
            raise TypeError("this session has no run, hence no traces")
        return self.run[rank]


def _stack(traces: list[Trace]) -> pl.DataFrame | None:
    """The traces' events stacked with their ``rank``; None when their schemas cannot be stacked
    (the caller then works rank by rank, as before)."""
    import polars as pl

    frames = [t.events.with_columns(pl.lit(t.rank, pl.Int32).alias("rank")) for t in traces]
    try:
        return pl.concat(frames, how="vertical", rechunk=False)
    except (pl.exceptions.SchemaError, pl.exceptions.ShapeError, pl.exceptions.InvalidOperationError):
        return None
