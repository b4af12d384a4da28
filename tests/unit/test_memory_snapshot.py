"""PyTorch CUDA memory snapshots: the restricted unpickler (malicious pickles run no code), the
tables of a hand-built snapshot with exact values, the simulated-allocator fixtures, and a property
test of the anchored history."""

from __future__ import annotations

import copyreg
import gzip
import importlib.util
import io
import json
import os
import pickle
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranksight.errors import InputTooLargeError, RanksightError, TraceFormatError
from ranksight.io.memory_snapshot import SafeUnpickler, read_snapshot, safe_load
from ranksight.views.memory_snapshot import history_curve, snapshot_tables

SNAPS = Path(__file__).resolve().parents[1] / "data" / "generated" / "memory_snapshots"

# ---- malicious pickles --------------------------------------------------------------------------


class _Reduce:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def _evil_pickles(marker: Path) -> dict[str, bytes]:
    cmd = f"touch {marker}"
    code = f"open({str(marker)!r}, 'w').write('pwned')"
    out = {
        f"os.system protocol {p}": pickle.dumps({"segments": [], "x": _Reduce(os.system, cmd)}, protocol=p)
        for p in range(6)
    }
    out["builtins.exec nested in a block"] = pickle.dumps(
        {"segments": [{"device": 0, "blocks": [{"size": 1, "frames": [_Reduce(exec, code)]}]}]}, protocol=4
    )
    out["eval in device_traces"] = pickle.dumps({"segments": [], "device_traces": [[_Reduce(eval, code)]]}, protocol=2)
    out["hand-written GLOBAL + REDUCE"] = f"cos\nsystem\n(S'{cmd}'\ntR.".encode()
    out["hand-written INST"] = f"(S'{cmd}'\nios\nsystem\n.".encode()
    out["subprocess via STACK_GLOBAL"] = pickle.dumps(
        _Reduce(__import__("subprocess").call, ["touch", str(marker)]), protocol=5
    )
    return out


def test_malicious_pickles_run_no_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for label, payload in _evil_pickles(marker).items():
        for name, data in ((f"{label}.pickle", payload), (f"{label}.pickle.gz", gzip.compress(payload))):
            p = tmp_path / name.replace(" ", "_").replace("/", "_")
            p.write_bytes(data)
            with pytest.raises(TraceFormatError, match="refused to unpickle") as err:
                read_snapshot(p)
            assert isinstance(err.value, RanksightError)
            assert not marker.exists(), f"{label}: code ran"
    # the same payloads do run code with the standard unpickler (the test would catch a regression)
    pickle.loads(_evil_pickles(marker)["hand-written GLOBAL + REDUCE"])
    assert marker.exists()


def test_copyreg_extension_codes_are_refused(tmp_path: Path) -> None:
    """CPython resolves a cached extension code without find_class: the loader refuses them."""
    marker = tmp_path / "ext"
    code = 0x7F00
    copyreg.add_extension("os", "system", code)
    try:
        payload = (
            b"\x80\x02"
            + b"\x83"
            + code.to_bytes(2, "little")
            + pickle.dumps((f"touch {marker}",), protocol=2)[2:-1]
            + b"R."
        )
        with pytest.raises(pickle.UnpicklingError):  # the restricted unpickler alone: find_class refuses (empty cache)
            SafeUnpickler(io.BytesIO(payload)).load()
        pickle.loads(b"\x80\x02\x83" + code.to_bytes(2, "little") + b".")  # fills CPython's extension cache
        p = tmp_path / "ext.pickle"
        p.write_bytes(payload)
        with pytest.raises(TraceFormatError, match="extension code"):
            safe_load(p)
        assert not marker.exists()
    finally:
        copyreg.remove_extension("os", "system", code)


