/* strerror.c: the text of each paged_error code. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"

/* One message per code, indexed by -code. */
static const char *const pcore_error_text[] = {
    [0] = "success",
    [-PAGED_E_INVAL] = "invalid argument",
    [-PAGED_E_NOMEM] = "out of memory",
    [-PAGED_E_NOSPC] = "no free blocks left in the pool",
    [-PAGED_E_NOENT] = "no such pool",
    [-PAGED_E_EXIST] = "a pool of that name already exists",
    [-PAGED_E_PERM] = "permission denied (the owner and mode of the pool, or of the socket)",
    [-PAGED_E_PROTO] = "malformed protocol message",
    [-PAGED_E_VERSION] = "client and daemon protocol versions differ",
    [-PAGED_E_OPCODE] = "unknown request opcode, or one changed after submission",
    [-PAGED_E_LAYER] = "layer index outside the pool",
    [-PAGED_E_RANGE] = "offset or length outside the client's arena",
    [-PAGED_E_BLOCK] = "block id outside the pool",
    [-PAGED_E_NOTHELD] = "block not held by this client",
    [-PAGED_E_READONLY] = "block is shared, published or read-only and cannot be written",
    [-PAGED_E_SEQLEN] = "sequence length exceeds what its block table covers",
    [-PAGED_E_HEADS] = "query heads are not a multiple of the pool's KV heads",
    [-PAGED_E_DTYPE] = "dtype does not match the pool or is not supported",
    [-PAGED_E_GEOMETRY] = "invalid or unsupported pool geometry",
    [-PAGED_E_RING] = "ring indices are corrupt",
    [-PAGED_E_SHUTDOWN] = "daemon shutting down",
    [-PAGED_E_DISCONNECTED] = "disconnected from the daemon",
    [-PAGED_E_TIMEOUT] = "timed out",
    [-PAGED_E_AGAIN] = "submission ring full",
    [-PAGED_E_LIMIT] = "daemon limit reached",
    [-PAGED_E_DEVICE] = "device or kernel failure",
    [-PAGED_E_SYSTEM] = "system call failed",
    [-PAGED_E_NOTSUP] = "not supported by this daemon or backend",
    [-PAGED_E_BUSY] = "reserved error code (no call returns it)",
    [-PAGED_E_NOTCONN] = "no daemon is listening on the socket",
    [-PAGED_E_XDEV] = "the pool is on another device than the client's data arena",
};

/* Returns the message for err, or "unknown error" for a code outside the table. */
const char *paged_strerror(int err)
{
    if (err > 0 || -err >= (int) (sizeof pcore_error_text / sizeof pcore_error_text[0])
        || pcore_error_text[-err] == NULL)
        return "unknown error";
    return pcore_error_text[-err];
}
