/* nvml.c: the GPU's clock and power limits, read through NVML where the driver ships it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include "tools/bench/gpu.h"

/*
 * The driver's management library is loaded at run time (it comes with the driver, not the
 * toolkit, and paged-bench must run where it is missing). Only the five entry points below
 * are used, declared here by their documented signatures: an int status (0: success), an
 * opaque device handle, clock type 1 for the SM clock and 2 for the memory clock, and the
 * power limit in milliwatts.
 */
typedef struct bg_nvml_device *bg_nvml_handle;
typedef int (*bg_nvml_init_fn)(void);
typedef int (*bg_nvml_shutdown_fn)(void);
typedef int (*bg_nvml_by_bus_fn)(const char *bus_id, bg_nvml_handle *dev);
typedef int (*bg_nvml_max_clock_fn)(bg_nvml_handle dev, int type, unsigned *mhz);
typedef int (*bg_nvml_power_limit_fn)(bg_nvml_handle dev, unsigned *milliwatts);
#define BG_NVML_CLOCK_SM 1
#define BG_NVML_CLOCK_MEM 2

/* Reads device dev's limits; see gpu.h. */
void bg_gpu_limits(int dev, int *sm_max_mhz, int *mem_max_mhz, int *power_limit_w)
{
    *sm_max_mhz = *mem_max_mhz = *power_limit_w = 0;
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, (int) sizeof bus, dev) != cudaSuccess) {
        (void) cudaGetLastError();
        return;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return;
    bg_nvml_init_fn init = (bg_nvml_init_fn) dlsym(lib, "nvmlInit_v2");
    bg_nvml_shutdown_fn shutdown = (bg_nvml_shutdown_fn) dlsym(lib, "nvmlShutdown");
    bg_nvml_by_bus_fn by_bus = (bg_nvml_by_bus_fn) dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    bg_nvml_max_clock_fn max_clock = (bg_nvml_max_clock_fn) dlsym(lib, "nvmlDeviceGetMaxClockInfo");
    bg_nvml_power_limit_fn power = (bg_nvml_power_limit_fn) dlsym(lib, "nvmlDeviceGetEnforcedPowerLimit");
    if (init != NULL && shutdown != NULL && by_bus != NULL && init() == 0) {
        bg_nvml_handle h = NULL;
        if (by_bus(bus, &h) == 0) {
            unsigned v = 0;
            if (max_clock != NULL && max_clock(h, BG_NVML_CLOCK_SM, &v) == 0 && v > 0)
                *sm_max_mhz = (int) v;
            if (max_clock != NULL && max_clock(h, BG_NVML_CLOCK_MEM, &v) == 0 && v > 0)
                *mem_max_mhz = (int) v;
            if (power != NULL && power(h, &v) == 0 && v > 0)
                *power_limit_w = (int) ((v + 500) / 1000);
        }
        shutdown();
    }
    dlclose(lib);
}
