"""Per-trace metadata: devices, distributed info, process groups, time base."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TraceMeta", "ProcessGroup", "build_meta", "gpu_vendor_of", "used_device_properties"]


@dataclass(frozen=True)
class ProcessGroup:
    """One entry of ``distributedInfo.pg_config``."""

    name: str
    desc: str
    backend: str
    size: int | None
    ranks: tuple[int, ...]


@dataclass
class TraceMeta:
    """What a trace says about itself (top-level keys), plus what the loader decided."""

    path: str
    rank: int
    rank_source: str
    schema_version: int | None
    device_properties: list[dict[str, Any]]
    distributed_info: dict[str, Any]
    world_size: int | None
    backend: str | None
    process_groups: list[ProcessGroup]
    base_time_ns: int | None
    display_time_unit: str | None
    trace_name: str | None
    host_name: str | None
    gpu_vendor: str | None
    gpu_model: str | None
    devices_used: list[int]
    #: every top-level key except ``traceEvents``, parsed
    raw: dict[str, Any] = field(default_factory=dict)
    #: synthetic ids given to string pids/tids (e.g. ``"Spans"``) → the original string
    id_names: dict[int, str] = field(default_factory=dict)
    json_bytes: int = 0
    file_bytes: int = 0
    gzip: bool = False

    def device(self, device_id: int) -> dict[str, Any] | None:
        """The ``deviceProperties`` entry of a device id."""
        for d in self.device_properties:
            if d.get("id") == device_id:
                return d
        return None

    def used_devices(self) -> dict[int, dict[str, Any]]:
        """``{device id: deviceProperties entry}`` of the devices used (:func:`used_device_properties`)."""
        return used_device_properties(self.device_properties, self.devices_used)


#: ``deviceProperties`` keys that describe a GPU model rather than one device.
_MODEL_KEYS = ("name", "computeMajor", "computeMinor", "numSms", "totalGlobalMem")


def used_device_properties(props: list[dict[str, Any]], devices_used: list[int]) -> dict[int, dict[str, Any]]:
    """The ``deviceProperties`` entry of each device the rank's GPU work ran on: the one
    definition of the rank's GPU (``gpu_model``, ``info``'s ``gpu``, ``mfu``'s peak).

    A device takes the entry with its ``id``; a device with no such entry takes the first entry
    when every entry listed is the same GPU model (a process lists the devices it sees from 0
    while its GPU events may carry another number: ROCm traces with events on device 2 and one
    entry, id 0); otherwise it has none (unknown)."""
    # (ids and model keys as the trace wrote them: a hostile one may be a list, not hashable)
    by_id = {i: p for p in props if isinstance(i := p.get("id"), int)}
    same_model = len({repr(tuple(p.get(k) for k in _MODEL_KEYS)) for p in props}) == 1
    out: dict[int, dict[str, Any]] = {}
    for d in devices_used:
        p = by_id.get(d, props[0] if same_model else None)
        if p is not None:
            out[d] = p
    return out


def gpu_vendor_of(raw: dict[str, Any], names: list[str], runtime_names: set[str]) -> str | None:
    """NVIDIA, AMD, MTIA or None (CPU-only / unknown)."""
    info = raw.get("distributedInfo") or {}
    backend = str(info.get("backend", "")) if isinstance(info, dict) else ""
    if "mtia" in backend or "runFunction - job_prep_and_submit_for_execution" in runtime_names:
        return "MTIA"
    if any(k in raw for k in ("roctracer_version", "hip_runtime_version", "hip_driver_version")):
        return "AMD"
    if any(n.startswith("hip") for n in runtime_names):
        return "AMD"
    joined = " ".join(names).lower()
    if "amd" in joined or "instinct" in joined or "radeon" in joined:
        return "AMD"
    if any(k in raw for k in ("cupti_version", "cuda_runtime_version", "cuda_driver_version")):
        return "NVIDIA"
    if any(n.startswith(("cuda", "cu")) for n in runtime_names):
        return "NVIDIA"
    if any(w in joined for w in ("nvidia", "tesla", "geforce", "quadro", "rtx")):
        return "NVIDIA"
    return None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def build_meta(
    *,
    path: str,
    rank: int,
    rank_source: str,
    raw: dict[str, Any],
    id_names: dict[int, str],
    devices_used: list[int],
    runtime_names: set[str],
    stats: dict[str, int],
) -> TraceMeta:
    listed = raw.get("deviceProperties")
    if not isinstance(listed, list):
        listed = raw.get("computeProperties")
    props = [p for p in listed if isinstance(p, dict)] if isinstance(listed, list) else []
    info = raw.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    groups = []
    for pg in info.get("pg_config") or []:
        if not isinstance(pg, dict):
            continue
        ranks = pg.get("ranks") or []
        groups.append(
            ProcessGroup(
                name=str(pg.get("pg_name", "")),
                desc=str(pg.get("pg_desc", "")),
                backend=str(pg.get("backend_config", "")),
                size=_int(pg.get("pg_size")),
                ranks=tuple(int(r) for r in ranks if _int(r) is not None),
            )
        )
    used_props = list(used_device_properties(props, devices_used).values()) if devices_used else props[:1]
    names = [str(p.get("name", "")) for p in used_props if p.get("name")]
    model = names[0] if names else None
    base = stats.get("base_time_ns") if stats.get("has_base_time") else None
    return TraceMeta(
        path=path,
        rank=rank,
        rank_source=rank_source,
        schema_version=_int(raw.get("schemaVersion")),
        device_properties=props,
        distributed_info=info,
        world_size=_int(info.get("world_size")),
        backend=str(info["backend"]) if "backend" in info else None,
        process_groups=groups,
        base_time_ns=base,
        display_time_unit=raw.get("displayTimeUnit") if isinstance(raw.get("displayTimeUnit"), str) else None,
        trace_name=raw.get("traceName") if isinstance(raw.get("traceName"), str) else None,
        host_name=raw.get("host_name") if isinstance(raw.get("host_name"), str) else None,
        gpu_vendor=gpu_vendor_of(raw, names, runtime_names) if (devices_used or runtime_names) else None,
        gpu_model=model,
        devices_used=devices_used,
        raw=raw,
        id_names=id_names,
        json_bytes=int(stats.get("json_bytes", 0)),
        file_bytes=int(stats.get("file_bytes", 0)),
        gzip=bool(stats.get("gzip", 0)),
    )
