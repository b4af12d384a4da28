"""Mini traces of the TensorBoard plugin's own unit tests, as ranksight fixtures.

Ported from pytorch/kineto ``tb_plugin/test/test_profiler.py`` (torch-tb-profiler 0.4.3, the same
tests as at commit f8881ce3f6597325da108f0c42e98454fee1d3af). Each ``MINI[name]`` is the event list
of the test ``name`` (the plugin's JSON strings, unchanged; ``_1`` is the second trace of a test).
The expected values asserted in ``test_tb_views.py`` are the plugin's assertions.

Original notice (BSD-3-Clause), kept as required:

    BSD License

    For Kineto software

    Copyright (c) Facebook, Inc. and its affiliates. All rights reserved.

    All contributions by Microsoft:
    Copyright (c) Microsoft Corporation. (The Azure AI Platform team)

    Redistribution and use in source and binary forms, with or without modification,
    are permitted provided that the following conditions are met:

     * Redistributions of source code must retain the above copyright notice, this
       list of conditions and the following disclaimer.

     * Redistributions in binary form must reproduce the above copyright notice,
       this list of conditions and the following disclaimer in the documentation
       and/or other materials provided with the distribution.

     * Neither the name Facebook nor the names of its contributors may be used to
       endorse or promote products derived from this software without specific
       prior written permission.

    THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND
    ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED
    WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
    DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR
    ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES
    (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES;
    LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON
    ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
    (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS
    SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
"""

from __future__ import annotations

from typing import Any

# fmt: off

