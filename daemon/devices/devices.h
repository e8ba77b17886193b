/* devices.h: a device set: one backend per device behind one backend table. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_DEVICES_DEVICES_H
#define PAGED_DAEMON_DEVICES_DEVICES_H

/*
 * A daemon that serves several devices opens one backend per device (each with its own
 * stream, workers, staging and health) and hands the engine, the tiers and the peers this
 * set instead, itself a backend (backend.h): pools and data arenas are made on the device
 * their creation names, and every later call on one of them goes to its device's backend,
 * with that device made current first (the backends' enter). A batch is split into one batch
 * per device, each in the engine's launch order, run one after the other on the engine thread:
 * the devices then work at the same time. Its tickets are the set's own, each naming the
 * tickets of the devices' batches up to it.
 *
 * A COPY from a pool on one device into a pool on another runs on the source's device
 * (its kernel writes the other device's memory through peer access, which the set asks of
 * every pair at open: the backends' reach). Its batch is run in order, device by device,
 * settling every device before and after that COPY, so that it sees what came before it
 * on either device and what comes after it sees the copy; such a batch is never deferred.
 * Between devices that cannot reach each other, the COPY fails with PAGED_E_NOTSUP.
 *
 * Host memory (the tiers' host_alloc) and the peers' staging buffers (dev_alloc) come from
 * the first device's backend; the cuda backend pins host memory for every device.
 */

#include <stdint.h>

#include "daemon/backend.h"

/* The most devices one daemon serves. */
#define PD_MAX_DEVICES 16

/* Makes a set of the n backends subs[0..n) (2 to PD_MAX_DEVICES, all of one kind, device i
 * of the set being subs[i]), taking them over: closed with the set, or at once on failure.
 * Returns the set, or NULL with *cause. */
pd_backend *pd_devices_open(pd_backend *const *subs, uint32_t n, char **cause);

#endif
