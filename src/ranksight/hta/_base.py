"""Loading for the HTA facade (``TraceAnalysis(trace_dir=..., trace_files=...)``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ranksight.errors import UsageError
from ranksight.model.run import Run, load

__all__ = ["TraceAnalysisBase"]


class TraceAnalysisBase:
    """Holds the loaded run; mixins add HTA's methods."""

    def __init__(
        self,
        trace_files: Mapping[int, str] | None = None,
        trace_dir: str | os.PathLike[str] | None = None,
        include_last_profiler_step: bool | None = False,
    ) -> None:
        if trace_files is None and trace_dir is None:
            raise UsageError("give trace_dir or trace_files")
        if trace_files is not None:
            base = os.fspath(trace_dir) if trace_dir is not None else ""
            files = {int(r): os.path.join(base, p) if base and not os.path.isabs(p) else p for r, p in trace_files.items()}
            self.run: Run = load(files)
        else:
            self.run = load(trace_dir)  # type: ignore[arg-type]
        self.include_last_profiler_step = bool(include_last_profiler_step)