MINI: dict[str, list[dict[str, Any]]] = {
    "all_categories": [
        {"ph": "X", "cat": "Operator", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "pid": 13721, "tid": "123", "ts": 100, "dur": 180, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::nll_loss_backward", "pid": 13721, "tid": "456", "ts": 340, "dur": 70, "args": {"Input Dims": [[], [32, 1000], [32], [], [], [], []], "External id": 4}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 50, "dur": 400, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 405, "dur": 10, "args": {"stream": 7, "correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "456", "ts": 360, "dur": 20, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7", "ts": 420, "dur": 5, "args": {"stream": 7, "correlation": 40344, "external id": 4}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemsetAsync", "pid": 13721, "tid": "456", "ts": 390, "dur": 10, "args": {"correlation": 40344, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 430, "dur": 15, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 405, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
    ],
    "external_id": [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 5, "args": {"correlation": 334, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 6, "args": {"correlation": 335, "external id": 2, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 7, "args": {"correlation": 336, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 190, "dur": 0, "args": {"correlation": 336, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 130, "dur": 8, "args": {"correlation": 337, "external id": 2, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 190, "dur": 0, "args": {"correlation": 337, "external id": 2}},
    ],
    "operator_relation": [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 100, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
    ],
    "operator_relation_1": [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 130, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
    ],
    "remove_dup_nodes": [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 110, "dur": 80, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 60, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 8, "args": {"correlation": 335, "external id": 4, "device": 0}},
    ],
    "top_level_runtime": [
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 335}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 8, "args": {"correlation": 335, "external id": 335, "device": 0}},
    ],
    "runtime_called_by_profilerstep": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "456", "ts": 100, "dur": 300, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 8, "args": {"correlation": 335, "external id": 2, "device": 0}},
    ],
    "runtime_launch_multipe_kernels": [
        {"ph": "X", "cat": "Operator", "name": "Broadcast", "pid": 13721, "tid": "456", "ts": 100, "dur": 300, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchCooperativeKernelMultiDevice", "pid": 13721, "tid": "456", "ts": 130, "dur": 20, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "pid": 0, "tid": "stream 13", "ts": 160, "dur": 120318, "args": {"device": 0, "context": 1, "stream": 13, "correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "ncclBroadcastRingLLKernel_copy_i8(ncclColl)", "pid": 0, "tid": "stream 22", "ts": 170, "dur": 132800, "args": {"device": 0, "context": 2, "stream": 22, "correlation": 335, "external id": 2}},
    ],
    "no_profilerstep": [
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 100, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::nll_loss_backward", "pid": 13721, "tid": "456", "ts": 300, "dur": 70, "args": {"Input Dims": [[], [32, 1000], [32], [], [], [], []], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 320, "dur": 100, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 310, "dur": 20, "args": {"correlation": 40348, "external id": 4}},
    ],
    "multiple_profilersteps_no_overlap": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 350, "dur": 150, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 360, "dur": 50, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 280, "dur": 40, "args": {"stream": 7, "correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "123", "ts": 250, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 410, "dur": 200, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 400, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
    ],
    "self_time": [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 40, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 155, "dur": 20, "args": {"correlation": 334, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 150, "dur": 10, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 210, "dur": 16, "args": {"correlation": 335, "external id": 2, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 170, "dur": 25, "args": {"correlation": 335, "external id": 2}},
    ],
    "multiple_profilersteps_with_overlap": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 200, "dur": 60, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 350, "dur": 150, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 360, "dur": 50, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 150, "dur": 90, "args": {"correlation": 123, "external id": 123, "device": 0}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": "stream 7", "ts": 280, "dur": 100, "args": {"stream": 7, "correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "123", "ts": 250, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 410, "dur": 200, "args": {"correlation": 40348, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 400, "dur": 5, "args": {"correlation": 40348, "external id": 4}},
    ],
    "last_steps_no_kernel": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 120, "dur": 10, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 300, "dur": 100, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#3", "pid": 13721, "tid": "123", "ts": 400, "dur": 50, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 90, "dur": 20, "args": {"correlation": 123, "external id": 123, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaMemcpyAsync", "pid": 13721, "tid": "123", "ts": 125, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 0, "tid": "stream 7", "ts": 150, "dur": 180, "args": {"correlation": 334, "external id": 2, "device": 0}},
    ],
    "pure_cpu": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123", "ts": 100, "dur": 200, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::to", "pid": 13721, "tid": "123", "ts": 120, "dur": 10, "args": {"Input Dims": [[2, 8, 5], [], [], [], [], [], [], []], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "123", "ts": 300, "dur": 100, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123", "ts": 350, "dur": 40, "args": {"Input Dims": [], "External id": 4}},
    ],
    "gpu_utilization": [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 70, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 130, "dur": 10, "args": {"correlation": 334, "external id": 4, "device": 1, "blocks per SM": 0.5, "est. achieved occupancy %": 0.6}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 334, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 1, "tid": "stream 8", "ts": 135, "dur": 15, "args": {"correlation": 335, "external id": 2, "device": 1, "blocks per SM": 0.6, "est. achieved occupancy %": 0.1}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel_64addr", "pid": 1, "tid": "stream 8", "ts": 150, "dur": 0, "args": {"correlation": 335, "external id": 2, "device": 1, "blocks per SM": 0.3, "est. achieved occupancy %": 0.2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 120, "dur": 0, "args": {"correlation": 335, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 145, "dur": 25, "args": {"correlation": 336, "external id": 4, "device": 1, "blocks per SM": 0.3, "est. achieved occupancy %": 1.0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 125, "dur": 3, "args": {"correlation": 336, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 200, "dur": 20, "args": {"correlation": 337, "external id": 2, "device": 1, "blocks per SM": 10.5, "est. achieved occupancy %": 0.3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 195, "dur": 1, "args": {"correlation": 337, "external id": 2}},
    ],
    "gpu_utilization_kernel_out_of_step": [
        {"ph": "X", "cat": "Operator", "name": "aten::mat_mul", "pid": 13721, "tid": "456", "ts": 10, "dur": 10, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 120, "dur": 70, "args": {"Input Dims": [], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "456", "ts": 220, "dur": 20, "args": {"Input Dims": [], "External id": 4}},
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 13721, "tid": "456", "ts": 100, "dur": 100, "args": {"Input Dims": [], "External id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 60, "dur": 20, "args": {"correlation": 334, "external id": 1, "device": 1, "blocks per SM": 0.5, "est. achieved occupancy %": 0.6}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 15, "dur": 5, "args": {"correlation": 334, "external id": 1}},
        {"ph": "X", "cat": "Kernel", "name": "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "pid": 1, "tid": "stream 7", "ts": 240, "dur": 25, "args": {"correlation": 337, "external id": 4, "device": 1, "blocks per SM": 10.5, "est. achieved occupancy %": 0.3}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "456", "ts": 230, "dur": 10, "args": {"correlation": 337, "external id": 4}},
    ],
    "tensor_core": [
        {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 13721, "tid": "123", "ts": 200, "dur": 100, "args": {"Input Dims": [[]], "External id": 3}},
        {"ph": "X", "cat": "Operator", "name": "op_no_tc", "pid": 13721, "tid": "123", "ts": 205, "dur": 10, "args": {"Input Dims": [[]], "External id": 4}},
        {"ph": "X", "cat": "Operator", "name": "aten::cudnn_convolution", "pid": 13721, "tid": "123", "ts": 215, "dur": 10, "args": {"Input Dims": [[]], "External id": 5}},
        {"ph": "X", "cat": "Kernel", "name": "kernel_no_tc", "pid": 0, "tid": "stream 7", "ts": 210, "dur": 10, "args": {"correlation": 1000, "external id": 4, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 205, "dur": 5, "args": {"correlation": 1000, "external id": 4}},
        {"ph": "X", "cat": "Kernel", "name": "volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1", "pid": 0, "tid": "stream 7", "ts": 220, "dur": 15, "args": {"correlation": 1001, "external id": 5, "device": 0}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123", "ts": 215, "dur": 5, "args": {"correlation": 1001, "external id": 5}},
    ],
}
# fmt: on
