/* backend.c: the backend factory: choosing and opening the backend the configuration asks for. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/backend.h"

#include <stdio.h>

#include "daemon/devices/devices.h"
#include "daemon/util/knobs.h"
#include "daemon/util/log.h"
#include "daemon/cpu/cpu.h"
#ifdef HAVE_CUDA
#include "daemon/cuda/cuda.h"
#endif

/* Opens n backends with open_one(i) and returns the one, or a set of them, or NULL with
 * *cause (those opened are closed). */
static pd_backend *open_set(uint32_t n, pd_backend *(*open_one)(const struct pd_config *cfg, int i, char **cause),
                            const struct pd_config *cfg, const int *ordinals, char **cause)
{
    pd_backend *subs[PD_MAX_DEVICES];
    for (uint32_t d = 0; d < n; d++) {
        subs[d] = open_one(cfg, ordinals != NULL ? ordinals[d] : (int) d, cause);
        if (subs[d] == NULL) {
            while (d > 0)
                pd_backend_close(subs[--d]);
            return NULL;
        }
    }
    return n == 1 ? subs[0] : pd_devices_open(subs, n, cause);
}

/* Opens one cpu backend (i unused: the cpu backend's devices are alike). */
static pd_backend *open_cpu(const struct pd_config *cfg, int i, char **cause)
{
    (void) i;
    return pd_backend_cpu_open(cfg->threads, cause);
}

/* Opens the cpu backend: one device, or PAGEDD_CPU_DEVICES. */
static pd_backend *open_cpus(const struct pd_config *cfg, char **cause)
{
    uint32_t n = (uint32_t) pd_knob(PD_KNOB_CPU_DEVICES);
    if (n > 1)
        pd_log(PD_LOG_INFO, "cpu: serving %u devices (PAGEDD_CPU_DEVICES)", n);
    return open_set(n > 1 ? n : 1, open_cpu, cfg, NULL, cause);
}

#ifdef HAVE_CUDA
/* Opens one cuda backend on runtime ordinal i. */
static pd_backend *open_cuda(const struct pd_config *cfg, int i, char **cause)
{
    (void) cfg;
    return pd_backend_cuda_open(i, cause);
}

/* Opens the cuda backend on every device cfg names. */
static pd_backend *open_cudas(const struct pd_config *cfg, char **cause)
{
    int ordinals[PD_MAX_DEVICES];
    int n = pd_backend_cuda_devices(cfg->device, ordinals, PD_MAX_DEVICES, cause);
    if (n <= 0)
        return NULL;
    return open_set((uint32_t) n, open_cuda, cfg, ordinals, cause);
}
#endif

/* Opens the configured backend; returns it or NULL with *cause. */
pd_backend *pd_backend_open(const struct pd_config *cfg, char **cause)
{
    switch (cfg->backend) {
    case PD_BACKEND_CUDA:
#ifdef HAVE_CUDA
        return open_cudas(cfg, cause);
#else
        if (asprintf(cause, "backend cuda: this pagedd was built without CUDA (use --backend cpu)") < 0)
            *cause = NULL;
        return NULL;
#endif
    case PD_BACKEND_AUTO: {
#ifdef HAVE_CUDA
        /* A machine without a driver or a GPU is an ordinary place for the cpu backend: the
         * probe's error is only worth a debug line, unless a device was named. */
        char why[160];
        if (pd_backend_cuda_probe(why, sizeof why) > 0)
            return open_cudas(cfg, cause);
        if (cfg->device[0] != '\0')
            pd_log(PD_LOG_WARNING, "backend auto: %s: using the cpu backend (device '%s' ignored)",
                   why, cfg->device);
        else
            pd_log(PD_LOG_DEBUG, "backend auto: %s: using the cpu backend", why);
#endif
        return open_cpus(cfg, cause);
    }
    case PD_BACKEND_CPU:
    default:
        return open_cpus(cfg, cause);
    }
}

/* Closes a backend; returns nothing. */
void pd_backend_close(pd_backend *b)
{
    if (b != NULL)
        b->ops->destroy(b);
}
