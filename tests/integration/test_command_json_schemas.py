"""Every command's ``--format json`` carries ``schema_version`` and follows its published schema
(issue 21, item 3), on real traces, through the CLI in this process.

| command | schema |
|---|---|
| ``analyze NAME``, ``info``, ``health``, ``nccl-log`` | ``docs/analysis-schema.json`` (they are analyses) |
| ``summary``, ``demo`` | ``docs/summary-schema.json`` |
| ``diagnose`` | ``docs/diagnose-schema.json`` |
| ``diff`` | ``docs/diff-schema.json`` |
| ``cache info|verify|clear`` | ``docs/cache-schema.json`` |

``info``, ``health`` and ``nccl-log`` write the same document as ``analyze`` writes for their
analysis (one definition, one document).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import DATA

from ranksight.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
TWO_RANKS = str(DATA / "hta/trace_filter")
NCCL_LOG = str(DATA / "nccl_logs/cluster-gpu-node-a.log")
DLRM = str(ROOT / "src/ranksight/data/examples/dlrm")
DLRM_LOG = str(DATA / "nccl_logs/dlrm-8ranks.log.gz")
R50 = "kineto/2021-07-08_c6e5fe20/tb_plugin/samples"
W0 = str(DATA / f"{R50}/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz")
W4 = str(DATA / f"{R50}/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz")

#: schema file of each command's document
SCHEMAS = {
    "analysis": "analysis-schema.json",
    "summary": "summary-schema.json",
    "diagnose": "diagnose-schema.json",
    "diff": "diff-schema.json",
    "cache": "cache-schema.json",
}


@pytest.fixture(scope="module")
def validators() -> dict[str, Any]:
    jsonschema = pytest.importorskip("jsonschema")
    out = {}
    for key, fname in SCHEMAS.items():
        schema = json.loads((ROOT / "docs" / fname).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        out[key] = jsonschema.Draft202012Validator(schema)
    return out


def run_json(capsys: pytest.CaptureFixture[str], *args: str, rc: int = 0) -> dict[str, Any]:
    capsys.readouterr()
    got = main([*args, "--format", "json"])
    out, err = capsys.readouterr()
    assert got == rc, err
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


def check(validators: dict[str, Any], kind: str, doc: dict[str, Any]) -> None:
    """The document has an integer ``schema_version`` and validates against its schema (every
    error listed on failure)."""
    assert isinstance(doc.get("schema_version"), int), sorted(doc)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validators[kind].iter_errors(doc)]
    assert errors == []


def same_document(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two analysis documents equal in everything but the version string."""
    assert {k: v for k, v in a.items() if k != "ranksight_version"} == {
        k: v for k, v in b.items() if k != "ranksight_version"
    }


def test_info_is_the_info_analysis_document(capsys, validators) -> None:  # noqa: ANN001
    doc = run_json(capsys, "info", TWO_RANKS, "--no-cache")
    check(validators, "analysis", doc)
    assert doc["schema"] == "ranksight-analysis" and doc["analysis"] == "info" and doc["ranks"] == [0, 1]
    files = doc["tables"]["files"]
    # raw numbers, not the terminal's "2 (#551–#552)"
    assert [(f["rank"], f["steps"], f["first_step"], f["last_step"]) for f in files] == [
        (0, 2, 551, 552),
        (1, 2, 551, 552),
    ]
    same_document(doc, run_json(capsys, "analyze", "info", TWO_RANKS, "--no-cache"))
    one = run_json(capsys, "info", TWO_RANKS, "--no-cache", "--table", "events by kind")
    check(validators, "analysis", one)
    assert list(one["tables"]) == list(one["columns"]) == ["events by kind"]


def test_health_document(capsys, validators) -> None:  # noqa: ANN001
    doc = run_json(capsys, "health", TWO_RANKS, "--no-cache")
    check(validators, "analysis", doc)
    assert doc["analysis"] == "health" and doc["options"] == {"noise_us": 5.0} and list(doc["tables"]) == ["problems"]
    every = run_json(capsys, "health", TWO_RANKS, "--no-cache", "--all", "--noise-us", "2")
    check(validators, "analysis", every)
    assert every["options"] == {"noise_us": 2.0} and list(every["tables"]) == ["checks"]
    # the same table as the analysis' own document
    ref = run_json(capsys, "analyze", "health", TWO_RANKS, "--no-cache", "--noise-us", "2", "--table", "checks")
    same_document(every, ref)


