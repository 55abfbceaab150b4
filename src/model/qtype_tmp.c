/* qtype_tmp.c: TEMPORARY stand-in for simd/ref/quant_types.c (branch q-formats) so this
 * branch builds before it lands: F32, F16, BF16, Q8_0 and Q4_0 only. Deleted at the merge. */
#include <string.h>

#include "gguf/gguf.h"
#include "quant.h"

static const qtype_info infos[] = {
    [QT_F32] = {"F32", 1, 4, QACT_F32},      [QT_F16] = {"F16", 1, 2, QACT_F32},
    [QT_Q4_0] = {"Q4_0", 32, 18, QACT_Q8_32}, [QT_Q8_0] = {"Q8_0", 32, 34, QACT_Q8_32},
    [QT_BF16] = {"BF16", 1, 2, QACT_F32},
};

const qtype_info *qtype_get(uint32_t type)
{
    return type < sizeof infos / sizeof *infos && infos[type].name ? &infos[type] : NULL;
}

const char *qtype_name(uint32_t type)
{
    return gguf_tensor_type_name(type);
}

size_t qtype_row_bytes(uint32_t type, int64_t k)
{
    const qtype_info *q = qtype_get(type);
    if (!q || k <= 0 || k % q->block_elems)
        return 0;
    return (size_t)(k / q->block_elems) * q->block_bytes;
}

double qtype_bits_per_weight(uint32_t type)
{
    const qtype_info *q = qtype_get(type);
    return q ? q->block_bytes * 8.0 / q->block_elems : 0.0;
}

size_t qact_row_bytes(qact a, int64_t k)
{
    switch (a) {
    case QACT_Q8_32:
        return (size_t)(k / QK_32) * sizeof(qa_q8_32);
    case QACT_Q8_K:
        return (size_t)(k / QK_K) * sizeof(qa_q8_k);
    default:
        return (size_t)k * sizeof(float);
    }
}

void qtype_dequant_row(float *out, const void *row, uint32_t type, int64_t k)
{
    gguf_tensor t = {.type = type, .n_elems = (uint64_t)k, .data = row};
    gguf_tensor_to_f32(out, &t, (size_t)k, NULL);
}
