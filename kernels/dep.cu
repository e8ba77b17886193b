/* dep.cu: dependency words waited for and written by kernels (the cuda backend's gate and signal under MPS). */
/* SPDX-License-Identifier: MIT */
#include "kernels/common.cuh"
#include "kernels/ptx.cuh"

/* The words of one launch, carried in the kernel's parameters. */
struct pk_dep_params {
    pk_dep_word w[PK_DEP_WORDS_MAX];
    unsigned n;
    unsigned long long bound_ns;
};

/*
 * The gate: thread i polls word i until it reaches its value ((int32_t) (word - value) >= 0,
 * the wrapping comparison the protocol promises) or bound_ns have passed, then the grid ends,
 * which lets the work queued behind it start. Only then may that work be scheduled
 * (griddepcontrol.launch_dependents once every word is in): blocks made resident earlier to
 * wait would hold SMs that the worker's own kernels, whose end writes the word, may need.
 */
static __global__ void pk_dep_wait_kernel(const pk_dep_params p)
{
    const unsigned i = threadIdx.x;
    if (i < p.n) {
        const volatile uint32_t *word = p.w[i].addr;
        const uint32_t value = p.w[i].value;
        const unsigned long long t0 = pk_globaltimer_ns();
        while ((int32_t) (*word - value) < 0 && pk_globaltimer_ns() - t0 < p.bound_ns) {
        }
    }
    __threadfence();
    __syncthreads();
    pk_grid_launch_dependents();
}

/* The signal: thread i writes word i's value once the work before it on the stream is done
 * and its writes are visible to the whole system. Launched early behind the kernel before it
 * (programmatic): one block that waits costs nothing, and the launch is made by then. */
static __global__ void pk_dep_signal_kernel(const pk_dep_params p)
{
    const unsigned i = threadIdx.x;
    pk_grid_dependency_wait();
    __threadfence_system();
    if (i < p.n)
        *(volatile uint32_t *) p.w[i].addr = p.w[i].value;
}

/* Queues kernel over words [0, n) in launches of at most PK_DEP_WORDS_MAX; returns 0 or
 * PAGED_E_DEVICE. */
static int pk_dep_launch(void (*kernel)(const pk_dep_params), const pk_dep_word *words, unsigned n,
                         unsigned long long bound_ns, bool programmatic, cudaStream_t stream)
{
    for (unsigned first = 0; first < n; first += PK_DEP_WORDS_MAX) {
        pk_dep_params p;
        p.n = n - first < PK_DEP_WORDS_MAX ? n - first : PK_DEP_WORDS_MAX;
        p.bound_ns = bound_ns;
        for (unsigned i = 0; i < p.n; i++)
            p.w[i] = words[first + i];
        if (pk_launch_dependent(kernel, dim3(1), dim3(PK_DEP_WORDS_MAX), 0, stream, p, programmatic) != 0)
            return PAGED_E_DEVICE;
    }
    return 0;
}

/* Queues the gate over words on stream; see kernels.h. */
extern "C" int pk_cuda_dep_wait(const pk_dep_word *words, unsigned n, unsigned long long bound_ns, void *stream)
{
    return pk_dep_launch(pk_dep_wait_kernel, words, n, bound_ns, false, (cudaStream_t) stream);
}

/* Queues the writes of words on stream; see kernels.h. */
extern "C" int pk_cuda_dep_signal(const pk_dep_word *words, unsigned n, void *stream)
{
    return pk_dep_launch(pk_dep_signal_kernel, words, n, 0, true, (cudaStream_t) stream);
}

/* Loads both kernels now; see kernels.h. */
extern "C" int pk_cuda_dep_load(void)
{
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, pk_dep_wait_kernel) != cudaSuccess
        || cudaFuncGetAttributes(&a, pk_dep_signal_kernel) != cudaSuccess) {
        (void) cudaGetLastError();
        return PAGED_E_DEVICE;
    }
    return 0;
}
