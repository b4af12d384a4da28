"""The "CUDA memory snapshot" section: ``ranksight report TRACES --snapshot FILE``.

The snapshot (a pickled ``torch.cuda.memory._snapshot()``) is a parameter of the report
(``build_payload(..., snapshot=FILE)``, :attr:`Ctx.snapshot`). The
blocks come from the ``memory`` analysis' ``snapshot_*`` tables (``ranksight analyze memory
--snapshot FILE``): key facts per device, allocated and reserved over the recorded history, the
segments by pool, the largest allocations with their stack frames, and out-of-memory events.
"""

from __future__ import annotations

from typing import Any

from ranksight.report.html.sections import Ctx, Skip, section

__all__: list[str] = []

_B = {
    c: "B"
    for c in (
        "reserved_bytes",
        "allocated_bytes",
        "requested_bytes",
        "rounding_bytes",
        "pending_free_bytes",
        "cached_free_bytes",
        "largest_free_block_bytes",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "size",
        "requested_size",
        "bytes",
        "largest_bytes",
        "largest_segment_bytes",
        "device_free_bytes",
    )
}


def _tables(ctx: Ctx, path: str) -> Any:
    from ranksight.views.memory_snapshot import snapshot_tables

    return ctx.call(("memory-snapshot", path), lambda: snapshot_tables(path, points=400, top=50), "memory --snapshot")


@section(
    "memory-snapshot",
    "CUDA memory snapshot",
    group="Memory",
    order=20,
    help="What filled GPU memory, from a PyTorch CUDA memory snapshot (ranksight report TRACES --snapshot FILE): "
    "reserved "
    "and allocated bytes, fragmentation, allocated/reserved over the recorded history, and the largest allocations "
    "with the Python frames that made them.",
)
def memory_snapshot(ctx: Ctx) -> list[dict[str, Any]]:
    path = ctx.snapshot
    if path is None:
        raise Skip("no memory snapshot given: `ranksight report TRACES --snapshot FILE` adds this section")
    tabs, notes = _tables(ctx, path)
    for n in notes:
        if n not in ctx.notes:
            ctx.notes.append(n)
    dev = tabs["snapshot_devices"]
    blocks: list[dict[str, Any]] = []
    for row in dev.iter_rows(named=True):
        frag = row["fragmentation"]
        blocks.append(
            ctx.kv(
                [
                    ("device", row["device"]),
                    ("reserved (MiB)", row["reserved_bytes"] / 2**20),
                    ("allocated (MiB)", row["allocated_bytes"] / 2**20),
                    ("peak allocated (MiB)", row["peak_allocated_bytes"] / 2**20),
                    ("fragmentation", f"{100 * frag:.1f} %" if frag is not None else "n/a"),
                    ("largest free block (MiB)", row["largest_free_block_bytes"] / 2**20),
                    ("segments", row["segments"]),
                    ("out-of-memory events", row["ooms"]),
                ],
                id=f"memsnap-facts-{row['device'].replace(':', '')}",
                title=f"{row['device']} at the snapshot",
            )
        )
    c = tabs["snapshot_curve"]
    if c.height and c["time_ms"].null_count() < c.height:
        lines = []
        for (d,), g in sorted(c.group_by(["device"]), key=lambda kv: str(kv[0][0]))[:8]:
            g = g.sort("idx")
            x = g["time_ms"].to_list()
            lines.append((f"{d} allocated", x, (g["allocated_bytes"] / 2**20).to_list()))
            lines.append((f"{d} reserved", x, (g["reserved_bytes"] / 2**20).to_list()))
        blocks.append(
            ctx.line(
                lines,
                id="memsnap-chart",
                title="Allocated and reserved over the recorded history",
                mode="step",
                x_label="time",
                x_unit="ms",
                y_label="memory",
                y_unit="MiB",
            )
        )
    blocks.append(ctx.table(dev, id="memsnap-devices", title="Per device", units=_B))
    for name, title in (
        ("snapshot_oom", "Out-of-memory events"),
        ("snapshot_blocks", "Largest live allocations (at the snapshot)"),
        ("snapshot_allocs", "Largest allocations in the history"),
        ("snapshot_by_frame", "Live bytes by top frame"),
        ("snapshot_segments", "Segments by pool and stream"),
    ):
        if name in tabs and tabs[name].height:
            blocks.append(ctx.table(tabs[name], id=f"memsnap-{name.removeprefix('snapshot_')}", title=title, units=_B))
    return blocks
