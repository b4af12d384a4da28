"""Per-rank work on the process pool and on Dask runs in batches of ranks (issue 19): contiguous,
in order, about four per worker, bounded in bytes and in ranks; a file larger than the bound is a
batch of its own."""

from __future__ import annotations

from pathlib import Path

from ranksight.model import engine
from ranksight.model.engine import TraceSource, batches


def _sources(tmp_path: Path, sizes: list[int]) -> list[TraceSource]:
    out = []
    for r, n in enumerate(sizes):
        p = tmp_path / f"rank{r}.json"
        p.write_bytes(b" " * n)
        out.append(TraceSource(str(p), r, "name"))
    return out


def test_batches_are_contiguous_balanced_and_bounded(tmp_path, monkeypatch):
    src = _sources(tmp_path, [1000] * 64)
    bs = batches(src, 2)
    assert [s.rank for b in bs for s in b] == list(range(64))  # every rank once, in order
    assert [len(b) for b in bs] == [8] * 8  # four per worker
    monkeypatch.setattr(engine, "BATCH_RANKS", 5)
    assert max(len(b) for b in batches(src, 1)) == 5
    monkeypatch.setattr(engine, "BATCH_RANKS", 256)
    monkeypatch.setattr(engine, "BATCH_BYTES", 2500)
    bs = batches(src, 1)
    assert [len(b) for b in bs] == [2] * 32


def test_a_file_over_the_bound_is_a_batch_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "BATCH_BYTES", 2500)
    src = _sources(tmp_path, [1000, 9000, 1000, 1000, 1000])
    assert [[s.rank for s in b] for b in batches(src, 1)] == [[0], [1], [2, 3], [4]]
    assert batches([], 4) == []
