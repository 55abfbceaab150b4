/* quant_mix.c: llama.cpp's ftypes and the type each tensor gets in them (the rules of its
 * quantizer without an importance matrix, for Llama-family tensor names). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "quant.h"
#include "quant/quantize.h"

typedef struct ftype_info {
    const char *name;
    quant_ftype ftype;
    uint32_t base; /* the type of the matrices no rule singles out */
} ftype_info;

static const ftype_info ftypes[] = {
    {"F32", QUANT_FTYPE_F32, QT_F32},          {"F16", QUANT_FTYPE_F16, QT_F16},
    {"BF16", QUANT_FTYPE_BF16, QT_BF16},       {"Q8_0", QUANT_FTYPE_Q8_0, QT_Q8_0},
    {"Q4_0", QUANT_FTYPE_Q4_0, QT_Q4_0},       {"Q4_1", QUANT_FTYPE_Q4_1, QT_Q4_1},
    {"Q5_0", QUANT_FTYPE_Q5_0, QT_Q5_0},       {"Q5_1", QUANT_FTYPE_Q5_1, QT_Q5_1},
    {"Q2_K", QUANT_FTYPE_Q2_K, QT_Q2_K},       {"Q3_K_S", QUANT_FTYPE_Q3_K_S, QT_Q3_K},
    {"Q3_K_M", QUANT_FTYPE_Q3_K_M, QT_Q3_K},   {"Q3_K_L", QUANT_FTYPE_Q3_K_L, QT_Q3_K},
    {"Q4_K_S", QUANT_FTYPE_Q4_K_S, QT_Q4_K},   {"Q4_K_M", QUANT_FTYPE_Q4_K_M, QT_Q4_K},
    {"Q5_K_S", QUANT_FTYPE_Q5_K_S, QT_Q5_K},   {"Q5_K_M", QUANT_FTYPE_Q5_K_M, QT_Q5_K},
    {"Q6_K", QUANT_FTYPE_Q6_K, QT_Q6_K},       {"IQ4_NL", QUANT_FTYPE_IQ4_NL, QT_IQ4_NL},
    {"IQ4_XS", QUANT_FTYPE_IQ4_XS, QT_IQ4_XS},
};

enum { N_FTYPES = sizeof ftypes / sizeof *ftypes };

bool quant_ftype_parse(quant_ftype *out, const char *name)
{
    for (int i = 0; i < N_FTYPES; i++) {
        if (!strcasecmp(ftypes[i].name, name)) {
            *out = ftypes[i].ftype;
            return true;
        }
    }
    return false;
}

const char *quant_ftype_name(int i)
{
    return i >= 0 && i < N_FTYPES ? ftypes[i].name : NULL;
}

