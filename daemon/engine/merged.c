/* merged.c: what the backends share about merged launches: their arrays, the refusing test aid, the log line. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/engine/merged.h"
#include "daemon/util/knobs.h"
#include "daemon/util/log.h"
#include "kernels/kernels.h"
#include "lib/core/names.h"
#include "paged.h"

/* Measures a merged launch; see merged.h. */
void pm_shape(const struct pd_batch_op *ops, uint32_t count, pm_data_fn *data, int decode,
              struct pm_shape *out)
{
    memset(out, 0, sizeof *out);
    out->stride = 1;
    out->layer = ops[0].op->layer_begin;
    int any = 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct pv_op *op = ops[i].op;
        if (data(&ops[i]) == NULL)
            continue;
        if (decode) {
            out->items += op->count;
            if (op->bt_stride > out->stride)
                out->stride = op->bt_stride;
        } else {
            out->items++;
            out->tokens += op->num_tokens;
        }
        if (!any)
            out->layer = op->layer_begin;
        out->layers_differ |= op->layer_begin != out->layer;
        any = 1;
    }
}

/* Fills a merged DECODE's arrays; see merged.h. */
void pm_decode_fill(const struct pd_batch_op *ops, uint32_t count, pm_data_fn *data,
                    const struct pm_shape *sh, const void **q, void **out, int32_t *tables,
                    int32_t *lens, int32_t *layer)
{
    size_t s = 0, stride = sh->stride;
    for (uint32_t i = 0; i < count; i++) {
        const struct pv_op *op = ops[i].op;
        unsigned char *base = data(&ops[i]);
        if (base == NULL)
            continue;
        size_t qrow = (size_t) op->num_q_heads * (size_t) ops[i].cache->head_dim * pk_dtype_size(op->dtype);
        for (uint32_t j = 0; j < op->count; j++, s++) {
            q[s] = base + op->q_off + j * qrow;
            out[s] = base + op->out_off + j * qrow;
            lens[s] = op->seq_lens[j];
            if (layer != NULL)
                layer[s] = op->layer_begin;
            int32_t *row = tables + s * stride;
            memcpy(row, op->block_tables + (size_t) j * op->bt_stride, (size_t) op->bt_stride * 4);
            memset(row + op->bt_stride, 0, (stride - op->bt_stride) * 4);
        }
    }
}

/* Fills a merged APPEND's arrays; see merged.h. */
void pm_append_fill(const struct pd_batch_op *ops, uint32_t count, pm_data_fn *data,
                    int32_t *slots, int32_t *indptr, const void **k, const void **v, int32_t *layer)
{
    size_t t = 0, s = 0;
    indptr[0] = 0;
    for (uint32_t i = 0; i < count; i++) {
        const struct pv_op *op = ops[i].op;
        unsigned char *base = data(&ops[i]);
        if (base == NULL)
            continue;
        if (op->num_tokens != 0)
            memcpy(slots + t, op->slots, (size_t) op->num_tokens * 4);
        t += op->num_tokens;
        k[s] = base + op->k_off;
        v[s] = base + op->v_off;
        if (layer != NULL)
            layer[s] = op->layer_begin;
        indptr[++s] = (int32_t) t;
    }
}

/* Reads PAGEDD_REFUSE_MERGED for backend who; see merged.h. Returns 1 or 0. */
int pm_refuse_merged(const char *who)
{
    if (pd_knob(PD_KNOB_REFUSE_MERGED) == 0)
        return 0;
    pd_log(PD_LOG_INFO, "%s: every launch of several requests is refused as if by the kernels "
           "(PAGEDD_REFUSE_MERGED)", who);
    return 1;
}

/* Logs a merged launch run one by one; see merged.h. Returns nothing. */
void pm_log_unmerged(const char *who, int opcode, uint32_t count, int rc)
{
    pd_log(PD_LOG_DEBUG, "%s: merged %s launch of %u requests refused (%s): each runs alone", who,
           pcore_op_name((uint32_t) opcode), count, paged_strerror(rc));
}