def test_plain_containers_load(tmp_path: Path) -> None:
    obj = {"segments": [], "t": (1, 2.5, None, True), "big": 2**80, "nested": [[{"a": "é", "l": [-1, 0.5]}]]}
    for proto in range(6):
        p = tmp_path / f"plain{proto}.pickle"
        p.write_bytes(pickle.dumps(obj, protocol=proto))
        assert safe_load(p) == obj
    # sets and bytes have opcodes of their own from protocol 4 (older protocols name builtins.set)
    more = {**obj, "s": {1, 2}, "f": frozenset({3}), "b": b"\x00x"}
    p.write_bytes(pickle.dumps(more, protocol=4))
    assert safe_load(p) == more
    p.write_bytes(pickle.dumps(more, protocol=2))
    with pytest.raises(TraceFormatError, match="builtin"):
        safe_load(p)


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        ({"foo": 1}, "no 'segments'"),
        (42, "no 'segments'"),
        ({"segments": [1, 2]}, "not a list of dicts"),
        ({"segments": [{"device": "zero", "blocks": []}]}, "wrong type"),
        ({"segments": [{"device": 0, "blocks": [3]}]}, "wrong type"),
        ({"segments": [], "device_traces": {"0": []}}, "'device_traces' is not a list"),
    ],
)
def test_not_a_snapshot(tmp_path: Path, obj, match) -> None:
    p = tmp_path / "x.pickle"
    p.write_bytes(pickle.dumps(obj))
    with pytest.raises(TraceFormatError, match=match):
        read_snapshot(p)


def test_empty_truncated_and_too_large(tmp_path: Path) -> None:
    p = tmp_path / "e.pickle"
    p.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty"):
        safe_load(p)
    p.write_bytes(pickle.dumps({"segments": []})[:-3])
    with pytest.raises(TraceFormatError, match="not a readable pickle"):
        safe_load(p)
    p.write_bytes(gzip.compress(pickle.dumps({"segments": [], "pad": "x" * 5000})))
    with pytest.raises(InputTooLargeError):
        safe_load(p, max_bytes=1000)


# ---- a hand-built snapshot with exact values -----------------------------------------------------

CPP = {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}
LINEAR = {"filename": "/env/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"}
STEP = {"filename": "/work/train.py", "line": 10, "name": "step"}
INIT = {"filename": "/work/model.py", "line": 5, "name": "__init__"}
A, B = 0x1000000, 0x2000000


def hand_snapshot() -> dict:
    seg_a = {
        "device": 0,
        "address": A,
        "total_size": 2 * 2**20,
        "allocated_size": 512,
        "active_size": 1536,
        "requested_size": 1100,
        "stream": 0,
        "segment_type": "small",
        "segment_pool_id": (0, 0),
        "is_expandable": False,
        "blocks": [
            {
                "address": A,
                "size": 512,
                "requested_size": 100,
                "state": "active_allocated",
                "frames": [CPP, LINEAR, STEP],
            },
            {"address": A + 512, "size": 1024, "requested_size": 1000, "state": "active_awaiting_free", "frames": []},
            {"address": A + 1536, "size": 2 * 2**20 - 1536, "requested_size": 0, "state": "inactive", "frames": []},
        ],
    }
    seg_b = {
        "device": 0,
        "address": B,
        "total_size": 20 * 2**20,
        "allocated_size": 4 * 2**20,
        "active_size": 4 * 2**20,
        "requested_size": 4_000_000,
        "stream": 0,
        "segment_type": "large",
        "blocks": [
            # an older snapshot: frames in the last history entry
            {
                "address": B,
                "size": 4 * 2**20,
                "requested_size": 4_000_000,
                "state": "active_allocated",
                "history": [{"addr": B, "real_size": 4_000_000, "frames": [CPP, INIT]}],
            },
            {"address": B + 4 * 2**20, "size": 16 * 2**20, "requested_size": 0, "state": "inactive", "frames": []},
        ],
    }
    seg_c = {
        "device": 1,
        "address": 0x3000000,
        "total_size": 2 * 2**20,
        "stream": 0,
        "segment_type": "small",
        "blocks": [{"address": 0x3000000, "size": 2 * 2**20, "requested_size": 0, "state": "inactive", "frames": []}],
    }

    def e(t, action, addr, size, frames=()):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": list(frames)}

    trace0 = [
        e(100, "segment_alloc", B, 20 * 2**20),
        e(110, "alloc", B, 4 * 2**20, [CPP, INIT]),
        e(120, "alloc", B + 4 * 2**20, 16 * 2**20, [CPP, LINEAR, STEP]),
        e(130, "free_requested", B + 4 * 2**20, 16 * 2**20),
        e(140, "free_completed", B + 4 * 2**20, 16 * 2**20),
        e(150, "segment_alloc", A, 2 * 2**20),
        e(160, "alloc", A, 512, [CPP, LINEAR, STEP]),
        e(170, "alloc", A + 512, 1024),
        e(180, "free_requested", A + 512, 1024),
        e(190, "snapshot", 0, 0),
    ]
    return {
        "segments": [seg_a, seg_b, seg_c],
        "device_traces": [trace0, []],
        "allocator_settings": {"expandable_segments": False},
    }


