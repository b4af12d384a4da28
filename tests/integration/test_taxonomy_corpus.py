"""The kernel taxonomy on the whole corpus (../shared/traces; skipped loudly when absent).

- the table in docs/kernel-taxonomy.md is what the rules give (regenerate with
  ``python tests/unit/taxonomy_table.py --write`` and review);
- every kernel of every NCCL/RCCL collective is communication by its name alone (not only through
  the collective arguments on its launch);
- every stored ``kernel_class`` is the taxonomy's, except kernels carrying collective arguments
  (communication whatever their name).
"""

from __future__ import annotations

import warnings

import polars as pl
import pytest
from tests.unit import taxonomy_table

import ranksight
from ranksight.model.taxonomy import classify


@pytest.mark.shared
def test_the_documented_table_is_what_the_rules_give(shared_traces):
    assert taxonomy_table.committed() == taxonomy_table.table(shared_traces), (
        "docs/kernel-taxonomy.md is stale: run `python tests/unit/taxonomy_table.py --write` and review the diff"
    )


@pytest.mark.shared
def test_collective_kernels_are_communication_and_classes_are_the_taxonomy(shared_traces):
    checked_collectives = 0
    for path in taxonomy_table.corpus_files(shared_traces):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = ranksight.load(str(path))
        for r in run.ranks:
            t = run[r]
            k = t.kind("kernel", columns=["row", "name", "kernel_class"])
            if k.height == 0:
                continue
            with_args = t.with_args(k, "collective").filter(pl.col("collective_name").is_not_null())
            for name in with_args["name"].cast(pl.String).unique().to_list():
                assert classify(name).kernel_class == "COMMUNICATION", (str(path), name)
                checked_collectives += 1
            names = k["name"].cast(pl.String)
            for name in names.filter(names.str.contains("(?i)^(nccl|rccl)")).unique().to_list():
                assert classify(name).kernel_class == "COMMUNICATION", (str(path), name)
            plain = k.join(with_args.select("row"), on="row", how="anti")
            pairs = plain.select(pl.col("name").cast(pl.String), pl.col("kernel_class").cast(pl.String)).unique()
            for name, stored in pairs.iter_rows():
                assert stored == classify(name).kernel_class, (str(path), name, stored)
    assert checked_collectives > 0  # the corpus has NCCL kernels with collective args
