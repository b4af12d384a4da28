"""host-device-sync on hand-built traces: ``.item()`` counts only when it reads a GPU value."""

from __future__ import annotations

import ranksight
from ranksight.analyses.diagnose import findings


def _op(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _trace(make_trace, extra):
    ev = [
        _op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        _op("aten::mul", 10, 20),
        _op("cudaLaunchKernel", 12, 5, cat="cuda_runtime", correlation=1),
        {
            "ph": "X",
            "cat": "kernel",
            "name": "mul_kernel",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 50,
            "args": {"correlation": 1, "stream": 7, "device": 0},
        },
        # three .item() on CPU tensors (an optimizer's step counters): no copy, no wait
        _op("aten::item", 100, 5),
        _op("aten::_local_scalar_dense", 101, 3),
        _op("aten::item", 110, 5),
        _op("aten::_local_scalar_dense", 111, 3),
        _op("aten::item", 120, 5),
        # one .item() on a GPU value: copy, then wait for the stream
        _op("aten::item", 200, 100),
        _op("aten::_local_scalar_dense", 201, 98),
        _op("cudaMemcpyAsync", 202, 3, cat="cuda_runtime", correlation=2),
        _op("cudaStreamSynchronize", 206, 90, cat="cuda_runtime", correlation=3),
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy DtoH (Device -> Pinned)",
            "pid": 0,
            "tid": 7,
            "ts": 280,
            "dur": 2,
            "args": {"correlation": 2, "stream": 7, "device": 0, "bytes": 4},
        },
        *extra,
    ]
    return ranksight.load(make_trace(ev))


def test_item_on_a_cpu_tensor_is_not_a_synchronisation(make_trace):
    f = {x.rule: x for x in findings(_trace(make_trace, []))[0]}["host-device-sync"]
    # one synchronisation (the item, with the two calls nested in it), 100 µs of a 1000 µs step
    assert f.summary.startswith("rank 0: 1 synchronisations in 1 steps block the CPU for 10.0% of the step time")
    assert f.evidence["by_name"] == {
        "aten::item": {"count": 1, "us": 100.0},
        "aten::_local_scalar_dense": {"count": 1, "us": 98.0},
        "cudaStreamSynchronize": {"count": 1, "us": 90.0},
    }
    assert f.evidence["blocked_us"] == 100.0 and f.evidence["per_step_count"] == {"1": 1}
    assert f.evidence["dtoh_copies_in_steps"] == 1


def test_a_copy_on_another_thread_does_not_make_an_item_a_synchronisation(make_trace):
    # an item on thread 2 spans a copy call made on thread 1: it still reads a CPU value
    extra = [_op("aten::item", 400, 60, tid=2), _op("cudaMemcpyAsync", 420, 3, cat="cuda_runtime", correlation=4)]
    f = {x.rule: x for x in findings(_trace(make_trace, extra))[0]}["host-device-sync"]
    assert f.evidence["by_name"]["aten::item"]["count"] == 1 and f.evidence["blocked_us"] == 100.0


def test_only_cpu_items_give_no_finding(make_trace):
    ev_run = _trace(make_trace, [])
    assert "host-device-sync" in {x.rule for x in findings(ev_run)[0]}
    quiet = [
        e
        for e in [
            _op("ProfilerStep#1", 0, 1000, cat="user_annotation"),
            _op("aten::mul", 10, 20),
            _op("cudaLaunchKernel", 12, 5, cat="cuda_runtime", correlation=1),
            {
                "ph": "X",
                "cat": "kernel",
                "name": "mul_kernel",
                "pid": 0,
                "tid": 7,
                "ts": 20,
                "dur": 50,
                "args": {"correlation": 1, "stream": 7, "device": 0},
            },
            *[_op("aten::item", 100 + 20 * i, 15) for i in range(20)],  # 300 µs of CPU items: 30 % if they counted
        ]
    ]
    assert "host-device-sync" not in {x.rule for x in findings(ranksight.load(make_trace(quiet)))[0]}