LEVELS = [0, 4194304, 20971520, 20971520, 4194304, 4194304, 4194816, 4195840, 4195840, 4195840]
RESERVED = [20971520] * 5 + [23068672] * 5


def write(tmp_path: Path, obj, name: str = "snap.pickle") -> Path:
    p = tmp_path / name
    p.write_bytes(pickle.dumps(obj, protocol=4))
    return p


def test_hand_snapshot_tables_exact(tmp_path: Path) -> None:
    tabs, notes = snapshot_tables(str(write(tmp_path, hand_snapshot())), points=0, top=10)
    d = {r["device"]: r for r in tabs["snapshot_devices"].iter_rows(named=True)}
    d0, d1 = d["cuda:0"], d["cuda:1"]
    assert (d0["segments"], d0["blocks"], d0["reserved_bytes"]) == (2, 5, 23068672)
    assert (d0["allocated_bytes"], d0["requested_bytes"], d0["rounding_bytes"]) == (4194816, 4000100, 194716)
    assert (d0["pending_free_bytes"], d0["cached_free_bytes"], d0["largest_free_block_bytes"]) == (
        1024,
        18872832,
        16777216,
    )
    assert d0["fragmentation"] == pytest.approx(1 - 4194816 / 23068672)
    assert (d0["history_actions"], d0["peak_allocated_bytes"], d0["peak_reserved_bytes"], d0["ooms"]) == (
        10,
        20971520,
        23068672,
        0,
    )
    assert d0["peak_time_ms"] == pytest.approx(0.02)
    assert (
        d1["reserved_bytes"],
        d1["allocated_bytes"],
        d1["fragmentation"],
        d1["peak_allocated_bytes"],
        d1["history_actions"],
    ) == (2097152, 0, 1.0, 0, 0)
    curve = tabs["snapshot_curve"].filter(pl.col("device") == "cuda:0")
    assert curve["allocated_bytes"].to_list() == LEVELS and curve["reserved_bytes"].to_list() == RESERVED
    assert curve["time_ms"].to_list() == pytest.approx([i * 0.01 for i in range(10)])
    blocks = tabs["snapshot_blocks"]
    assert blocks.select("size", "requested_size", "top_frame").rows() == [
        (4194304, 4000000, "__init__ (work/model.py:5)"),
        (512, 100, "step (work/train.py:10)"),
    ]
    assert blocks["stack"][1] == "forward (modules/linear.py:125); step (work/train.py:10)"
    allocs = tabs["snapshot_allocs"]
    assert allocs.select("size", "freed", "lifetime_ms").rows() == [
        (16777216, True, pytest.approx(0.02)),
        (4194304, False, None),
        (1024, False, None),
        (512, False, None),
    ]
    assert allocs["top_frame"].to_list()[:2] == ["step (work/train.py:10)", "__init__ (work/model.py:5)"]
    assert allocs["top_frame"][2] is None  # no frames recorded
    segs = (
        tabs["snapshot_segments"]
        .filter(pl.col("device") == "cuda:0")
        .select("segment_type", "reserved_bytes", "allocated_bytes")
    )
    assert segs.rows() == [("large", 20971520, 4194304), ("small", 2097152, 512)]
    by_frame = tabs["snapshot_by_frame"]
    assert by_frame.select("top_frame", "bytes").rows() == [
        ("__init__ (work/model.py:5)", 4194304),
        ("step (work/train.py:10)", 512),
    ]
    assert "snapshot_oom" not in tabs
    assert any("anchored" in n for n in notes)


def test_ring_buffer_keeps_absolute_levels(tmp_path: Path) -> None:
    """The history lost its first actions: levels after the kept ones are unchanged."""
    snap = hand_snapshot()
    snap["device_traces"][0] = snap["device_traces"][0][3:]
    curve = history_curve(read_snapshot(write(tmp_path, snap)))
    assert curve["allocated_bytes"].to_list() == LEVELS[3:] and curve["reserved_bytes"].to_list() == RESERVED[3:]


