"""A hand-built run of many ranks where one rank is slow by known amounts (times in µs).

Every rank runs ``steps`` ProfilerSteps; in each, a compute kernel (``gemm``, 300 µs plus a small
per-rank jitter of ``rank % 5`` µs) and then an all-reduce over all ranks that ends 100 µs after the
last rank started it. Rank ``slow`` runs its ``gemm`` longer by ``extra_us[k]`` in step ``k``, so it
arrives last at every all-reduce and each other rank ``r`` waits ``extra + jitter(slow) - jitter(r)``
µs for it: :func:`wait_caused_us` is the exact wait it causes.
"""

from __future__ import annotations

from pathlib import Path

from tests.unit.dist_traces import rank_events, write_rank

STEP_US = 2000.0
GEMM_US = 300.0


def jitter_us(rank: int) -> float:
    return float(rank % 5)


def gemm_end_us(rank: int, step: int, slow: int, extra_us: tuple[float, ...]) -> float:
    start = STEP_US * (step + 1) + 100
    return start + GEMM_US + jitter_us(rank) + (extra_us[step] if rank == slow else 0.0)


def write_run(
    dirpath: Path, *, n_ranks: int = 40, slow: int = 13, extra_us: tuple[float, ...] = (300.0, 500.0, 200.0)
) -> Path:
    """Write ``n_ranks`` rank files into ``dirpath`` (one step per entry of ``extra_us``)."""
    dirpath.mkdir(parents=True, exist_ok=True)
    group = str(list(range(n_ranks)))
    for r in range(n_ranks):
        kernels, colls, steps = [], [], []
        for k in range(len(extra_us)):
            s = STEP_US * (k + 1)
            steps.append((k + 1, s, s + STEP_US - 10))
            end = gemm_end_us(r, k, slow, extra_us)
            last = max(gemm_end_us(q, k, slow, extra_us) for q in range(n_ranks)) + 10
            kernels.append({"name": "gemm", "start": s + 100, "end": end, "launch": s + 50})
            colls.append(
                {
                    "start": end + 10,
                    "end": last + 100,
                    "launch": s + 60,
                    "seq": k,
                    "group_size": n_ranks,
                    "ranks": group,
                }
            )
        write_rank(dirpath, r, rank_events(colls=colls, kernels=kernels, steps=steps), world=n_ranks)
    return dirpath


def wait_caused_us(*, n_ranks: int = 40, slow: int = 13, extra_us: tuple[float, ...] = (300.0, 500.0, 200.0)) -> float:
    """The wait rank ``slow`` causes the others: per step, the sum over the other ranks of how much
    later it starts the all-reduce than they do."""
    return sum(
        gemm_end_us(slow, k, slow, extra_us) - gemm_end_us(r, k, slow, extra_us)
        for k in range(len(extra_us))
        for r in range(n_ranks)
        if r != slow
    )
