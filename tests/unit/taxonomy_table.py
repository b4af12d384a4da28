"""The kernel taxonomy of the corpus, as the table in docs/kernel-taxonomy.md.

``python tests/unit/taxonomy_table.py --write`` regenerates the table between the
``taxonomy-table`` markers of docs/kernel-taxonomy.md from every trace in ../shared/traces (the five
kernels with the most time per trace; names shortened to 90 characters). Review the diff before
committing: each row is a claim about what a kernel is. ``tests/integration/test_taxonomy_corpus.py``
checks that the committed table is what the rules give.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kernel-taxonomy.md"
BEGIN, END = "<!-- taxonomy-table:begin -->", "<!-- taxonomy-table:end -->"
TOP = 5
NOT_TRACES = ("execution_trace/benchmark_simple_add_et.json.gz",)


def corpus_files(traces: Path) -> list[Path]:
    return sorted(
        p
        for p in traces.rglob("*")
        if p.is_file()
        and p.name.endswith((".json", ".json.gz", ".sqlite"))
        and not any(str(p).endswith(n) for n in NOT_TRACES)
        and p.name not in ("execution_details.json", "gpu_metrics_input.json", "gpu_metrics_expected.json")
    )


def kernel_times(path: Path) -> pl.DataFrame:
    """name, dur_ns (summed over ranks) of the kernels of one corpus file."""
    import ranksight

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = ranksight.load(str(path))
        parts = [
            run[r]
            .kind("kernel", columns=["name", "dur_ns"])
            .group_by(pl.col("name").cast(pl.String))
            .agg(pl.col("dur_ns").sum())
            for r in run.ranks
        ]
    if not parts:
        return pl.DataFrame(schema={"name": pl.String, "dur_ns": pl.Int64})
    return pl.concat(parts).group_by("name").agg(pl.col("dur_ns").sum())


def _cell(s: str) -> str:
    s = s if len(s) <= 90 else s[:89] + "…"
    return s.replace("|", "\\|").replace("`", "'")


def table(traces: Path) -> str:
    from ranksight.model.taxonomy import classify

    lines = [
        "| trace | kernel | class | family | precision | Tensor Cores | library |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in corpus_files(traces):
        k = kernel_times(p).drop_nulls("dur_ns").sort(["dur_ns", "name"], descending=[True, False]).head(TOP)
        rel = str(p.relative_to(traces))
        for name, _ in k.iter_rows():
            c = classify(name)
            lines.append(
                f"| {_cell(rel)} | `{_cell(name)}` | {c.kernel_class} | {c.family} | {c.precision} | "
                f"{c.tensor_cores} | {c.library} |"
            )
    return "\n".join(lines) + "\n"


def committed() -> str:
    text = DOC.read_text()
    return text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip("\n") + "\n"


def write(traces: Path) -> None:
    text = DOC.read_text()
    new = text[: text.index(BEGIN) + len(BEGIN)] + "\n" + table(traces) + text[text.index(END) :]
    DOC.write_text(new)


if __name__ == "__main__":
    shared = ROOT.parent / "shared" / "traces"
    if "--write" in sys.argv:
        write(shared)
    else:
        sys.stdout.write(table(shared))