def test_bare_segment_list_and_no_history(tmp_path: Path) -> None:
    tabs, notes = snapshot_tables(str(write(tmp_path, hand_snapshot()["segments"])))
    d0 = tabs["snapshot_devices"].row(0, named=True)
    assert (d0["peak_allocated_bytes"], d0["peak_time_ms"], d0["history_actions"]) == (4194816 + 1024, None, 0)
    assert tabs["snapshot_curve"].height == 0 and tabs["snapshot_allocs"].height == 0
    assert any("without history" in n for n in notes)


# ---- the simulated-allocator fixtures ------------------------------------------------------------


@pytest.mark.parametrize("name", ["train_step.pickle", "oom_2gpu.pickle.gz"])
def test_fixtures_match_the_simulation(name: str) -> None:
    expected = json.loads((SNAPS / name.split(".")[0]).with_suffix(".expected").read_text())
    snap = read_snapshot(SNAPS / name)
    curve = history_curve(snap)
    tabs, notes = snapshot_tables(str(SNAPS / name), points=0, top=0)
    dev = {r["device"]: r for r in tabs["snapshot_devices"].iter_rows(named=True)}
    for e in expected:
        c = curve.filter(pl.col("device") == e["device"]).sort("idx")
        assert c["allocated_bytes"].to_list() == e["levels_allocated"]
        assert c["reserved_bytes"].to_list() == e["levels_reserved"]
        d = dev[f"cuda:{e['device']}"]
        assert (d["peak_allocated_bytes"], d["allocated_bytes"], d["reserved_bytes"]) == (
            e["peak_allocated_bytes"],
            e["final_allocated_bytes"],
            e["final_reserved_bytes"],
        )
        assert (d["segments"], d["blocks"], d["largest_free_block_bytes"], d["ooms"]) == (
            e["segments"],
            e["blocks"],
            e["largest_free_block_bytes"],
            e["ooms"],
        )
        allocs = tabs["snapshot_allocs"].filter(pl.col("device") == f"cuda:{e['device']}")
        assert allocs.height == e["allocs"]
    if "oom" in name:
        oom = tabs["snapshot_oom"].row(0, named=True)
        assert (oom["device"], oom["requested_bytes"], oom["device_free_bytes"]) == (
            "cuda:1",
            268435456,
            1536 * 2**20 - 1365245952,
        )
        assert any("out-of-memory" in n for n in notes)


def _simulator():
    spec = importlib.util.spec_from_file_location("snapshot_make", SNAPS / "make.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


SIM = _simulator()


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(st.tuples(st.booleans(), st.integers(1, 24 * 2**20), st.integers(0, 50)), min_size=1, max_size=60),
    kept=st.integers(1, 400),
    empty_at=st.integers(0, 60),
)
def test_anchored_history_equals_the_allocator(ops, kept, empty_at) -> None:
    """For any alloc/free sequence and any ring-buffer size, the anchored levels equal the
    simulated allocator's allocated and reserved bytes after each kept action."""
    a = SIM.Allocator(0, 1 << 40)
    live: list[int] = []
    for i, (is_alloc, size, pick) in enumerate(ops):
        if is_alloc or not live:
            live.append(a.malloc(size, SIM.frames(("t.py", i, "f"))))
        else:
            a.free(live.pop(pick % len(live)))
        if i == empty_at:
            a.empty_cache()
    snap = SIM.snapshot([a], kept)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.pickle"
        p.write_bytes(pickle.dumps(snap, protocol=4))
        curve = history_curve(read_snapshot(p))
    exp = SIM.expected(a, kept)
    assert curve["allocated_bytes"].to_list() == exp["levels_allocated"]
    assert curve["reserved_bytes"].to_list() == exp["levels_reserved"]


# ---- C++ stacks (context="all"): the unwinder's, allocator's and dispatcher's frames are skipped ----


def _f(name: str, filename: str = "??") -> dict:
    return {"name": name, "filename": filename, "line": 0}


UNWIND = [
    _f("torch::unwind::unwind()"),
    _f("torch::CapturedTraceback::gather(bool, bool, bool)"),
    _f("torch::cuda::(anonymous namespace)::gather_with_cpp()", "memory_snapshot.cpp"),
    _f(
        "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(unsigned long, CUstream_st*)",
        "CUDACachingAllocator.cpp",
    ),
]