uint32_t quant_ftype_base(quant_ftype f)
{
    for (int i = 0; i < N_FTYPES; i++)
        if (ftypes[i].ftype == f)
            return ftypes[i].base;
    return QT_F32;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* The block index of "blk.N.xxx", or -1. */
static int layer_of(const char *name)
{
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && l >= 0 && l < 1 << 20 ? (int)l : -1;
}

/* llama.cpp's "use more bits" layers: the first and last eighth, and every third between. */
static bool more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static uint32_t attn_v_type(quant_ftype f, const quant_model_info *m, int i, uint32_t t)
{
    switch (f) {
    case QUANT_FTYPE_Q2_K:
        t = m->n_gqa >= 4 ? QT_Q4_K : QT_Q3_K;
        break;
    case QUANT_FTYPE_Q3_K_M:
        t = i < 2 ? QT_Q5_K : QT_Q4_K;
        break;
    case QUANT_FTYPE_Q3_K_L:
        t = QT_Q5_K;
        break;
    case QUANT_FTYPE_IQ4_NL:
    case QUANT_FTYPE_IQ4_XS:
        if (m->n_gqa >= 4)
            t = QT_Q5_K;
        break;
    case QUANT_FTYPE_Q4_K_M:
    case QUANT_FTYPE_Q5_K_M:
        if (more_bits(i, m->n_layers))
            t = QT_Q6_K;
        break;
    case QUANT_FTYPE_Q4_K_S:
        if (i < 4)
            t = QT_Q5_K;
        break;
    default:
        break;
    }
    /* 70B: eight query heads share each attn_v, so it is small and worth more bits */
    if (m->is_70b && (t == QT_Q3_K || t == QT_Q4_K))
        t = QT_Q5_K;
    return t;
}

static uint32_t ffn_down_type(quant_ftype f, const quant_model_info *m, int i, uint32_t t)
{
    int n = m->n_layers;
    switch (f) {
    case QUANT_FTYPE_Q2_K:
        return QT_Q3_K;
    case QUANT_FTYPE_Q3_K_M:
        return i < n / 16 ? QT_Q5_K : QT_Q4_K;
    case QUANT_FTYPE_Q3_K_L:
        return QT_Q5_K;
    case QUANT_FTYPE_Q4_K_M:
    case QUANT_FTYPE_Q5_K_M:
        return more_bits(i, n) ? QT_Q6_K : t;
    case QUANT_FTYPE_IQ4_NL:
    case QUANT_FTYPE_IQ4_XS:
    case QUANT_FTYPE_Q4_K_S:
        return i < n / 8 ? QT_Q5_K : t;
    default:
        return t;
    }
}

static uint32_t attn_output_type(quant_ftype f, uint32_t t)
{
    switch (f) {
    case QUANT_FTYPE_Q2_K: return QT_Q3_K;
    case QUANT_FTYPE_Q3_K_M: return QT_Q4_K;
    case QUANT_FTYPE_Q3_K_L: return QT_Q5_K;
    default: return t;
    }
}

/* A fused Wq|Wk|Wv (other architectures' attn_qkv) gets the bits attn_v would want. */
static uint32_t attn_qkv_type(quant_ftype f, uint32_t t)
{
    switch (f) {
    case QUANT_FTYPE_Q3_K_M: case QUANT_FTYPE_Q3_K_L: return QT_Q4_K;
    case QUANT_FTYPE_Q4_K_M: return QT_Q5_K;
    case QUANT_FTYPE_Q5_K_M: return QT_Q6_K;
    default: return t;
    }
}

static uint32_t block_elems(uint32_t t)
{
    const qtype_info *info = qtype_get(t);
    return info ? info->block_elems : 1;
}

/* A type whose block does not divide the row gives way to one of about as many bits whose
 * block does (then F16); the 32-element types have none (llama.cpp refuses the file). */
static uint32_t fallback(uint32_t t, uint64_t ne0)
{
    if (ne0 % block_elems(t) == 0)
        return t;
    switch (t) {
    case QT_Q2_K: case QT_Q3_K: case QT_IQ4_XS: t = QT_IQ4_NL; break;
    case QT_Q4_K: t = QT_Q5_0; break;
    case QT_Q5_K: t = QT_Q5_1; break;
    case QT_Q6_K: t = QT_Q8_0; break;
    default: return QUANT_TYPE_NONE;
    }
    return ne0 % block_elems(t) == 0 ? t : QT_F16;
}

uint32_t quant_mix_type(quant_ftype f, const quant_model_info *m, const char *name,
                        uint32_t n_dims, uint64_t ne0)
{
    uint32_t base = quant_ftype_base(f);
    if (n_dims < 2 || !ends_with(name, ".weight") || strstr(name, "ffn_gate_inp.weight") ||
        !strcmp(name, "token_types.weight"))
        return QT_F32; /* vectors, a mixture's router and an encoder's token-type rows
                        * (added to every token) stay F32 as llama.cpp keeps them */
    if (base == QT_F32 || base == QT_F16 || base == QT_BF16)
        return base;
    uint32_t t = base;
    int layer = layer_of(name);
    bool lm_head = !strcmp(name, "output.weight") ||
                   (!m->has_output && !strcmp(name, "token_embd.weight"));
    if (lm_head) {
        /* a row the base type's block does not divide takes Q8_0 at once */
        if (ne0 % block_elems(base) != 0)
            t = QT_Q8_0;
        else if (base != QT_Q8_0)
            t = QT_Q6_K;
    } else if (strstr(name, "attn_v.weight")) {
        t = attn_v_type(f, m, layer, base);
    } else if (strstr(name, "ffn_down")) {
        t = ffn_down_type(f, m, layer, base);
    } else if (strstr(name, "attn_output.weight")) {
        t = attn_output_type(f, base);
    } else if (strstr(name, "attn_qkv.weight")) {
        t = attn_qkv_type(f, base);
    }
    return fallback(t, ne0);
}
