/* names.h: the names of request ops and request fields, the one table every layer reads. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_NAMES_H
#define PAGED_CORE_NAMES_H

#include <stdint.h>

/* Returns the name of opcode op (enum paged_op) as the API and pactl spell it ("decode"),
 * or NULL for a number that is no op. */
const char *pcore_op_name(uint32_t op);

/* Returns the name of a request field (enum pcore_field) as the caller of paged_request and
 * paged_attn_args knows it ("block_tables", "num_q_heads"), or NULL for a number that is no
 * field. */
const char *pcore_field_name(uint32_t field);

#endif