def test_cpp_only_stacks_name_the_first_frame_that_is_not_bookkeeping(tmp_path: Path) -> None:
    workspace = [
        *UNWIND,
        _f("at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)", ""),
        _f("at::cuda::getCurrentCUDABlasHandle()"),
        _f("__clone"),
    ]
    factory = [
        *UNWIND,
        _f("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*)"),
        _f("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"),
        _f("c10::impl::wrap_kernel_functor_unboxed_<...>::call(...)", "RegisterCUDA_0.cpp"),
        _f("at::_ops::nll_loss_backward::call(at::Tensor const&)"),
        _f("at::meta::structured_nll_loss_backward::meta(at::Tensor const&)"),
        _f("_PyEval_EvalFrameDefault"),
    ]
    only_bookkeeping = list(UNWIND)
    seg = {
        "device": 0,
        "address": A,
        "total_size": 3 << 20,
        "stream": 0,
        "segment_type": "large",
        "blocks": [
            {
                "address": A,
                "size": 1 << 20,
                "requested_size": 1 << 20,
                "state": "active_allocated",
                "frames": workspace,
            },
            {
                "address": A + (1 << 20),
                "size": 1 << 19,
                "requested_size": 1 << 19,
                "state": "active_allocated",
                "frames": factory,
            },
            {
                "address": A + (3 << 19),
                "size": 1 << 18,
                "requested_size": 1 << 18,
                "state": "active_allocated",
                "frames": only_bookkeeping,
            },
            {
                "address": A + (7 << 18),
                "size": (3 << 20) - (7 << 18),
                "requested_size": 0,
                "state": "inactive",
                "frames": [],
            },
        ],
    }
    tabs, _ = snapshot_tables(str(write(tmp_path, {"segments": [seg]})), top=10)
    b = tabs["snapshot_blocks"]
    assert b["top_frame"].to_list() == [
        "at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream) (:0)",
        "at::meta::structured_nll_loss_backward::meta(at::Tensor const&) (??:0)",
        "torch::unwind::unwind() (??:0)",  # nothing but bookkeeping: the innermost frame
    ]
    assert b["stack"][0] == (
        "at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream) (:0); "
        "at::cuda::getCurrentCUDABlasHandle() (??:0); __clone (??:0)"
    )
    assert b["stack"][1] == "at::meta::structured_nll_loss_backward::meta(at::Tensor const&) (??:0)"


def test_real_h100_snapshot() -> None:
    """A snapshot PyTorch 2.11 wrote on an H100 (tests/data/generated/h100/memory-snapshot; C++ and
    Python frames): totals equal the pickle's own sums, no top frame is bookkeeping."""
    path = (
        Path(__file__).resolve().parents[1]
        / "data"
        / "generated"
        / "h100"
        / "memory-snapshot"
        / "train_2steps.pickle.gz"
    )
    with gzip.open(path) as f:
        raw = pickle.load(f)  # noqa: S301 - our own fixture; ranksight itself reads it with SafeUnpickler
    segs = raw["segments"]
    blocks = [b for s in segs for b in s["blocks"]]
    tabs, _ = snapshot_tables(str(path), top=0)
    d = tabs["snapshot_devices"].row(0, named=True)
    assert d["device"] == "cuda:0" and d["segments"] == len(segs) and d["blocks"] == len(blocks)
    assert d["reserved_bytes"] == sum(s["total_size"] for s in segs)
    assert d["allocated_bytes"] == sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    assert d["requested_bytes"] == sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    assert d["history_actions"] == len(raw["device_traces"][0])
    assert tabs["snapshot_blocks"].height == sum(b["state"] == "active_allocated" for b in blocks)
    tops = tabs["snapshot_blocks"]["top_frame"]
    assert tops.null_count() == 0
    assert not tops.str.contains("unwind|CapturedTraceback|CUDACachingAllocator").any()
    assert tops.str.contains(r"^_train_step \(h100/make\.py:\d+\)$").any()  # Python frames name the user's code
    assert (
        tops.str.starts_with("at::cuda::setWorkspaceForHandle").sum() == 1
    )  # the cuBLAS workspace (autograd thread: no Python)
    allocs = tabs["snapshot_allocs"]["top_frame"].drop_nulls()
    assert not allocs.str.contains("unwind|CUDACachingAllocator|empty_generic|empty_strided").any()
