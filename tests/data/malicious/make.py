"""Write the malicious-names test traces (two ranks): kernel, op, annotation and thread names that
try to break out of HTML (``</script>``, tags, attributes, entities, quotes, JS line separators,
template syntax). Run ``python tests/data/malicious/make.py`` to regenerate; the report must show
every one of these names as text.
"""

from __future__ import annotations

import json
from pathlib import Path

EVIL = [
    "</script><script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=2">',
    "<b>bold</b> & \"double\" 'single' &amp; &lt;",
    "line\u2028sep\u2029para </SCRIPT >",
    "<!-- c --><style>body{display:none}</style>",
    "{{ 7*7 }} ${alert(3)} {% raw %} %s",
    "<svg onload=window.__pwned=4>",
    "javascript:window.__pwned=5",
]


def events(rank: int) -> list[dict]:
    ev: list[dict] = [
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 <i>x</i>"}},
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": EVIL[0]}},
    ]
    corr = 1000
    t = 1000.0
    for step in (1, 2):
        t0 = t
        for i, name in enumerate(EVIL):
            corr += 1
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"aten::{name}",
                    "pid": 10,
                    "tid": 11,
                    "ts": t,
                    "dur": 8.0,
                    "args": {"External id": corr, "Input Dims": [[2, 3]], "Input type": [name]},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 10,
                    "tid": 11,
                    "ts": t + 1,
                    "dur": 3.0,
                    "args": {"correlation": corr, "External id": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 5 + 2 * i,
                    "dur": 5.0 + i + rank,
                    "args": {"correlation": corr, "stream": 7, "device": rank, "grid": [4, 1, 1], "block": [128, 1, 1]},
                }
            )
            t += 12.0
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 10,
                "tid": 11,
                "ts": t0 - 1,
                "dur": t - t0 + 20,
            }
        )
        ev.append({"ph": "X", "cat": "user_annotation", "name": EVIL[1], "pid": 10, "tid": 11, "ts": t0, "dur": 30.0})
        corr += 1
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaMemcpyAsync",
                "pid": 10,
                "tid": 11,
                "ts": t,
                "dur": 4.0,
                "args": {"correlation": corr},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy DtoH (Device -> Pageable)",
                "pid": 0,
                "tid": 7,
                "ts": t + 60,
                "dur": 6.0,
                "args": {
                    "correlation": corr,
                    "stream": 7,
                    "device": rank,
                    "bytes": 4096,
                    "memory bandwidth (GB/s)": 0.68,
                },
            }
        )
        t += 100.0
    return ev


def main() -> None:
    here = Path(__file__).resolve().parent
    for rank in (0, 1):
        doc = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "deviceProperties": [
                {
                    "id": rank,
                    "name": "NVIDIA <b>H100</b> </script>",
                    "totalGlobalMem": 85000000000,
                    "computeMajor": 9,
                    "computeMinor": 0,
                    "numSms": 132,
                }
            ],
            "traceName": EVIL[0],
            "traceEvents": events(rank),
        }
        (here / f"rank{rank}.pt.trace.json").write_text(
            json.dumps(doc, indent=0, ensure_ascii=False) + "\n", encoding="utf-8"
        )


if __name__ == "__main__":
    main()
