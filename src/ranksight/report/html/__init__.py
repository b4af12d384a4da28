"""The offline HTML report: one self-contained file (CSS, JS and data inline, no network).

``write_report(run, path)`` runs every declared section (see :mod:`.sections`) and writes the file;
``build_payload`` / ``render_html`` split the two steps. Layout of the embedded JSON:
``docs/report-schema.json``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ranksight.report.html.build import build_payload
from ranksight.report.html.payload import SCHEMA_NAME, SCHEMA_VERSION
from ranksight.report.html.render import render_html, write_atomic

__all__ = ["build_payload", "render_html", "write_report", "read_payload", "SCHEMA_NAME", "SCHEMA_VERSION"]

_DATA_OPEN = '<script type="application/json" id="rs-data">'


def write_report(
    run: Any, path: str | os.PathLike[str], *, title: str | None = None, inputs: Sequence[str] = (), **options: Any
) -> dict[str, Any]:
    """Build the report of a run or a :class:`~ranksight.analyses.Session` (whose results it
    reuses) and write it to ``path`` atomically; returns the payload. ``options``: ``baseline``,
    ``snapshot`` and ``detail_ranks`` of :func:`build_payload`."""
    doc = build_payload(run, title=title, inputs=inputs, **options)
    write_atomic(render_html(doc), os.fspath(path))
    return doc


def read_payload(html: str) -> dict[str, Any]:
    """The JSON payload embedded in a report's HTML text (decompressed when the page holds it
    compressed: a report of many ranks)."""
    import json

    from ranksight.report.html.ranks import unpack_json

    start = html.index(_DATA_OPEN) + len(_DATA_OPEN)
    end = html.index("</script>", start)
    return unpack_json(json.loads(html[start:end]))
