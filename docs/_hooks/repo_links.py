"""mkdocs hook: a link from a page to a file outside docs/ (``../src/ranksight/views/enclosing.py``,
``../benchmarks/README.md``: right on GitHub, where the docs are read beside the code) becomes a
link to that file in the repository (``repo_url``), so that the site has no broken link and
``mkdocs build --strict`` still fails on a link to a page that does not exist."""

from __future__ import annotations

import os
import re
from typing import Any

_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = os.path.abspath(config["docs_dir"])
    root = os.path.dirname(docs)
    repo = (config.get("repo_url") or "").rstrip("/")
    here = os.path.dirname(os.path.join(docs, page.file.src_uri))

    def rewrite(m: re.Match[str]) -> str:
        target = m.group("target")
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or not repo:
            return m.group(0)
        path = os.path.normpath(os.path.join(here, target))
        if path.startswith(docs + os.sep) or not path.startswith(root + os.sep) or not os.path.exists(path):
            return m.group(0)
        kind = "tree" if os.path.isdir(path) else "blob"
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        return f"]({repo}/{kind}/main/{rel}{m.group('anchor') or ''})"

    return _LINK.sub(rewrite, markdown)
