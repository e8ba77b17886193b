/* names.c: the public names of request ops and of the request fields error completions point at. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "paged.h"
#include "lib/core/names.h"

/* Returns the name of op ("decode"), or NULL for a number that is no op. */
const char *paged_op_name(paged_op op)
{
    return pcore_op_name((uint32_t) op);
}

/* Returns the name of a completion's err_field, or "none" for one this library does not know. */
const char *paged_field_name(uint32_t field)
{
    const char *name = pcore_field_name(field);
    return name != NULL ? name : "none";
}
