"""The Session: the one place where analyses run, are cached, and map per-rank work.

- results are computed once per (analysis, ranks, options) and shared by every caller;
- a result that cannot be had is a typed ``Missing`` (unknown / no-data / failed), never text to match;
- every registered analysis does its per-rank work through ``Session.map`` on the run's engine
  (so ``--jobs`` and ``--scheduler`` reach it), with picklable functions and arguments;
- the demo's summary and report together compute each analysis once.
"""

from __future__ import annotations

import pickle
import warnings
from collections import Counter
from dataclasses import replace
from typing import Any

import polars as pl
import pytest

import ranksight
from ranksight.analyses import REGISTRY, AnalysisResult, Missing, Session, names, run_analysis
from ranksight.data import example_path
from ranksight.errors import MissingDataError, UsageError
from ranksight.model.engine import Engine, TraceSource
from ranksight.model.run import Run


@pytest.fixture(scope="module")
def two_ranks() -> Run:
    return ranksight.load(example_path("dlrm"), ranks=[0, 1], cache=False)


def test_result_is_computed_once_and_shared(two_ranks):
    s = Session(two_ranks)
    a = s.result("temporal")
    assert s.result("temporal") is a and s.calls["temporal"] == 1
    assert run_analysis("temporal", s) is a  # the one-call form reuses the session too
    b = s.result("temporal", per_step=True)
    assert b is not a and s.calls["temporal"] == 2  # other options, other result
    sub = s.with_ranks([1])
    one = sub.result("temporal")
    assert one["temporal"]["rank"].to_list() == [1] and s.calls["temporal"] == 3
    assert sub.result("temporal") is one and Session.of(s, [1]).result("temporal") is one  # shared store


