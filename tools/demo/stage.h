/* stage.h: where paged-demo's tensors meet the synchronous calls: host memory, or a device copy. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_STAGE_H
#define PAGED_TOOLS_DEMO_STAGE_H

#include <stddef.h>

/*
 * The synchronous calls of libpaged take host pointers on the cpu backend and device
 * pointers (of the calling thread's current CUDA context) on the cuda backend. The demo
 * keeps every tensor in host memory, where it makes and checks them, and passes them
 * through a stage: on the cpu backend the stage hands the host pointer through; on the
 * cuda backend it copies the tensor to a device buffer of its own first (or back from it,
 * for outputs). Device buffers are allocated on the current device (device 0 unless
 * CUDA_VISIBLE_DEVICES says otherwise) and grown as needed.
 */
struct demo_stage {
    int on_device;
    void *dev;       /* device buffer, or NULL */
    size_t cap;      /* its size */
};

/* Sets up a stage; on_device says the backend wants device pointers. Returns 0, or -1 with
 * the reason in err when this demo was built without CUDA or the device is not usable. */
int demo_stage_init(struct demo_stage *s, int on_device, char *err, size_t errlen);

/* Frees the stage's device buffer. */
void demo_stage_free(struct demo_stage *s);

/* Returns the pointer to pass for bytes of input at host address src (src itself, or a
 * device copy), or NULL with the reason in err. */
const void *demo_stage_in(struct demo_stage *s, const void *src, size_t bytes, char *err,
                          size_t errlen);

/* Returns the pointer to pass for an output of bytes that will end up at host address dst,
 * or NULL with the reason in err. */
void *demo_stage_out(struct demo_stage *s, void *dst, size_t bytes, char *err, size_t errlen);

/* Copies an output staged by demo_stage_out to dst (nothing to do on the host). Returns 0
 * or -1 with the reason in err. */
int demo_stage_back(struct demo_stage *s, void *dst, size_t bytes, char *err, size_t errlen);

#endif
