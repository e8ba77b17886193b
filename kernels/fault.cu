/* fault.cu: a kernel that faults on purpose, so that the daemon's handling of a lost device context can be tested. */
/* SPDX-License-Identifier: MIT */
#include "kernels/common.cuh"

/* Stops the grid with a trap: the context's sticky cudaErrorLaunchFailure. */
static __global__ void pk_fault_kernel(void)
{
    __trap();
}

/* Queues the faulting kernel on stream; see kernels.h. */
extern "C" int pk_cuda_fault(void *stream)
{
    pk_fault_kernel<<<1, 1, 0, (cudaStream_t) stream>>>();
    return pk_launch_status();
}
