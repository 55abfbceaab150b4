/* gguf_tensor.c: tensor types as simd/quant.h's table gives them (names, block layouts),
 * half-float conversion, and dequantisation of a tensor's rows to f32. */
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant.h"

const char *gguf_tensor_type_name(uint32_t type)
{
    return qtype_name(type);
}

bool gguf_tensor_type_layout(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    const qtype_info *t = qtype_get(type);
    if (!t)
        return false;
    *block_elems = t->block_elems;
    *block_bytes = t->block_bytes;
    return true;
}

float gguf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) { /* inf / nan */
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: value = mant * 2^-24 */
            float f = ldexpf((float)mant, -24);
            return sign ? -f : f;
        }
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t gguf_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* nan: keep it a quiet nan */
        return sign | 0x7e00;
    if (ax >= 0x477ff000u) /* rounds to or past 65520: inf */
        return sign | 0x7c00;
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        float a;
        memcpy(&a, &ax, 4);
        /* a * 2^24 rounded to nearest even counts units of 2^-24 */
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    uint32_t mant = ax & 0x7fffffu, exp = (ax >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++; /* may carry into the exponent, which is still right */
    return sign | (uint16_t)h;
}

ts_status gguf_tensor_to_f32(float *out, const gguf_tensor *t, size_t n, ts_error *err)
{
    /* out (n_elems) = t, row by row: ne[0] elements in row_bytes */
    int name_len = (int)t->name.len;
    const char *name = t->name.ptr;
    if (n != t->n_elems)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tensor '%.*s' has %llu elements, the "
                            "buffer %zu", name_len, name, (unsigned long long)t->n_elems, n);
    if (!qtype_get(t->type)) {
        const char *type = qtype_name(t->type);
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "tensor '%.*s' has type %s (%u), which "
                            "tessera does not support", name_len, name,
                            type ? type : "unknown", t->type);
    }
    size_t row_bytes = qtype_row_bytes(t->type, (int64_t)t->ne[0]);
    if (row_bytes == 0)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%.*s': row length %llu is not a whole "
                            "number of %s blocks", name_len, name,
                            (unsigned long long)t->ne[0], qtype_name(t->type));
    uint64_t rows = t->n_elems / t->ne[0];
    if (t->n_elems % t->ne[0] != 0 || t->nbytes / row_bytes != rows ||
        t->nbytes % row_bytes != 0)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%.*s': %llu bytes do not hold %llu "
                            "rows of %llu %s elements", name_len, name,
                            (unsigned long long)t->nbytes, (unsigned long long)rows,
                            (unsigned long long)t->ne[0], qtype_name(t->type));
    for (uint64_t r = 0; r < rows; r++)
        qtype_dequant_row(out + r * t->ne[0], t->data + r * row_bytes, t->type,
                          (int64_t)t->ne[0]);
    return TS_OK;
}
