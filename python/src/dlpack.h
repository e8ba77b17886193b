/* dlpack.h: the DLPack C ABI (unversioned, "dltensor" capsules) the extension exchanges tensors by. */
/* SPDX-License-Identifier: MIT */
#ifndef PYP_DLPACK_H
#define PYP_DLPACK_H

#include <stdint.h>

/* Device types of DLDevice.device_type that the extension names. */
enum { PYP_DL_CPU = 1, PYP_DL_CUDA = 2, PYP_DL_CUDA_HOST = 3 };

/* Type codes of DLDataType.code. */
enum { PYP_DL_INT = 0, PYP_DL_UINT = 1, PYP_DL_FLOAT = 2, PYP_DL_BFLOAT = 4 };

/* The layouts below are the DLPack specification's, field for field, so that any producer's
 * or consumer's capsule reads as it wrote it. */
typedef struct pyp_dl_device {
    int32_t device_type;      /* an enum in the specification: int-sized */
    int32_t device_id;
} pyp_dl_device;

typedef struct pyp_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} pyp_dl_dtype;

typedef struct pyp_dl_tensor {
    void *data;
    pyp_dl_device device;
    int32_t ndim;
    pyp_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides;         /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} pyp_dl_tensor;

typedef struct pyp_dl_managed {
    pyp_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct pyp_dl_managed *self);
} pyp_dl_managed;

/* The capsule names: a fresh one, and one a consumer has taken. */
#define PYP_DL_NAME "dltensor"
#define PYP_DL_USED_NAME "used_dltensor"

#endif
