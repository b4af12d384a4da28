"""Outputs other tools read (issue 21, item 3), on real traces, through the CLI in this process.

- ``ranksight analyze X --format csv`` is ONE table that ``pandas.read_csv`` reads as is, for every
  registered analysis (acceptance), and equals the table of ``--format json``;
- ``--format json`` follows ``docs/analysis-schema.json`` for every analysis;
- ``-o DIR`` writes every table as its own file, staged (nothing on a refusal);
- nothing to report exits 0 with an empty output and one line on stderr; bad input exits 2;
- one output spelling (``-o/--output``; ``--to``/``--out`` hidden aliases), booleans
  ``--flag/--no-flag`` (``--include-memory false`` still read), one set of format names.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd
import polars as pl
import pytest
from tests.conftest import DATA

from ranksight.analyses import REGISTRY, names
from ranksight.cli import main

#: A real H100 training trace whose data every analysis needs (memory events, nn.Module frames, steps)
TRACE = str(DATA / "generated/h100/train-modules")
DLRM = str(Path(__file__).resolve().parents[2] / "src/ranksight/data/examples/dlrm")
NCCL_LOG = str(DATA / "nccl_logs/cluster-gpu-node-a.log")

#: a vLLM decode step (serving annotations, graph replay)
VLLM = str(DATA / "tracelens/inference/vllm_decode_full/graph_execution.json.gz")
TRACES = (TRACE, DLRM, VLLM)

#: What an analysis needs besides the traces (the only options given)
EXTRA = {"nccl-log": ["--logs", NCCL_LOG], "sequences": ["--op", "aten::linear"]}

ROOT = Path(__file__).resolve().parents[2]


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as e:  # argparse: usage errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def schema():  # noqa: ANN201
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "analysis-schema.json").read_text()))


def test_csv_reads_in_pandas_for_every_analysis(capsys: pytest.CaptureFixture[str], schema) -> None:  # noqa: ANN001
    """Acceptance: pandas.read_csv reads `analyze X --format csv` for every registered analysis, as
    is; it is the main table of the JSON document, which follows the published schema. Each
    analysis runs on the first corpus trace that has its data (one rank with memory events and
    module frames; the 8-rank DLRM for the cross-rank ones; a vLLM step for serving); on the others
    it has nothing to report
    (exit 0, one line on stderr), never an error."""
    seen = []
    for name in names():
        extra = EXTRA.get(name, [])
        for trace in TRACES:
            rc, out, err = cli(capsys, "analyze", name, trace, "--format", "csv", *extra)
            assert rc == 0, (name, trace, err)
            if out:
                break
            assert "ranksight: nothing to report: " in err, (name, trace, err)
        else:
            pytest.fail(f"{name}: nothing to report on any of {TRACES}")
        df = pd.read_csv(io.StringIO(out))
        rc, js, err = cli(capsys, "analyze", name, trace, "--format", "json", *extra)
        assert rc == 0, (name, err)
        doc = json.loads(js)
        errors = [e.message for e in schema.iter_errors(doc)]
        assert not errors, (name, errors[:3])
        assert doc["analysis"] == name and doc["schema_version"] == 1
        main_table = next(iter(doc["tables"]))
        assert list(df.columns) == list(doc["columns"][main_table]), name
        assert len(df) == len(doc["tables"][main_table]), name
        seen.append(name)
    assert seen == sorted(REGISTRY) and len(seen) >= 38


def test_csv_is_one_table_and_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli(
        capsys, "analyze", "temporal", DLRM, "--rank", "0", "--rank", "7", "--per-step", "--format", "csv"
    )
    assert rc == 0
    assert out.splitlines() == [
        "rank,kernel_time_us,idle_us,compute_us,non_compute_us,idle_pct,compute_pct,non_compute_pct",
        "0,13009.0,6419.0,1034.0,5556.0,49.34,7.95,42.71",
        "7,10967.0,8308.0,1059.0,1600.0,75.75,9.66,14.59",
    ]
    assert "note: csv holds the table `temporal`; also: per_step, over_steps" in err
    rc, out, _ = cli(
        capsys, "analyze", "temporal", DLRM, "--rank", "0", "--per-step", "--format", "csv", "--table", "per_step"
    )
    assert rc == 0
    df = pd.read_csv(io.StringIO(out))
    assert list(df["step"]) == [10] and df.columns[0] == "rank"
    rc, out, err = cli(capsys, "analyze", "temporal", DLRM, "--format", "csv", "--table", "nope")
    assert rc == 2 and out == ""
    assert err.strip() == "ranksight: error: no table 'nope'; tables: temporal"


def test_output_dir_writes_every_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    rc, out, err = cli(capsys, "analyze", "launches", DLRM, "--rank", "0", "-o", str(out_dir))
    assert rc == 0, err
    rc, js, _ = cli(capsys, "analyze", "launches", DLRM, "--rank", "0", "--format", "json")
    doc = json.loads(js)
    assert sorted(os.listdir(out_dir)) == sorted(f"{t}.csv" for t in doc["tables"])
    for t, rows in doc["tables"].items():
        df = pl.read_csv(out_dir / f"{t}.csv")
        assert df.columns == list(doc["columns"][t]) and df.height == len(rows)
    assert out.startswith(f"wrote {len(doc['tables'])} csv files to {out_dir}: ")
    # existing files are kept without --force, and nothing else is written either
    (out_dir / "summary.csv").write_text("mine")
    (out_dir / "findings.csv").unlink()
    rc, _, err = cli(capsys, "analyze", "launches", DLRM, "--rank", "0", "-o", str(out_dir))
    assert rc == 2 and "summary.csv exists; use --force to overwrite" in err
    assert "findings.csv" not in os.listdir(out_dir) and (out_dir / "summary.csv").read_text() == "mine"
    rc, _, err = cli(capsys, "analyze", "launches", DLRM, "--rank", "0", "-o", str(out_dir), "--force")
    assert rc == 0, err
    assert pl.read_csv(out_dir / "summary.csv").height == 1 and (out_dir / "findings.csv").exists()
    # JSON: one document per table, each with its table
    rc, _, err = cli(capsys, "analyze", "launches", DLRM, "--rank", "0", "-o", str(out_dir), "--format", "json")
    assert rc == 0, err
    one = json.loads((out_dir / "summary.json").read_text())
    assert one["analysis"] == "launches" and list(one["tables"]) == ["summary"]
    assert one["tables"]["summary"] == doc["tables"]["summary"]


def test_nothing_to_report_is_not_bad_input(capsys: pytest.CaptureFixture[str], schema, tmp_path: Path) -> None:  # noqa: ANN001
    """The traces lack what the analysis needs: exit 0, no table, one line on stderr (JSON: a
    document with `missing`); a file that is not there is bad input: exit 2."""
    for fmt in ("table", "csv", "markdown"):
        rc, out, err = cli(capsys, "analyze", "memory", DLRM, "--format", fmt)
        assert (rc, out) == (0, ""), fmt
        assert (
            err
            == "ranksight: nothing to report: no [memory] events in these traces (profile with profile_memory=True)\n"
        )
    rc, out, err = cli(capsys, "analyze", "memory", DLRM, "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and not list(schema.iter_errors(doc))
    assert doc["tables"] == {} and doc["missing"]["kind"] == "no-data"
    rc, out, err = cli(capsys, "analyze", "memory", DLRM, "-o", str(tmp_path / "none"))
    assert rc == 0 and not (tmp_path / "none").exists()
    rc, out, err = cli(capsys, "analyze", "memory", str(tmp_path / "missing.json"), "--format", "csv")
    assert rc == 2 and out == "" and err.startswith("ranksight: error: ")


def test_one_output_spelling_and_hidden_aliases(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rc, out, err = cli(capsys, "export", DLRM, "--rank", "0", "-o", str(tmp_path / "a"))
    assert rc == 0 and out == f"Wrote 1 Parquet files to {tmp_path / 'a'}\n" and err == ""
    rc, out, err = cli(capsys, "export", DLRM, "--rank", "0", "--to", str(tmp_path / "b"))
    assert rc == 0 and os.listdir(tmp_path / "b") == ["rank0.events.parquet"]
    assert err == "ranksight: warning: --to is deprecated; use -o/--output\n"
    rc, out, err = cli(capsys, "counters", DLRM, "--rank", "0", "--out", str(tmp_path / "c"))
    assert rc == 0 and len(os.listdir(tmp_path / "c")) == 1
    assert err == "ranksight: warning: --out is deprecated; use -o/--output\n"
    rc, _, err = cli(capsys, "counters", DLRM, "--rank", "0")
    assert rc == 2 and "one of the arguments -o/--output is required" in err
    # the hidden spellings are not offered in the help
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    help_text = capsys.readouterr().out
    assert "-o DIR, --output DIR" in help_text and "--to" not in help_text


def test_booleans_flag_and_no_flag(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("analyze", "kernel-types", DLRM, "--rank", "0", "--format", "csv")
    _, with_mem, _ = cli(capsys, *args)
    _, without, err_new = cli(capsys, *args, "--no-include-memory")
    _, old, err_old = cli(capsys, *args, "--include-memory", "false")
    _, old_eq, _ = cli(capsys, *args, "--include-memory=no")
    assert "MEMORY" in with_mem and "MEMORY" not in without
    assert old == without == old_eq and "deprecated" not in err_new
    assert err_old.startswith("ranksight: warning: --include-memory false is deprecated; use --no-include-memory\n")
    _, on, _ = cli(capsys, *args, "--include-memory", "true")
    assert on == with_mem
    with pytest.raises(SystemExit):
        main(["analyze", "kernel-types", "--help"])
    assert "--include-memory, --no-include-memory" in capsys.readouterr().out


def test_one_set_of_format_names(capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(DATA / "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    rc, out_table, err = cli(capsys, "diagnose", trace, "--format", "table")
    assert rc == 0 and err == ""
    rc, out_text, err = cli(capsys, "diagnose", trace, "--format", "text")
    assert rc == 0 and out_text == out_table
    assert err == "ranksight: warning: --format text is deprecated; use --format table\n"
    rc, out, _ = cli(capsys, "info", DLRM, "--rank", "0", "--format", "markdown")
    assert rc == 0 and out.startswith("#### files\n\n| rank | file |")
    rc, _, err = cli(capsys, "analyze", "temporal", DLRM, "--format", "xml")
    assert rc == 2 and "invalid choice: 'xml' (choose from 'table', 'markdown', 'csv', 'json')" in err
