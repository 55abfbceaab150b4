/* gguf_tensor.c: ggml tensor types (names, block layouts) and dequantisation of the
 * types we load (F32, F16, BF16, Q8_0, Q4_0) to f32. */
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"

typedef struct tensor_type_info {
    const char *name;     /* NULL: a number ggml never used or has retired */
    uint32_t block_elems;
    uint32_t block_bytes;
} tensor_type_info;

/* Indexed by ggml_type. Block layouts from ggml-common.h. */
static const tensor_type_info tensor_types[] = {
    [0] = {"F32", 1, 4},        [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},     [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},     [9] = {"Q8_1", 32, 36},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},  [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},  [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74}, [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},  [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},       [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},       [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},  [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},  [39] = {"MXFP4", 32, 17},
};

enum { N_TENSOR_TYPES = sizeof tensor_types / sizeof tensor_types[0] };

const char *gguf_tensor_type_name(uint32_t type)
{
    return type < N_TENSOR_TYPES ? tensor_types[type].name : NULL;
}

bool gguf_tensor_type_layout(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes)
{
    if (!gguf_tensor_type_name(type))
        return false;
    *block_elems = tensor_types[type].block_elems;
    *block_bytes = tensor_types[type].block_bytes;
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

static uint16_t load_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static void dequant_q8_0(float *out, const uint8_t *in, size_t nblocks)
{
    for (size_t b = 0; b < nblocks; b++, in += 34, out += 32) {
        float d = gguf_f16_to_f32(load_u16(in));
        for (int j = 0; j < 32; j++)
            out[j] = d * (float)(int8_t)in[2 + j];
    }
}

/* Q4_0: a half scale, then 16 bytes; low nibbles are elements 0..15, high 16..31. */
static void dequant_q4_0(float *out, const uint8_t *in, size_t nblocks)
{
    for (size_t b = 0; b < nblocks; b++, in += 18, out += 32) {
        float d = gguf_f16_to_f32(load_u16(in));
        for (int j = 0; j < 16; j++) {
            out[j] = d * (float)((in[2 + j] & 0x0f) - 8);
            out[j + 16] = d * (float)((in[2 + j] >> 4) - 8);
        }
    }
}

ts_status gguf_tensor_to_f32(float *out, const gguf_tensor *t, size_t n, ts_error *err)
{
    if (n != t->n_elems)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "tensor '%.*s' has %llu elements, the buffer %zu", (int)t->name.len,
                            t->name.ptr, (unsigned long long)t->n_elems, n);
    switch (t->type) {
    case GGUF_TENSOR_F32:
        memcpy(out, t->data, n * sizeof(float));
        return TS_OK;
    case GGUF_TENSOR_F16:
        for (size_t i = 0; i < n; i++)
            out[i] = gguf_f16_to_f32(load_u16(t->data + 2 * i));
        return TS_OK;
    case GGUF_TENSOR_BF16:
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)load_u16(t->data + 2 * i) << 16;
            memcpy(&out[i], &bits, 4);
        }
        return TS_OK;
    case GGUF_TENSOR_Q8_0:
        dequant_q8_0(out, t->data, n / 32);
        return TS_OK;
    case GGUF_TENSOR_Q4_0:
        dequant_q4_0(out, t->data, n / 32);
        return TS_OK;
    default: {
        const char *name = gguf_tensor_type_name(t->type);
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "tensor '%.*s' has type %s (%u); only F32, F16, BF16, Q8_0 and "
                            "Q4_0 are supported", (int)t->name.len, t->name.ptr,
                            name ? name : "unknown", t->type);
    }
    }
}
