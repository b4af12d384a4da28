"""Acceptance (issue 10): ``ranksight report`` on Nsight Systems exports shows the temporal
breakdown, kernels, overlap and collectives, and their numbers equal ``nsys stats``-style sums
computed here directly from the SQLite tables (kernel time and count per GPU, NCCL kernel time,
unions of GPU intervals)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.unit.nsys_make import gpid, kernel, make_nsys, nvtx, runtime, sql

from ranksight.report.html import read_payload

H100 = "nsys_ai/tests/fixtures/h100_2gpu_1s.sqlite"
NCCL_LIKE = "(lower(s.value) LIKE '%nccl%')"


# ---- sums straight from SQLite ------------------------------------------------------------------


def _union_ns(iv: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals (sort and sweep)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


def sql_stats(path: Path) -> dict[int, dict[str, float]]:
    """Per CUDA device (one process each in these exports): what nsys stats would sum."""
    out: dict[int, dict[str, float]] = {}
    devices = [d for (d,) in sql(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1")]
    for d in devices:
        k = sql(
            path,
            f"SELECT start, end, {NCCL_LIKE} FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = "
            "k.demangledName "
            "WHERE deviceId = ?",
            d,
        )
        other = []
        for t in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            if sql(path, "SELECT count(*) FROM sqlite_master WHERE name = ?", t)[0][0]:
                other += sql(path, f"SELECT start, end FROM {t} WHERE deviceId = ?", d)
        comp = [(s, e) for s, e, c in k if not c]
        comm = [(s, e) for s, e, c in k if c]
        allw = [(s, e) for s, e, _ in k] + other
        span = max(e for _, e in allw) - min(s for s, _ in allw)
        busy, c_u, m_u = _union_ns(allw), _union_ns(comp), _union_ns(comm)
        out[d] = {
            "kernels": len(k),
            "kernel_sum_us": sum(e - s for s, e, _ in k) / 1e3,
            "nccl_kernels": len(comm),
            "nccl_sum_us": sum(e - s for s, e in comm) / 1e3,
            "kernel_time_us": span / 1e3,
            "idle_us": (span - busy) / 1e3,
            "compute_us": c_u / 1e3,
            "non_compute_us": (busy - c_u) / 1e3,
            "comm_us": m_u / 1e3,
            "overlap_us": (c_u + m_u - _union_ns(comp + comm)) / 1e3,
        }
    return out


# ---- the report's tables -------------------------------------------------------------------------


def section(doc: dict, slug: str) -> dict:
    return next(s for s in doc["sections"] if s["slug"] == slug)


def table(doc: dict, slug: str, block_id: str) -> pl.DataFrame:
    """A table block of the payload back as a DataFrame (strings resolved)."""
    b = next(b for b in section(doc, slug)["blocks"] if b.get("id") == block_id)
    cols = {}
    for c, vals in zip(b["columns"], b["data"]):
        cols[c["name"]] = [None if v is None else doc["strings"][v] for v in vals] if c["kind"] == "str" else vals
    return pl.DataFrame(cols, strict=False)


def report(cli, path: Path, out: Path, *extra: str) -> dict:
    r = cli("report", str(path), "-o", str(out), *extra)
    assert r.returncode == 0, r.stderr
    return read_payload(out.read_text(encoding="utf-8"))


def approx(x: float) -> object:
    return pytest.approx(x, abs=2e-3)  # payload floats carry 4 decimals of µs


def check_gpu_sections(doc: dict, stats: dict[int, dict[str, float]]) -> None:
    for slug in ("temporal", "kernels", "overlap"):
        assert section(doc, slug)["shown"], (slug, section(doc, slug)["reason"])
    temporal = table(doc, "temporal", "temporal-table").sort("rank")
    kernels = table(doc, "kernels", "kernels-table")
    overlap = table(doc, "overlap", "overlap-table").sort("rank")
    for rank, d in enumerate(sorted(stats)):
        s = stats[d]
        t = temporal.row(rank, named=True)
        for col in ("kernel_time_us", "idle_us", "compute_us", "non_compute_us"):
            assert t[col] == approx(s[col]), (rank, col)
        k = kernels.filter((pl.col("rank") == rank) & (pl.col("kernel_type") != "MEMORY"))
        assert k["count"].sum() == s["kernels"]
        assert k["sum_us"].sum() == pytest.approx(s["kernel_sum_us"], abs=1e-2)
        comm = k.filter(pl.col("kernel_type") == "COMMUNICATION")
        assert comm["count"].sum() == s["nccl_kernels"] and comm["sum_us"].sum() == pytest.approx(
            s["nccl_sum_us"], abs=1e-2
        )
        o = overlap.row(rank, named=True)
        assert (o["compute_us"], o["comm_us"], o["overlap_us"]) == (
            approx(s["compute_us"]),
            approx(s["comm_us"]),
            approx(s["overlap_us"]),
        )


def test_report_on_the_h100_export_matches_sql(cli, data, tmp_path: Path) -> None:
    p = data(H100)
    stats = sql_stats(p)
    assert sorted(stats) == [0, 1] and all(s["kernels"] == 1721 for s in stats.values())
    doc = report(cli, p, tmp_path / "h100.html")
    assert doc["ranks"] == [0, 1]
    check_gpu_sections(doc, stats)
    # this capture has no NCCL kernel: the report says so, and so does SQL
    assert all(s["nccl_kernels"] == 0 for s in stats.values())
    coll = section(doc, "collectives")
    assert not coll["shown"] and "no collective found" in coll["reason"]


def two_rank_nccl(path: Path) -> Path:
    """Two processes × one GPU, two ProfilerSteps each: 20 GEMMs of 100 µs on stream 7 and an
    all-reduce of 1 ms on stream 20 starting under the 16th GEMM; rank 1 starts 50 µs later."""
    rt, ker, nv = [], [], []
    for rank, pid in enumerate((300, 301)):
        off = 50_000 * rank
        corr = 0
        for step in range(2):
            base = off + step * 5_000_000
            nv.append(nvtx(base, base + 4_000_000, f"ProfilerStep#{step}", pid=pid, tid=pid))
            for i in range(20):
                corr += 1
                t = base + 100_000 + i * 100_000
                rt.append(runtime(t - 20_000, t - 15_000, corr, "cudaLaunchKernel_v7000", pid=pid, tid=pid))
                ker.append(
                    kernel(
                        t,
                        t + 100_000,
                        corr,
                        "void gemm_kernel<float>(float const*, float*)",
                        pid=pid,
                        device=rank,
                        context=rank + 1,
                    )
                )
            corr += 1
            t = base + 1_600_000
            rt.append(runtime(t - 20_000, t - 15_000, corr, "cudaLaunchKernelExC_v11060", pid=pid, tid=pid))
            ker.append(
                kernel(
                    t,
                    t + 1_000_000,
                    corr,
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                    pid=pid,
                    device=rank,
                    context=rank + 1,
                    stream=20,
                )
            )
    return make_nsys(
        path,
        {
            "CUPTI_ACTIVITY_KIND_RUNTIME": rt,
            "CUPTI_ACTIVITY_KIND_KERNEL": ker,
            "NVTX_EVENTS": nv,
            "PROCESSES": [
                {"globalPid": gpid(300), "pid": 300, "name": "python"},
                {"globalPid": gpid(301), "pid": 301, "name": "python"},
            ],
        },
    )


def test_report_collectives_from_nccl_kernels_match_sql(cli, tmp_path: Path) -> None:
    p = two_rank_nccl(tmp_path / "nccl2.sqlite")
    stats = sql_stats(p)
    assert [s["nccl_kernels"] for s in stats.values()] == [2, 2]
    doc = report(cli, p, tmp_path / "nccl.html")
    check_gpu_sections(doc, stats)
    assert section(doc, "collectives")["shown"]
    coll = table(doc, "collectives", "collectives-collectives")
    for rank, d in enumerate(sorted(stats)):
        mine = coll.filter(pl.col("rank") == rank)
        assert mine.height == stats[d]["nccl_kernels"]
        assert mine["dur_us"].sum() == approx(stats[d]["nccl_sum_us"])
        assert set(mine["coll_type"]) == {"all_reduce"}
    # 500 µs of each all-reduce overlap the last 5 GEMMs: overlap = 2 × 500 µs per rank
    assert all(s["overlap_us"] == 1000.0 for s in stats.values())
    steps = table(
        doc, "step-overview", next(b["id"] for b in section(doc, "step-overview")["blocks"] if b["type"] == "table")
    )
    assert steps.height >= 2


def test_info_and_rank_by_cli(cli, data, tmp_path: Path) -> None:
    r = cli("info", str(data(H100)), "--format", "csv")
    assert r.returncode == 0, r.stderr
    files = r.stdout.split("\n\n")[0]
    assert "nsys pid 111 GPU 0" in files and "nsys pid 112 GPU 1" in files and "nsys session start" in files
    p = two_rank_nccl(tmp_path / "nccl2.sqlite")
    r = cli("analyze", "temporal", str(p), "--rank-by", "device", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n0,") + r.stdout.count("\n1,") == 2


def test_step_range_cli(cli, tmp_path: Path) -> None:
    p = make_nsys(
        tmp_path / "iters.sqlite",
        {
            "NVTX_EVENTS": [nvtx(1000 * i, 1000 * i + 900, f"iteration {i + 10}") for i in range(3)],
            "CUPTI_ACTIVITY_KIND_RUNTIME": [
                runtime(1000 * i + 10, 1000 * i + 20, i + 1, "cudaLaunchKernel_v7000") for i in range(3)
            ],
            "CUPTI_ACTIVITY_KIND_KERNEL": [kernel(1000 * i + 30, 1000 * i + 500, i + 1, "k") for i in range(3)],
        },
    )
    r = cli("analyze", "steps", str(p), "--step-range", "iteration", "--format", "csv")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln[:1].isdigit()]
    assert [ln.split(",")[1] for ln in lines] == ["10", "11", "12"]


def test_counters_refuse_exports(cli, data, tmp_path: Path) -> None:
    r = cli("counters", str(data("nsys_ai/tests/fixtures/mock.sqlite")), "-o", str(tmp_path))
    assert r.returncode == 2 and "not a Kineto JSON trace" in r.stderr and "internal error" not in r.stderr