def test_missing_is_typed(two_ranks, monkeypatch):
    s = Session(two_ranks)
    unknown = s.try_result("no-such-analysis")
    assert isinstance(unknown, Missing) and unknown.kind == "unknown" and not unknown
    with pytest.raises(UsageError, match="unknown analysis"):
        s.result("no-such-analysis")
    no_data = s.try_result("memory")  # the example has no [memory] events
    assert isinstance(no_data, Missing) and no_data.kind == "no-data" and "profile_memory" in no_data.reason
    with pytest.raises(MissingDataError):
        s.result("memory")

    calls = []

    def broken(run: Any, **kw: Any) -> AnalysisResult:
        calls.append(1)
        raise RuntimeError("boom")

    names()
    monkeypatch.setitem(REGISTRY, "steps", replace(REGISTRY["steps"], func=broken))
    with pytest.warns(UserWarning, match="analysis `steps` failed: RuntimeError: boom"):
        failed = s.try_result("steps")
    assert isinstance(failed, Missing) and failed.kind == "failed"
    assert s.failures == ["analysis `steps` failed: RuntimeError: boom"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert s.try_result("steps") is failed  # cached: run once, warned once
    assert calls == [1]


def test_seed_and_ranks_validation(two_ranks):
    s = Session(two_ranks)
    fake = AnalysisResult({"x": pl.DataFrame({"a": [1]})})
    s.seed("summary", fake, top=3)
    assert s.result("summary", top=3) is fake and s.calls["summary"] == 0
    with pytest.raises(UsageError, match="not loaded"):
        Session(two_ranks, [5])


class _RecordingEngine(Engine):
    """Runs per-rank work in this process, from the trace sources (as a worker would), after
    checking that the function and its arguments can be sent to a worker process."""

    name = "recording"

    def __init__(self) -> None:
        self.maps: list[str] = []

    def map(self, fn: Any, sources: Any, kwargs: dict[str, Any]) -> list[Any]:
        pickle.dumps((fn, kwargs))  # what a process pool or Dask would do with them
        self.maps.append(getattr(fn, "__qualname__", repr(fn)))
        return [fn(s.load(), **kwargs) for s in sources]

    def build(self, sources: Any) -> list[list[str]]:  # pragma: no cover - not used here
        return [[] for _ in sources]


#: Analyses whose work is not per-rank work on the run (they read inputs other than a run).
NEEDS_OTHER_INPUTS = {"diff": "two runs", "nccl-log": "NCCL log files"}


def test_every_analysis_maps_its_per_rank_work_on_the_engine(monkeypatch):
    run = ranksight.load(example_path("dlrm"), ranks=[0, 1], cache=False)
    engine = _RecordingEngine()
    run.engine = engine
    assert all(isinstance(s, TraceSource) for s in run._sources.values())
    outside: Counter[str] = Counter()
    current = [""]
    real_getitem = Run.__getitem__

    def counting_getitem(self: Run, rank: int) -> Any:
        outside[current[0]] += 1
        return real_getitem(self, rank)

    monkeypatch.setattr(Run, "__getitem__", counting_getitem)
    mapped = {}
    for name in names():
        if name in NEEDS_OTHER_INPUTS:
            continue
        current[0] = name
        before = len(engine.maps)
        res = Session(run).try_result(name)
        assert not (isinstance(res, Missing) and res.kind == "failed"), res
        mapped[name] = len(engine.maps) - before
    assert dict(outside) == {}  # no trace read in this process: every read went to the engine
    assert {n for n, k in mapped.items() if k == 0} == set()  # each analysis reached the engine


def test_demo_summary_and_report_compute_each_analysis_once(tmp_path, monkeypatch):
    """What ``ranksight demo`` does: summary, then the report, on one session."""
    from ranksight.report.headline import build_summary
    from ranksight.report.html import write_report

    names()
    computed: Counter[tuple[str, tuple[tuple[str, Any], ...]]] = Counter()
    for name, spec in list(REGISTRY.items()):

        def counted(run: Any, *, _name: str = name, _func: Any = spec.func, **kw: Any) -> AnalysisResult:
            if isinstance(run, Session):  # a call from the session, not one analysis calling another's function
                computed[(_name, tuple(sorted((k, str(v)) for k, v in kw.items() if k != "ranks")))] += 1
            return _func(run, **kw)

        monkeypatch.setitem(REGISTRY, name, replace(spec, func=counted))
    session = Session(ranksight.load(example_path("dlrm")))
    build_summary(session, top=3)
    write_report(session, tmp_path / "demo.html")
    assert [k for k, c in computed.items() if c > 1] == []
    per_name = Counter(name for name, _ in computed)
    # one computation per analysis; sequences once per operator shown (its subject, not a variant)
    assert {n: c for n, c in per_name.items() if c > 1 and n != "sequences"} == {}
    ops = {dict(opts).get("op") for name, opts in computed if name == "sequences"}
    assert len(ops) == per_name["sequences"]
    assert set(session.calls) == set(per_name)


def test_registration_lists_name_every_module():
    """Analyses and report sections are registered from explicit lists: a module left out of its
    list would silently vanish from the CLI and the report."""
    import pkgutil

    import ranksight.analyses as analyses_pkg
    import ranksight.report.html as html_pkg
    from ranksight.analyses import ANALYSIS_MODULES
    from ranksight.report.html.build import SECTION_MODULES

    on_disk = {m.name for m in pkgutil.iter_modules(analyses_pkg.__path__) if not m.name.startswith("_")}
    assert set(ANALYSIS_MODULES) == on_disk
    names()
    modules = [REGISTRY[n].func.__module__.removeprefix("ranksight.analyses.") for n in REGISTRY]
    # one slug per module; diff compares two runs and is its own command (ranksight diff)
    assert sorted(modules) == sorted(set(ANALYSIS_MODULES) - {"diff"})
    sections = {m.name for m in pkgutil.iter_modules(html_pkg.__path__) if m.name.startswith("sections_")}
    assert set(SECTION_MODULES) == sections
    import ranksight.cli as cli_pkg
    from ranksight.cli import COMMAND_MODULES

    assert set(COMMAND_MODULES) == {
        m.name for m in pkgutil.iter_modules(cli_pkg.__path__) if not m.name.startswith("_")
    }