def test_nccl_log_document(capsys, validators) -> None:  # noqa: ANN001
    doc = run_json(capsys, "nccl-log", NCCL_LOG, "--topology")
    check(validators, "analysis", doc)
    assert doc["analysis"] == "nccl-log" and doc["ranks"] == []
    assert doc["options"] == {"logs": [NCCL_LOG], "operations": False, "topology": True}
    assert "rings" in doc["tables"]
    same_document(doc, run_json(capsys, "analyze", "nccl-log", "--logs", NCCL_LOG, "--topology"))
    joined = run_json(capsys, "nccl-log", DLRM_LOG, "--traces", DLRM)
    check(validators, "analysis", joined)
    assert joined["ranks"] == list(range(8))


def test_summary_document(capsys, validators) -> None:  # noqa: ANN001
    doc = run_json(capsys, "summary", TWO_RANKS, "--no-cache", "--top", "2")
    check(validators, "summary", doc)
    assert doc["schema_version"] == doc["version"] == 1
    demo = run_json(capsys, "demo", "--no-report")  # the summary of the built-in example
    check(validators, "summary", demo)
    assert demo["ranks"] == list(range(8))


def test_diagnose_document(capsys, validators) -> None:  # noqa: ANN001
    doc = run_json(capsys, "diagnose", DLRM, "--no-cache")
    check(validators, "diagnose", doc)
    assert doc["findings"], "DLRM has findings (the straggler rule fires): the items' schema is exercised"


def test_diff_document(capsys, validators) -> None:  # noqa: ANN001
    doc = run_json(capsys, "diff", W0, W4, "--no-cache")
    check(validators, "diff", doc)
    assert doc["schema"] == "ranksight-diff" and "gate" not in doc
    assert list(doc["columns"]) == list(doc["tables"])
    assert doc["columns"]["summary"]["p_value"] == "Float64"
    gated = run_json(capsys, "diff", W4, W0, "--no-cache", "--fail-if-slower", "5%", "--metric", "step_time,mfu", rc=1)
    check(validators, "diff", gated)
    assert gated["gate"]["failed"] is True and [c["metric"] for c in gated["gate"]["checks"]] == ["step_time", "mfu"]


def test_cache_documents(capsys, validators, tmp_path: Path) -> None:  # noqa: ANN001
    """An entry (a trace over the cache's 1 MiB threshold), an entry of an older format and a
    temporary directory: info, verify and clear each write a document of the cache schema."""
    trace = tmp_path / "in" / "rank0.json"
    trace.parent.mkdir()
    with gzip.open(DATA / "hta/trace_filter/sampled_rank-0.json.gz") as src, open(trace, "wb") as dst:
        shutil.copyfileobj(src, dst)
    cache = tmp_path / "cache"
    assert main(["info", str(trace), "--cache-dir", str(cache), "-q"]) == 0
    (cache / "rank9.json-0123456789abcdef0123456789abcdef").mkdir()
    (cache / "rank9.json-0123456789abcdef0123456789abcdef" / "meta.json").write_text('{"format_version": 1}')
    info = run_json(capsys, "cache", "info", "--cache-dir", str(cache))
    check(validators, "cache", info)
    assert info["action"] == "info" and info["cache_dir"] == str(cache)
    assert sorted(e["kind"] for e in info["tables"]["entries"]) == ["entry", "old"]
    verify = run_json(capsys, "cache", "verify", "--cache-dir", str(cache))
    check(validators, "cache", verify)
    assert sorted(e["status"] for e in verify["tables"]["entries"]) == ["ok", "older format (unused)"]
    clear = run_json(capsys, "cache", "clear", "--cache-dir", str(cache), "--stale")
    check(validators, "cache", clear)
    assert [e["kind"] for e in clear["tables"]["removed"]] == ["old"]
    assert clear["notes"] == [f"removed 1 of 2 from {cache} (0.00 MB)"]
    assert [p.name.startswith("rank0.json-") for p in cache.iterdir()] == [True]


def _offers_json(p: argparse.ArgumentParser) -> bool:
    """The parser, or one of its subcommands' (``analyze NAME``), takes ``--format json``."""
    for a in p._actions:
        if "--format" in a.option_strings and a.choices is not None and "json" in a.choices:
            return True
        if isinstance(a, argparse._SubParsersAction) and any(_offers_json(sp) for sp in a.choices.values()):
            return True
    return False


def test_every_command_with_json_is_covered() -> None:
    """The commands that offer ``--format json`` are exactly those this file checks: a new one
    cannot ship without a published schema and a test here."""
    top = build_parser()
    (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    with_json = {name for name, p in sub.choices.items() if _offers_json(p)}
    assert with_json == {
        "analyze",
        "info",
        "health",
        "nccl-log",
        "summary",
        "demo",
        "diagnose",
        "diff",
        "cache",
    }
