"""The trace model: typed columns per rank, derived links, metadata."""

from ranksight.model.kinds import GPU_KINDS, KERNEL_CLASSES, KINDS
from ranksight.model.meta import ProcessGroup, TraceMeta
from ranksight.model.run import Run, load
from ranksight.model.trace import Trace

__all__ = ["Run", "Trace", "TraceMeta", "ProcessGroup", "load", "KINDS", "KERNEL_CLASSES", "GPU_KINDS"]
