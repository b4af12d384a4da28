"""Event kinds and kernel classes: one documented table each.

``kind`` says what an event is (from its category and phase; old 2021 category names and
non-CUDA runtimes are mapped). ``kernel_class`` says what a GPU activity does (the kernel taxonomy,
:mod:`ranksight.model.taxonomy`, decides it from the kernel's name). Sync events
(``cuda_sync``) are never GPU work: they measure the CPU waiting.
"""

from __future__ import annotations

import polars as pl

from ranksight.model.taxonomy import classify

__all__ = [
    "KINDS",
    "KIND_DTYPE",
    "KERNEL_CLASSES",
    "KERNEL_CLASS_DTYPE",
    "GPU_KINDS",
    "CPU_KINDS",
    "LAUNCH_KINDS",
    "LAUNCH_APIS",
    "kind_of_category",
    "kernel_class_of_name",
]

KINDS = [
    "cpu_op",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "cuda_runtime",
    "cuda_driver",
    "kernel",
    "memcpy",
    "memset",
    "sync",
    "flow",
    "memory",
    "counter",
    "metadata",
    "other",
]
KIND_DTYPE = pl.Enum(KINDS)

KERNEL_CLASSES = ["COMPUTE", "COMMUNICATION", "MEMORY", "OTHER"]
KERNEL_CLASS_DTYPE = pl.Enum(KERNEL_CLASSES)

#: GPU work: what counts as busy time on a stream.
GPU_KINDS = ("kernel", "memcpy", "memset")
#: Events that run on a CPU thread (the steps' time ranges apply to them directly).
CPU_KINDS = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver", "memory")
#: Events that can launch GPU work (linked through ``correlation``).
LAUNCH_KINDS = ("cuda_runtime", "cuda_driver")

#: Launch APIs known by name (labels only: a launch is any runtime/driver event whose
#: correlation matches a GPU activity).
LAUNCH_APIS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaGraphLaunch",
    "cuGraphLaunch",
    "cudaMemcpyAsync",
    "cudaMemcpy",
    "cudaMemcpy2DAsync",
    "cudaMemsetAsync",
    "cudaMemset",
    "hipLaunchKernel",
    "hipExtLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipModuleLaunchKernel",
    "hipGraphLaunch",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
    "hipMemsetAsync",
    "runFunction - job_prep_and_submit_for_execution",
)

_CATEGORY_KIND = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "python_function": "python_function",
    "python": "python_function",
    "cuda_runtime": "cuda_runtime",
    "runtime": "cuda_runtime",
    "mtia_runtime": "cuda_runtime",
    "xpu_runtime": "cuda_runtime",
    "privateuse1_runtime": "cuda_runtime",
    "glow_runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_sync": "sync",
    "ac2g": "flow",
    "async": "flow",
    "async_cpu_to_gpu": "flow",
    "fwdbwd": "flow",
}


def kind_of_category(cat: str, phase: str, name: str) -> str:
    """The kind of an event from its category, phase and name."""
    if phase == "M":
        return "metadata"
    if phase == "C":
        return "counter"
    if phase in ("s", "t", "f"):
        return "flow"
    if name == "[memory]":
        return "memory"
    return _CATEGORY_KIND.get(cat.lower(), "other")


def kernel_class_of_name(kind: str, name: str) -> str | None:
    """The class of a GPU activity (from the kernel taxonomy, :mod:`ranksight.model.taxonomy`); None for
    events that are not GPU work."""
    if kind in ("memcpy", "memset"):
        return "MEMORY"
    if kind != "kernel":
        return None
    return classify(name or "").kernel_class
