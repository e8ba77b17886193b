/* tierlimits.c: the tiers benchmark's physical limits: host/device copy rates and the disk's sequential read rate. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/clock.h"
#include "tools/bench/tiers.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>

#include "tools/bench/gpu.h"
#endif

#define TB_COPY_RUNS 5           /* the best of them counts */
#define TB_DISK_CHUNK (8u << 20) /* bytes per write and read */

/* Returns bytes / seconds / 1e9 for ns nanoseconds. */
static double gbps(size_t bytes, uint64_t ns)
{
    return ns > 0 ? (double) bytes / (double) ns : 0.0;
}

/* Measures memcpy between two host buffers of bytes, best of TB_COPY_RUNS, both ways being
 * the same; stores it as both rates. Returns nothing. */
static void cpu_copies(size_t bytes, struct tb_limits *l)
{
    unsigned char *a = bench_alloc(bytes, "the copy test's source"), *b = bench_alloc(bytes, "its destination");
    memset(a, 0x5a, bytes);
    memset(b, 0, bytes);
    uint64_t best = UINT64_MAX;
    for (int r = 0; r < TB_COPY_RUNS; r++) {
        uint64_t t0 = pcore_now_ns();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, bytes);
        uint64_t dt = pcore_now_ns() - t0;
        best = dt < best ? dt : best;
    }
    if (a[bytes / 2] != b[bytes / 2])
        bench_die("tiers: the memcpy test copied the wrong bytes");
    l->h2d_gbps = l->d2h_gbps = gbps(bytes, best);
    free(a);
    free(b);
}

#ifdef HAVE_CUDA
/* Returns the best rate of TB_COPY_RUNS cudaMemcpyAsync of bytes (kind) on stream, timed
 * by events. */
static double cuda_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t st)
{
    cudaEvent_t e0, e1;
    bg_check((int) cudaEventCreate(&e0), "tiers: cudaEventCreate");
    bg_check((int) cudaEventCreate(&e1), "tiers: cudaEventCreate");
    float best = 0.0f;
    for (int r = 0; r < TB_COPY_RUNS + 1; r++) {
        bg_check((int) cudaEventRecord(e0, st), "tiers: cudaEventRecord");
        bg_check((int) cudaMemcpyAsync(dst, src, bytes, kind, st), "tiers: cudaMemcpyAsync of %zu bytes", bytes);
        bg_check((int) cudaEventRecord(e1, st), "tiers: cudaEventRecord");
        bg_check((int) cudaEventSynchronize(e1), "tiers: the timed copy");
        float ms = 0.0f;
        bg_check((int) cudaEventElapsedTime(&ms, e0, e1), "tiers: cudaEventElapsedTime");
        if (r > 0 && (best == 0.0f || ms < best))   /* the first run warms up */
            best = ms;
    }
    bg_check((int) cudaEventDestroy(e0), "tiers: cudaEventDestroy");
    bg_check((int) cudaEventDestroy(e1), "tiers: cudaEventDestroy");
    return best > 0.0f ? (double) bytes / ((double) best * 1e6) : 0.0;
}

/* Measures H2D and D2H between pinned host memory and device memory. Returns nothing. */
static void gpu_copies(size_t bytes, struct tb_limits *l)
{
    void *host = NULL;
    bg_check((int) cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "tiers: cudaHostAlloc(%zu bytes)", bytes);
    memset(host, 0x5a, bytes);
    void *dev = bg_alloc(bytes, "the copy test");
    cudaStream_t st = (cudaStream_t) bg_stream();
    l->h2d_gbps = cuda_copy(dev, host, bytes, cudaMemcpyHostToDevice, st);
    l->d2h_gbps = cuda_copy(host, dev, bytes, cudaMemcpyDeviceToHost, st);
    bg_free(dev);
    bg_check((int) cudaFreeHost(host), "tiers: cudaFreeHost");
}
#endif

#ifdef HAVE_CUDA
/* Lets device dev reach device peer's memory where the pair allows it. Returns nothing. */
static void enable_peer(int dev, int peer)
{
    int can = 0;
    bg_check((int) cudaDeviceCanAccessPeer(&can, dev, peer), "remote: cudaDeviceCanAccessPeer");
    if (!can)
        return;
    bg_use_device(dev);
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();
    else
        bg_check((int) e, "remote: cudaDeviceEnablePeerAccess(%d)", peer);
}
#endif

/* Measures a peer copy of bytes from device 0 to device 1, pushed and pulled; see tiers.h. */
void tb_p2p_gbps(size_t bytes, double *push, double *pull)
{
    *push = *pull = 0.0;
#ifdef HAVE_CUDA
    if (bg_device_count() < 2)
        return;
    bg_use_device(1);
    void *dst = bg_alloc(bytes, "the peer copy's destination");
    bg_use_device(0);
    void *src = bg_alloc(bytes, "the peer copy's source");
    enable_peer(0, 1);
    enable_peer(1, 0);
    /* cudaMemcpyDefault: the addresses say the devices (unified addressing), a peer copy, run
     * by the device whose stream it is on. */
    bg_use_device(0);
    *push = cuda_copy(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t) bg_stream());
    bg_use_device(1);
    *pull = cuda_copy(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t) bg_stream());
    bg_free(dst);
    bg_use_device(0);
    bg_free(src);
#else
    (void) bytes;
#endif
}

/* Measures the copy limits; see tiers.h. */
void tb_copy_limits(int cuda, size_t bytes, struct tb_limits *l)
{
    l->cuda = cuda;
    l->copy_bytes = bytes;
#ifdef HAVE_CUDA
    if (cuda) {
        gpu_copies(bytes, l);
        return;
    }
#endif
    cpu_copies(bytes, l);
}

/* Writes bytes of a pattern to fd in chunks of buf, or dies naming path. Returns nothing. */
static void write_all(int fd, const char *path, unsigned char *buf, size_t bytes)
{
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < TB_DISK_CHUNK ? bytes - done : TB_DISK_CHUNK;
        memset(buf, (int) (done / TB_DISK_CHUNK) & 0xff, n);
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            bench_die("tiers: writing %s: %s", path, w < 0 ? strerror(errno) : "no progress");
        done += (size_t) w;
    }
}

/* Measures the disk's read rate; see tiers.h. */
void tb_disk_limit(const char *dir, size_t bytes, struct tb_limits *l)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/paged-bench-read-test", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        bench_die("tiers: creating %s: %s", path, strerror(errno));
    unsigned char *buf = bench_alloc(TB_DISK_CHUNK, "the disk test's buffer");
    write_all(fd, path, buf, bytes);
    if (fsync(fd) != 0)
        bench_die("tiers: fsync of %s: %s", path, strerror(errno));
    int err = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    l->disk_cache_dropped = err == 0 && tb_resident(fd, bytes) < 0.05;
    if (lseek(fd, 0, SEEK_SET) != 0)
        bench_die("tiers: seeking %s: %s", path, strerror(errno));
    uint64_t t0 = pcore_now_ns();
    for (size_t done = 0; done < bytes;) {
        ssize_t r = read(fd, buf, TB_DISK_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            bench_die("tiers: reading %s back: %s", path, r < 0 ? strerror(errno) : "it is short");
        done += (size_t) r;
    }
    uint64_t dt = pcore_now_ns() - t0;
    l->disk_bytes = bytes;
    l->disk_read_gbps = gbps(bytes, dt);
    free(buf);
    close(fd);
    unlink(path);
}
