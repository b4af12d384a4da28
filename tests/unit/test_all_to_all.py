"""all-to-all: per-pair bytes from split sizes, per-rank totals, imbalance."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.dist_traces import rank_events, write_rank

import ranksight
from ranksight.analyses import run_analysis
from ranksight.data import example_path


def test_pairs_from_splits(tmp_path: Path) -> None:
    spec = {0: ("[10, 30]", "[10, 20]", 40, 30), 1: ("[20, 5]", "[30, 5]", 25, 35)}
    for r, (ins, outs, n_in, n_out) in spec.items():
        c = {
            "start": 100,
            "end": 150,
            "seq": 0,
            "name": "all_to_allv",
            "nelems": n_in,
            "out_nelems": n_out,
            "in_split": ins,
            "out_split": outs,
            "group_size": 2,
            "ranks": "[0, 1]",
            "kernel": "ncclDevKernel_SendRecv",
        }
        write_rank(tmp_path, r, rank_events(colls=[c]), world=2)
    res = run_analysis("all-to-all", ranksight.load(tmp_path))
    pairs = res["pairs"]
    assert list(zip(pairs["src"], pairs["dst"], pairs["bytes"])) == [(0, 0, 40), (0, 1, 120), (1, 0, 80), (1, 1, 20)]
    per = res["per_rank"]
    assert per["send_bytes"].to_list() == [160, 100] and per["recv_bytes"].to_list() == [120, 140]
    imb = res["imbalance"].row(0, named=True)
    assert imb["send_imbalance"] == pytest.approx(160 / 130)
    assert imb["recv_imbalance"] == pytest.approx(140 / 130)
    assert imb["max_send_rank"] == 0 and imb["max_recv_rank"] == 1
    m = res["matrix_bytes"]
    assert m.columns == ["src", "0", "1"] and m.row(0) == (0, 40, 120)


def test_dlrm_uneven_receive() -> None:
    res = run_analysis("all-to-all", ranksight.load(example_path("dlrm")))
    imb = res["imbalance"].filter(res["imbalance"]["instance"] == 3).row(0, named=True)
    # the 4th all-to-all: every rank sends 3392 ints, rank 3 receives 13312 of the 27136
    assert imb["send_imbalance"] == 1.0
    assert imb["recv_imbalance"] == pytest.approx(13312 / (27136 / 8))
    assert imb["max_recv_rank"] == 3
    assert any("split sizes not recorded" in n for n in res.notes)
