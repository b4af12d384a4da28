"""Render the payload into one self-contained HTML file (jinja2 templates, inline assets).

The page carries a Content-Security-Policy that allows no network access at all
(``default-src 'none'``) and runs only the report's own script (pinned by its SHA-256), so even a
name that slipped past escaping could neither run script nor fetch anything.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache, lru_cache
from importlib.resources import files
from typing import Any

from ranksight.io.output import atomic_path
from ranksight.report.html import ranks as rkmod
from ranksight.report.html.payload import script_json

__all__ = ["render_html", "write_atomic", "ASSETS", "csp_for"]

#: JavaScript assets in load order (readable sources in ``assets/``).
ASSETS = ("charts.js", "roofline.js", "table.js", "timeline.js", "ranks.js", "report.js")
#: Style sheets in order.
CSS_ASSETS = ("report.css", "timeline.css")


@cache
def _asset(name: str) -> str:
    return (files("ranksight.report.html") / "assets" / name).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("ranksight.report.html", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def script_text() -> str:
    """The inline script: all JS assets concatenated."""
    js = "\n".join(_asset(a) for a in ASSETS)
    if "</script" in js.lower() or "<!--" in js:
        raise AssertionError("a JS asset contains </script or <!--")
    return js


def csp_for(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; img-src data:; font-src data:; "
        "connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _view(doc: dict[str, Any]) -> dict[str, Any]:
    S = doc["strings"]
    secs = []
    for s in doc["sections"]:
        secs.append({**s, "notes": [S[i] for i in s["notes"]]})
    groups = [(g, [s for s in secs if s["group"] == g]) for g in doc["groups"]]
    groups = [(g, ss) for g, ss in groups if any(s["shown"] for s in ss)]
    skipped = [s for s in secs if not s["shown"]]
    shown = sum(1 for s in secs if s["shown"])
    ranks = doc["ranks"]
    rank_txt = f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''}"
    return {
        "title": S[doc["title"]],
        "subtitle": f"{rank_txt} · {doc['context'] + ' · ' if doc.get('context') else ''}{shown} sections",
        "groups": groups,
        "skipped": skipped,
        "generator": doc["generator"],
        "schema": doc["schema"],
        "version": doc["version"],
        "created": doc["created_utc"],
        "inputs": _inputs_line(doc),
    }


#: Input files named in the footer at most (a many-rank run has thousands).
FOOTER_INPUTS = 8


def _inputs_line(doc: dict[str, Any]) -> list[str]:
    S = doc["strings"]
    names = [S[i] for i in doc["inputs"]]
    if len(doc["ranks"]) <= rkmod.MANY_RANKS or len(names) <= FOOTER_INPUTS:
        return names
    return [*names[:FOOTER_INPUTS], f"… {len(names) - FOOTER_INPUTS} more ({len(names)} files)"]


def data_text(doc: dict[str, Any]) -> str:
    """The payload as it goes into the page: JSON, compressed (gzip, base64) when the run has more
    than ``MANY_RANKS`` ranks and the JSON is larger than ``PACK_MIN_BYTES``."""
    text = script_json(doc)
    if len(doc.get("ranks", ())) > rkmod.MANY_RANKS and len(text) > rkmod.PACK_MIN_BYTES:
        return script_json(rkmod.pack_json(text))
    return text


def render_html(doc: dict[str, Any]) -> str:
    """The HTML text of the report for a payload built by
    :func:`ranksight.report.html.build.build_payload`."""
    script = script_text()
    tmpl = _env().get_template("report.html")
    return tmpl.render(
        css="\n".join(_asset(c) for c in CSS_ASSETS),
        script=script,
        csp=csp_for(script),
        data_json=data_text(doc),
        **_view(doc),
    )


def write_atomic(text: str, path: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    with atomic_path(path, suffix=".html.tmp", mode=0o644) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
