"""``diagnose``: rules that turn the analyses into findings, each with evidence and a fix to try.

A :class:`Finding` says which rule fired, how bad it is (``severity`` ``high`` / ``medium`` /
``low`` and ``impact``, the share of step or GPU time at stake, 0–1), which ranks, a one-line
``summary`` with the numbers, the ``evidence`` (numbers, steps, ranks, ops or kernels, time
ranges) and the ``fixes`` to try. Findings are sorted worst first: by severity, then impact.

The rules and their exact triggers are in :mod:`ranksight.analyses.diagnose._rules` and
``docs/diagnose.md``; each rule reads registered analyses (``overview``, ``gpu-metrics``,
``overlap``, ``queue``, ``memory``, ``ops``, ``stragglers``) through a shared cache so each
analysis runs at most once. The JSON document (:func:`to_json`) has a versioned schema,
:data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from ranksight.analyses._base import AnalysisResult, AnalysisSpec, register
from ranksight.analyses._session import Missing, Session
from ranksight.errors import RanksightError
from ranksight.model.kinds import GPU_KINDS
from ranksight.views.event_source import CannotStack, EventSource

if TYPE_CHECKING:
    from ranksight.model.run import Run
    from ranksight.model.trace import Trace
    from ranksight.views.run_context import RunContext

__all__ = ["Finding", "Context", "Applies", "diagnose", "findings", "to_json", "SCHEMA", "SCHEMA_VERSION", "SEVERITIES"]

T = TypeVar("T")

SCHEMA = "ranksight.diagnose"
#: Bumped when a field is removed or changes meaning; adding fields or rules keeps the version.
SCHEMA_VERSION = 1
SEVERITIES = ("high", "medium", "low")


@dataclass
class Finding:
    """One diagnosed problem."""

    rule: str
    title: str
    severity: str
    impact: float
    ranks: list[int]
    summary: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fixes: list[str] = field(default_factory=list)

    def sort_key(self) -> tuple[int, float, str]:
        return (SEVERITIES.index(self.severity), -self.impact, self.rule)


class Context:
    """What the rules share: the session (the run, the selected ranks, analysis results) and notes."""

    def __init__(self, run: Run | Session, ranks: Sequence[int] | None = None) -> None:
        self.session = Session.of(run, ranks)
        self.ranks = self.session.ranks
        self.notes: list[str] = []
        #: per-rank facts already computed: ``{fn: {rank: value}}`` (:meth:`per_rank`)
        self._per_rank: dict[Callable[..., Any], dict[int, Any]] = {}

    @property
    def run(self) -> Run:
        return self.session.run  # type: ignore[return-value]

    def result(self, name: str, **options: Any) -> AnalysisResult | None:
        """A registered analysis' result on the selected ranks (run once per session); None when
        the traces lack its data or the analysis failed (a failure is also noted)."""
        res = self.session.try_result(name, **options)
        if isinstance(res, Missing):
            if res.kind == "failed" and res.reason not in self.notes:
                self.notes.append(res.reason)
            return None
        return res

    def on_rank(self, fn: Callable[..., T], rank: int, **kwargs: Any) -> T:
        """``fn(trace, **kwargs)`` on one rank, run on the run's engine (``fn`` module-level);
        without ``kwargs``, read from :meth:`per_rank` when it has the rank."""
        if not kwargs and rank in self._per_rank.get(fn, {}):
            return self._per_rank[fn][rank]
        return self.session.map(fn, [rank], **kwargs)[rank]

    def per_rank(self, fn: Callable[..., T], ranks: Sequence[int] | None = None) -> dict[int, T]:
        """``{rank: fn(trace)}`` over ``ranks`` (default: the selected ranks) in one map on the run's
        engine (a rule's loop over ranks asks once, not once per rank: the ranks then run on the
        engine's threads or workers); kept per function for the other rules. A function with a
        one-pass version (:func:`one_pass`) runs once over the stacked events of many small ranks
        held here (issue 19)."""
        rs = self.ranks if ranks is None else list(ranks)
        have = self._per_rank.setdefault(fn, {})
        todo = [r for r in rs if r not in have]
        many = _ONE_PASS.get(fn)
        if many is not None and len(todo) > 1:
            stacked = self.session.stacked_events()
            if stacked is not None:
                with contextlib.suppress(CannotStack):
                    have.update(many(EventSource.stacked([self.session.trace(r) for r in todo], stacked)))
                    todo = []
        if todo:
            have.update(self.session.map(fn, todo))
        return {r: have[r] for r in rs}

    def has_gpu(self, rank: int) -> bool:
        return self.gpu_ranks().get(rank, False)

    def gpu_ranks(self) -> dict[int, bool]:
        """Whether each selected rank has GPU work (one map for all ranks)."""
        return self.per_rank(has_gpu_work)

    def run_context(self, rank: int) -> RunContext | None:
        """What kind of run the rank records (``run-context``); None when it cannot be told."""
        from ranksight.analyses.run_context import run_contexts

        try:
            return run_contexts(self.session).get(rank)
        except RanksightError as err:
            note = f"run context unavailable: {err}"
            if note not in self.notes:
                self.notes.append(note)
            return None

    def mode(self, rank: int) -> str:
        """``training``, ``inference`` or ``unknown`` (``run-context``)."""
        c = self.run_context(rank)
        return c.mode if c is not None else "unknown"

    def replays_graphs(self, rank: int) -> bool:
        c = self.run_context(rank)
        return c is not None and c.graphs in ("replay", "capture+replay")


@dataclass(frozen=True)
class Applies:
    """The run contexts a rule applies to (``run-context``): ``modes`` it judges, and whether it
    judges a capture-only trace (kernels recorded into a CUDA/HIP graph, not executed: no GPU time
    to judge). A finding on a rank outside them is dropped, with a note naming the context."""

    modes: tuple[str, ...] = ("training", "inference", "unknown")
    capture: bool = False

    def why_not(self, c: RunContext | None) -> str | None:
        if c is None:
            return None
        if c.graphs == "capture" and not self.capture:
            return "a CUDA/HIP graph capture trace (kernels recorded, not executed)"
        if c.mode not in self.modes:
            return f"an {c.mode} run" if c.mode == "inference" else f"a {c.mode} run"
        return None


#: Per-rank functions of the rules and their one-pass versions over stacked ranks (:func:`one_pass`).
_ONE_PASS: dict[Callable[..., Any], Callable[[EventSource], dict[int, Any]]] = {}

_F = TypeVar("_F", bound=Callable[[EventSource], dict[int, Any]])


def one_pass(one_rank: Callable[..., Any]) -> Callable[[_F], _F]:
    """Register the decorated ``many(src) -> {rank: value}`` as the one-pass version of the
    per-rank function ``one_rank`` (:meth:`Context.per_rank` takes it over stacked ranks): the
    same answer for every rank of ``src``, read in one pass (issue 19)."""

    def register_many(many: _F) -> _F:
        _ONE_PASS[one_rank] = many
        return many

    return register_many


def has_gpu_work(trace: Trace) -> bool:
    """Whether the trace has GPU work (kernels, copies, sets)."""
    return trace.kind(*GPU_KINDS, columns=["row"]).height > 0


@one_pass(has_gpu_work)
def _has_gpu_work_many(src: EventSource) -> dict[int, bool]:
    got = src.ev.filter(pl.col("kind").is_in(list(GPU_KINDS))).select(pl.col("rank").unique()).collect()
    ranks = set(got["rank"].to_list())
    return {t.rank: t.rank in ranks for t in src.traces}


def findings(run: Run | Session, *, ranks: Sequence[int] | None = None) -> tuple[list[Finding], list[str], list[str]]:
    """All findings (worst first), the rules that ran, and notes (computed once per session)."""
    sess = Session.of(run, ranks)
    return sess.memo(("diagnose-findings",), lambda: _findings(sess))


def _findings(sess: Session) -> tuple[list[Finding], list[str], list[str]]:
    import os

    if sess.run is not None and sess.run.small_ranks and os.environ.get("POLARS_ENGINE_AFFINITY") != "in-memory":
        # small ranks: polars' in-memory engine set once for every rule's per-rank work (as
        # Session.result does for an analysis), not once per rank and rule (~0.4 ms a scope)
        with pl.Config(engine_affinity="in-memory"):
            return _run_rules(sess)
    return _run_rules(sess)


def _run_rules(sess: Session) -> tuple[list[Finding], list[str], list[str]]:
    from ranksight.analyses.diagnose._rules import APPLIES, RULES

    ctx = Context(sess)
    out: list[Finding] = []
    for rule in RULES:
        name = rule.__name__.removeprefix("rule_").replace("_", "-")
        out.extend(_merge(_in_context(ctx, name, APPLIES.get(name, Applies()), rule(ctx))))
    return (
        sorted(out, key=Finding.sort_key),
        [r.__name__.removeprefix("rule_").replace("_", "-") for r in RULES],
        ctx.notes,
    )


def _in_context(ctx: Context, name: str, applies: Applies, found: list[Finding]) -> list[Finding]:
    """The findings on ranks whose run context the rule applies to; a note for each rank left out."""
    kept = []
    for f in found:
        ranks = []
        for r in f.ranks:
            why = applies.why_not(ctx.run_context(r))
            if why is None:
                ranks.append(r)
            else:
                note = f"{name}: not judged on rank {r}, {why}"
                if note not in ctx.notes:
                    ctx.notes.append(note)
        if ranks:
            f.ranks = ranks
            kept.append(f)
    return kept


def _merge(found: list[Finding]) -> list[Finding]:
    """One finding per rule: the worst rank's finding, with every rank and each rank's summary."""
    if len(found) <= 1:
        return found
    found = sorted(found, key=Finding.sort_key)
    head = found[0]
    ranks = sorted({r for f in found for r in f.ranks})
    head.summary += (
        f" ({len(found) - 1} more finding(s) on ranks {', '.join(str(r) for f in found[1:] for r in f.ranks)})"
    )
    head.evidence = {**head.evidence, "by_rank": {",".join(map(str, f.ranks)): f.summary for f in found[1:]}}
    head.ranks = ranks
    return [head]


def _jsonable(v: Any) -> Any:
    if isinstance(v, float):
        return None if v != v or v in (float("inf"), float("-inf")) else round(v, 6)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def to_json(run: Run, found: list[Finding], rules: list[str], notes: list[str]) -> str:
    """The versioned JSON document (see ``docs/diagnose.md``)."""
    from ranksight import __version__

    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "ranksight_version": __version__,
        "traces": [{"rank": t.rank, "path": t.path} for t in run],
        "rules": rules,
        "findings": [_jsonable(asdict(f)) for f in found],
        "notes": notes,
    }
    return json.dumps(doc, indent=1, default=str)


def _table(found: list[Finding]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "severity": [f.severity for f in found],
            "rule": [f.rule for f in found],
            "impact": [f.impact for f in found],
            "ranks": [",".join(map(str, f.ranks)) for f in found],
            "summary": [f.summary for f in found],
            "fix": [f.fixes[0] if f.fixes else "" for f in found],
        },
        schema={
            "severity": pl.String,
            "rule": pl.String,
            "impact": pl.Float64,
            "ranks": pl.String,
            "summary": pl.String,
            "fix": pl.String,
        },
    )


def diagnose(run: Run | Session, *, ranks: Sequence[int] | None = None) -> AnalysisResult:
    """Findings as a table (worst first); ``ranksight diagnose`` prints them in full."""
    found, rules, notes = findings(run, ranks=ranks)
    if not found:
        notes = [f"no finding (rules run: {', '.join(rules)})", *notes]
    return AnalysisResult({"findings": _table(found)}, notes)


Rule = Callable[[Context], list[Finding]]

register(
    AnalysisSpec(
        name="diagnose", func=diagnose, help="findings with evidence and fixes, worst first (see ranksight diagnose)"
    )
)
