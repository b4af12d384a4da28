"""Per-rank work on a real Dask cluster (scheduler + 2 workers on 127.0.0.1) equals the local run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import run_cli

distributed = pytest.importorskip("distributed", reason="SKIPPED LOUDLY: Dask is not installed (pip install '.[dask]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 60) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"port {port} never opened")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("dask")
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [
        subprocess.Popen(
            [*dask, "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=open(log / "scheduler.log", "w"),
            stderr=subprocess.STDOUT,
            env=env,
        )
    ]
    try:
        _wait_port(port)
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        addr,
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                        "--local-directory",
                        str(log / f"w{i}"),
                    ],
                    stdout=open(log / f"worker{i}.log", "w"),
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        client = distributed.Client(addr, timeout=60)
        client.wait_for_workers(2, timeout=120)
        client.close()
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture
def eight_ranks(tmp_path: Path) -> Path:
    from ranksight.data import example_path

    d = tmp_path / "dlrm"
    shutil.copytree(example_path("dlrm"), d)
    return d


def test_map_on_dask_equals_local(cluster, eight_ranks, tmp_path):
    import ranksight
    from ranksight.analyses.summary import gpu_counts

    client = distributed.Client(cluster)
    try:
        remote = ranksight.load(eight_ranks, client=client, cache=tmp_path / "cache")
        assert remote.engine.name == "dask"
        got = remote.map(gpu_counts)
        # the work really ran on the workers
        assert set(client.has_what()) and len(client.scheduler_info()["workers"]) == 2
    finally:
        client.close()
    local = ranksight.load(eight_ranks, cache=False)
    assert got == local.map(gpu_counts)
    assert sorted(got) == list(range(8))


def test_cli_through_scheduler_equals_local(cluster, eight_ranks, tmp_path):
    args = ["summary", str(eight_ranks), "--format", "json", "--cache-dir", str(tmp_path / "c")]
    remote = run_cli(*args, "--scheduler", cluster)
    local = run_cli(*args, "--no-cache")
    assert remote.returncode == 0, remote.stderr
    assert local.returncode == 0, local.stderr
    assert json.loads(remote.stdout)["tables"] == json.loads(local.stdout)["tables"]


@pytest.fixture(scope="module")
def many_ranks(tmp_path_factory) -> Path:
    """256 rank files: the 8 DLRM ranks, each copied 32 times with its rank rewritten."""
    import gzip

    from ranksight.data import example_path

    d = tmp_path_factory.mktemp("ranks256")
    protos = sorted(example_path("dlrm").glob("*.json.gz"))
    texts = [gzip.decompress(p.read_bytes()).decode() for p in protos]
    for r in range(256):
        k = r % 8
        text = texts[k].replace(f'"rank": {k},', f'"rank": {r},', 1).replace('"world_size": 8', '"world_size": 256', 1)
        assert f'"rank": {r},' in text
        (d / f"rank{r}.json.gz").write_bytes(gzip.compress(text.encode(), compresslevel=1))
    return d


def test_256_ranks_on_dask_run_in_batches_and_equal_local(cluster, many_ranks):
    """Issue 19: a Dask task holds a batch of ranks (never one small file), and every result equals
    the local run's."""
    import ranksight
    from ranksight.analyses.summary import gpu_counts

    client = distributed.Client(cluster)
    try:
        remote = ranksight.load(many_ranks, client=client, cache=False)
        assert remote.engine.name == "dask" and len(remote) == 256
        with distributed.get_task_stream(client) as ts:
            got = remote.map(gpu_counts)
            temporal = ranksight.analyze(remote, "temporal")
        tasks = [t for t in ts.data if "apply_batch" in t["key"]]
        # 2 workers: about four batches per worker and analysis, never a task per rank
        assert 2 <= len(tasks) <= 2 * 16, len(tasks)
    finally:
        client.close()
    local = ranksight.load(many_ranks, cache=False)
    assert got == local.map(gpu_counts)
    assert sorted(got) == list(range(256))
    mine = ranksight.analyze(local, "temporal")
    assert list(temporal.tables) == list(mine.tables)
    for name in mine.tables:
        assert temporal[name].equals(mine[name]), name
