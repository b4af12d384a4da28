"""Render benchmarks/out/results.json as the Markdown tables of benchmarks/README.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _v(d: dict, k: str, fmt: str = "{}") -> str:
    if not isinstance(d, dict):
        return ""
    if "failed" in d and k not in d:
        return f"failed: {d['failed']}"
    v = d.get(k)
    return "" if v is None else fmt.format(v)


def render(res: dict) -> str:
    out = []
    out.append("### Load (file → columns → derived model), single process\n")
    out.append(
        "| set | JSON MB | events | ranksight load s | MB/s | events/s | peak RSS MB | core bytes/event | gzip input: "
        "load s (JSON MB/s) | HTA load s | HTA MB/s | HTA peak RSS MB | load speed-up |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in res["sets"].items():
        rl, h, g = r.get("ranksight_load", {}), r.get("hta", {}), r.get("ranksight_load_gzip", {})
        gz = f"{_v(g, 'load_s')} ({_v(g, 'json_mb_per_s')})" if g else ""
        out.append(
            f"| {name} | {r['json_mb']} | {_v(rl, 'events', '{:,}')} | {_v(rl, 'load_s')} | {_v(rl, 'mb_per_s')} | "
            f"{_v(rl, 'events_per_s', '{:,}')} | {_v(rl, 'peak_rss_mb')} | {_v(rl, 'core_bytes_per_event')} | {gz} | "
            f"{_v(h, 'load_s') if h else 'not run'} | {_v(h, 'mb_per_s')} | {_v(h, 'peak_rss_mb')} | "
            f"{_v(r, 'load_speedup_x', '{}×')} |"
        )
    out.append("\n### Load plus every HTA-equivalent analysis, cached re-run, report\n")
    out.append(
        "| set | ranksight load + analyses s | peak RSS MB | cached re-run: load s (total s) | first load ÷ cached "
        "load | HTA load + analyses s | HTA peak RSS MB | speed-up | report s (first, no cache) | report s (cached) | "
        "report peak RSS MB |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in res["sets"].items():
        if "ranksight_analyses" not in r:
            continue
        a, c, h = r.get("ranksight_analyses", {}), r.get("ranksight_cached_rerun", {}), r.get("hta", {})
        rf, rc = r.get("ranksight_report_first", {}), r.get("ranksight_report_cached_rerun", {})
        tot = round(a["load_s"] + a["analyses_s"], 2) if "load_s" in a else _v(a, "x")
        htot = round(h["load_s"] + h["analyses_s"], 2) if "analyses_s" in h else _v(h, "x")
        # the first (no-cache) load of the run that measured the cached re-run (a later --only-load
        # re-measures the load row alone)
        first = r.get("cache_run_first_load_s") or r.get("ranksight_load", {}).get("load_s")
        ratio = f"{first / c['load_s']:.1f}×" if first and c.get("load_s") else ""
        out.append(
            f"| {name} | {tot} | {_v(a, 'peak_rss_mb')} | {_v(c, 'load_s')} ({_v(c, 'wall_s')}) | {ratio} | {htot} | "
            f"{_v(h, 'peak_rss_mb')} | "
            f"{r.get('load_plus_analyses_speedup_x', '')}× | {_v(rf, 'report_s')} | {_v(rc, 'report_s')} | "
            f"{_v(rc, 'peak_rss_mb')} |"
        )
    cc = [(n, r["cache_checksum"]) for n, r in res["sets"].items() if "cache_checksum" in r]
    if cc:
        out.append("\n### Cache checksums: what verifying an entry costs\n")
        out.append(
            "| set | decode s (no cache) | first load with cache s (written, hashed, fsync'ed) | re-open s, verified "
            "(of which hashing s, MB hashed) | re-open s, not verified | decode ÷ verified re-open | side tables + "
            "spans read back s (of which hashing s, MB) |"
        )
        out.append("|---|---|---|---|---|---|---|")
        for name, c in cc:
            rv, ru, fc = c.get("reopen_verified", {}), c.get("reopen_unverified", {}), c.get("first_cached", {})
            out.append(
                f"| {name} | {_v(c.get('decode', {}), 'load_s')} | {_v(fc, 'load_s')} | {_v(rv, 'load_s')} "
                f"({_v(rv, 'verify_s')}, {_v(rv, 'verified_mb')}) | {_v(ru, 'load_s')} | "
                f"{_v(c, 'decode_over_reopen_x', '{}×')} | {_v(rv, 'tables_s')} ({_v(rv, 'tables_verify_s')}, "
                f"{_v(rv, 'tables_verified_mb')}) |"
            )
    ev = [(n, r) for n, r in res["sets"].items() if "ranksight_every" in r]
    if ev:
        out.append("\n### Memory: load plus every registered analysis, one process\n")
        out.append(
            "| set | JSON MB | mode | load s | peak RSS after load MB | analyses s | peak RSS MB (whole run) | slowest "
            "analysis |"
        )
        out.append("|---|---|---|---|---|---|---|---|")
        for name, r in ev:
            for mode, key in (
                ("no cache", "ranksight_every"),
                ("no cache, RANKSIGHT_LOW_MEMORY=1", "ranksight_every_low_memory"),
                ("cache on, first run", "ranksight_every_cache"),
            ):
                e = r.get(key)
                if e is None:
                    continue
                per = {k: v for k, v in (e.get("per_analysis_s") or {}).items() if isinstance(v, (int, float))}
                slow = max(per, key=per.get) if per else ""
                out.append(
                    f"| {name} | {r['json_mb']} | {mode} | {_v(e, 'load_s')} | {_v(e, 'load_peak_rss_mb')} | "
                    f"{_v(e, 'analyses_s')} | "
                    f"{_v(e, 'peak_rss_mb')} | {slow} {per.get(slow, '')} |"
                )
    out.append("\n### Each HTA-equivalent analysis after loading (s)\n")
    names = []
    for r in res["sets"].values():
        for n in r.get("ranksight_analyses", {}).get("per_analysis_s") or {}:
            if n not in names:
                names.append(n)
    out.append("| set | " + " | ".join(names) + " |")
    out.append("|---|" + "---|" * len(names))
    for name, r in res["sets"].items():
        if "ranksight_analyses" not in r:
            continue
        per = r.get("ranksight_analyses", {}).get("per_analysis_s") or {}
        hper = r.get("hta", {}).get("per_analysis_s") or {}
        cells = []
        for n in names:
            c = f"{per.get(n, '')}"
            if n in hper:
                c += f" (HTA {hper[n]})"
            cells.append(c)
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    if "fuzz" in res:  # run.py --fuzz SECONDS
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fuzz import render as fuzz_render

        out.append("\n### Decoder fuzzing: cargo-fuzz targets, fixed time\n")
        out.append(fuzz_render(res["fuzz"]))
    return "\n".join(out)


if __name__ == "__main__":
    p = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "out" / "results.json")
    print(render(json.loads(p.read_text())))
