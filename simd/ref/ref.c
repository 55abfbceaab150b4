/* ref.c: plain-C reference kernels, written as llama2.c's run.c computes them. */
#include <math.h>
#include <stdbool.h>

#include "qpack.h"
#include "simd_internal.h"

static void ref_rmsnorm(float *out, const float *x, const float *weight, int rows, int n, float eps)
{
    /* x, out (rows, n); weight (n) */
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *o = out + (size_t)r * n;
        float ss = 0.0f;
        for (int j = 0; j < n; j++)
            ss += xr[j] * xr[j];
        ss /= n;
        ss += eps;
        ss = 1.0f / sqrtf(ss);
        for (int j = 0; j < n; j++)
            o[j] = weight[j] * (ss * xr[j]);
    }
}

static void ref_rope(float *x, const float *table, int rows, size_t row_stride, int n_heads,
                     int head_dim, simd_rope_style style)
{
    /* x (rows, row_stride) holding (n_heads, head_dim); table from simd_rope_table */
    int half = head_dim / 2;
    for (int r = 0; r < rows; r++) {
        const float *tc = table + (size_t)r * SIMD_ROPE_TABLE_FLOATS(head_dim), *ts = tc + head_dim;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)r * row_stride + (size_t)h * head_dim;
            for (int i = 0; i < half; i++) {
                bool neox = style == SIMD_ROPE_NEOX;
                float fcr = neox ? tc[i] : tc[2 * i], fci = neox ? ts[i] : ts[2 * i + 1];
                int a = neox ? i : 2 * i;
                int b = neox ? i + half : 2 * i + 1;
                float v0 = v[a], v1 = v[b];
                v[a] = v0 * fcr - v1 * fci;
                v[b] = v0 * fci + v1 * fcr;
            }
        }
    }
}

static void ref_silu_mul(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g * (1.0f / (1.0f + expf(-g))) * up[i];
    }
}

static void ref_gelu_mul(float *out, const float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        float u = 0.7978845608f * (g + 0.044715f * g * g * g); /* sqrt(2/pi) */
        out[i] = 0.5f * g * (1.0f + tanhf(u)) * up[i];
    }
}

static void ref_softmax(float *x, size_t n)
{
    float max_val = x[0];
    for (size_t i = 1; i < n; i++)
        if (x[i] > max_val)
            max_val = x[i];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max_val);
        sum += x[i];
    }
    for (size_t i = 0; i < n; i++)
        x[i] /= sum;
}

static void ref_f32_to_f16(uint16_t *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = simd_f32_to_f16_scalar(x[i]);
}

static void ref_f16_to_f32(float *out, const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = simd_f16_to_f32_scalar(x[i]);
}

const simd_kernels simd_ref_table = {
    .name = "ref",
    .rmsnorm = ref_rmsnorm,
    .rope = ref_rope,
    .silu_mul = ref_silu_mul,
    .gelu_mul = ref_gelu_mul,
    .softmax = ref_softmax,
    .f32_to_f16 = ref_f32_to_f16,
    .f16_to_f32 = ref_f16_to_f32,
    .attention = simd_ref_attention,
    .gemm_nt = simd_ref_gemm_nt,
    .gemm_nt_max_rows = 0, /* a dot product at a time: BLAS is always faster */
    .gemm_nn = simd_ref_gemm_nn,
    .quantize_act = simd_ref_quantize_act,
    .bf16_rows = simd_qpack_bf16_rows,
    .qgemm = simd_ref_qgemm,
};
