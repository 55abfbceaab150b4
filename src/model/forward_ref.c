/* forward_ref.c: the single-sequence reference forward pass, after llama2.c's run.c, on
 * weights of any type (each row decoded to f32 as it is used). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward_ref.h"

/* out (N) = W (N, K) . x (K), W in any type: each row is decoded to the exact f32 values
 * it stands for (into row, K floats of scratch; F32 rows are read in place), then summed
 * in order as llama2.c does. An empty W (a fused matrix's other part) writes nothing. */
static void matvec(float *out, const float *x, const simd_qmat *w, float *row)
{
    const uint8_t *data = w->data;
    for (int i = 0; i < w->N; i++) {
        const float *wr = row;
        if (w->type == QT_F32)
            wr = (const float *)(const void *)(data + (size_t)i * w->row_bytes);
        else
            qtype_dequant_row(row, data + (size_t)i * w->row_bytes, w->type, w->K);
        float sum = 0.0f;
        for (int j = 0; j < w->K; j++)
            sum += wr[j] * x[j];
        out[i] = sum;
    }
}

/* Rounds a K or V row, x (nkv, hd), to what a pool of type t stores, head by head. */
static void kv_round(float *x, simd_kv_type t, int nkv, int hd)
{
    int8_t q[SIMD_KV_Q8_GROUP];
    uint16_t h;
    for (int i = 0; t == SIMD_KV_F16 && i < nkv * hd; i++) {
        simd_kernels_for(SIMD_ISA_REF)->f32_to_f16(&h, x + i, 1);
        simd_kernels_for(SIMD_ISA_REF)->f16_to_f32(x + i, &h, 1);
    }
    for (int g = 0; t == SIMD_KV_Q8_0 && g < nkv; g++) /* a head's groups, one at a time */
        for (int d = 0; d < hd; d += SIMD_KV_Q8_GROUP) {
            float *xg = x + (size_t)g * hd + d;
            int n = hd - d < SIMD_KV_Q8_GROUP ? hd - d : SIMD_KV_Q8_GROUP;
            simd_kv_q8_quantize(q, &h, xg, n);
            simd_kv_q8_dequantize(xg, q, &h, n);
        }
}

static void rmsnorm(float *out, const float *x, const float *weight, int n, float eps)
{
    float ss = 0.0f;
    for (int j = 0; j < n; j++)
        ss += x[j] * x[j];
    ss /= n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int j = 0; j < n; j++)
        out[j] = weight[j] * (ss * x[j]);
}

static void softmax(float *x, int n)
{
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max)
            max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++)
        x[i] /= sum;
}

/* Rotates n_heads heads of vec (n_heads * hd) for position pos; pair i turns by
 * pos * freq[i] (hd/2, model_rope_init's table). */
static void rope(float *vec, const float *freq, int n_heads, int hd, int pos, bool neox)
{
    for (int h = 0; h < n_heads; h++) {
        float *v = vec + (size_t)h * hd;
        for (int i = 0; i < hd; i += 2) {
            float val = (float)pos * freq[i / 2];
            float fcr = cosf(val), fci = sinf(val);
            int a = neox ? i / 2 : i, b = neox ? i / 2 + hd / 2 : i + 1;
            float v0 = v[a], v1 = v[b];
            v[a] = v0 * fcr - v1 * fci;
            v[b] = v0 * fci + v1 * fcr;
        }
    }
}

static float gelu_tanh(float g)
{
    return 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g)));
}

static float softcap(float x, float cap)
{
    return cap > 0.0f ? cap * tanhf(x / cap) : x;
}

/* out (dim) = down(act(gate . xb) * (up . xb)): one feed-forward block (or one expert)
 * ffn wide on f->xb; a fused gate (up empty) fills both halves of f->hb. */
static void ffn_block(ref_forward *f, const simd_qmat *gate_w, const simd_qmat *up_w,
                      const simd_qmat *down_w, int ffn, float *out)
{
    const ts_model_config *c = &f->model->cfg;
    float *gate = f->hb, *up = f->hb + ffn;
    matvec(gate, f->xb, gate_w, f->wrow);
    matvec(up, f->xb, up_w, f->wrow);
    for (int i = 0; i < ffn; i++)
        gate[i] = (c->ffn_act == TS_FFN_GELU_TANH ? gelu_tanh(gate[i])
                                                  : gate[i] * (1.0f / (1.0f + expf(-gate[i])))) *
                  up[i];
    matvec(out, gate, down_w, f->wrow);
}

/* out (dim) = the token's mixture: the router's softmax over the experts, the
 * n_experts_used most probable (ties to the lower index) with their probabilities
 * renormalised (unless experts_unnormed), each expert's block weighted by its share,
 * summed best first; then the shared expert's block, scaled by sigmoid(gate_inp . xb),
 * added where the model has one. */
static void moe(ref_forward *f, const model_layer *ly, float *out)
{
    const ts_model_config *c = &f->model->cfg;
    int E = c->n_experts, dim = c->dim;
    float *p = f->router, *y = f->expert_out;
    matvec(p, f->xb, &ly->router, f->wrow);
    softmax(p, E);
    int chosen[MODEL_REF_MAX_USED];
    float weight[MODEL_REF_MAX_USED], sum = 0.0f;
    for (int j = 0; j < c->n_experts_used; j++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            bool taken = false;
            for (int i = 0; i < j; i++)
                taken |= chosen[i] == e;
            if (!taken && (best < 0 || p[e] > p[best]))
                best = e;
        }
        chosen[j] = best;
        weight[j] = p[best];
        sum += p[best];
    }
    if (c->experts_unnormed)
        sum = 1.0f;
    for (int j = 0; j < c->n_experts_used; j++) {
        const simd_qmat *ex = ly->experts + (size_t)chosen[j] * MODEL_EXPERT_MATRICES;
        ffn_block(f, &ex[MODEL_EXPERT_GATE], &ex[MODEL_EXPERT_UP], &ex[MODEL_EXPERT_DOWN],
                  c->hidden_dim, y);
        for (int i = 0; i < dim; i++)
            out[i] = j == 0 ? weight[j] / sum * y[i] : out[i] + weight[j] / sum * y[i];
    }
    if (c->shared_ffn_dim == 0)
        return;
    float g;
    matvec(&g, f->xb, &ly->shexp_gate_inp, f->wrow);
    ffn_block(f, &ly->shexp_gate, &ly->shexp_up, &ly->shexp_down, c->shared_ffn_dim, y);
    float scale = 1.0f / (1.0f + expf(-g));
    for (int i = 0; i < dim; i++)
        out[i] += scale * y[i];
}

ts_status ref_forward_init(ref_forward *f, const ts_model *model, int max_pos, ts_error *err)
{
    const ts_model_config *c = &model->cfg;
    memset(f, 0, sizeof *f);
    if (max_pos <= 0 || max_pos > c->context_len)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "max_pos %d outside 1..%d", max_pos,
                            c->context_len);
    if (c->n_experts_used > MODEL_REF_MAX_USED)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "the reference pass takes at most %d "
                            "experts a token", MODEL_REF_MAX_USED);
    f->model = model;
    f->max_pos = max_pos;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t cache = (size_t)c->n_layers * max_pos * kv_dim;
    size_t qkv = (size_t)model_qkv_rows(c);
    f->x = calloc((size_t)c->dim, sizeof(float));
    f->xb = calloc(q_dim > (size_t)c->dim ? q_dim : (size_t)c->dim, sizeof(float));
    f->qkv = calloc(qkv > (size_t)c->dim ? qkv : (size_t)c->dim, sizeof(float));
    f->att = calloc((size_t)max_pos, sizeof(float));
    size_t ffn = (size_t)(c->shared_ffn_dim > c->hidden_dim ? c->shared_ffn_dim : c->hidden_dim);
    f->hb = calloc(2 * ffn, sizeof(float));
    f->key_cache = calloc(cache, sizeof(float));
    f->value_cache = calloc(cache, sizeof(float));
    f->logits = calloc((size_t)c->vocab_size, sizeof(float));
    f->router = calloc((size_t)(c->n_experts > 0 ? c->n_experts : 1), sizeof(float));
    f->expert_out = calloc((size_t)c->dim, sizeof(float));
    size_t max_k = (size_t)c->dim > q_dim ? (size_t)c->dim : q_dim;
    max_k = ffn > max_k ? ffn : max_k;
    f->wrow = calloc(max_k, sizeof(float));
    if (!f->x || !f->xb || !f->qkv || !f->att || !f->hb || !f->key_cache || !f->value_cache ||
        !f->logits || !f->wrow || !f->router || !f->expert_out) {
        ref_forward_free(f);
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate reference state for %d positions",
                            max_pos);
    }
    return TS_OK;
}

void ref_forward_free(ref_forward *f)
{
    free(f->x);
    free(f->xb);
    free(f->qkv);
    free(f->att);
    free(f->hb);
    free(f->key_cache);
    free(f->value_cache);
    free(f->logits);
    free(f->wrow);
    free(f->router);
    free(f->expert_out);
    memset(f, 0, sizeof *f);
}

const float *ref_forward_token(ref_forward *f, int32_t token, int pos)
{
    const ts_model_config *c = &f->model->cfg;
    const model_weights *w = &f->model->w;
    int dim = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int q_dim = nh * hd, kv_dim = nkv * hd;
    int group = nh / nkv;
    float *x = f->x, *xb = f->xb;

    qtype_dequant_row(x, (const uint8_t *)w->tok_embd.data + (size_t)token * w->tok_embd.row_bytes,
                      w->tok_embd.type, dim);
    for (int i = 0; c->embd_scaled && i < dim; i++)
        x[i] *= sqrtf((float)dim);
    int qkv_rows = model_qkv_rows(c);

    for (int l = 0; l < c->n_layers; l++) {
        /* attention: norm, q/k/v (+ biases, per-head norms), rope, cache, scores, weighted
         * sum, projection (+ post-norm) */
        rmsnorm(xb, x, w->rms_att + (size_t)l * dim, dim, c->rms_eps);
        const model_layer *ly = &w->layers[l];
        float *q = f->qkv, *k = f->qkv + q_dim, *v = f->qkv + q_dim + kv_dim;
        matvec(q, xb, &ly->wq, f->wrow); /* a fused [Q; K; V] fills all three */
        matvec(k, xb, &ly->wk, f->wrow);
        matvec(v, xb, &ly->wv, f->wrow);
        for (int i = 0; w->qkv_bias && i < qkv_rows; i++)
            f->qkv[i] += w->qkv_bias[(size_t)l * qkv_rows + i];
        for (int h = 0; c->qk_norm && h < nh; h++)
            rmsnorm(q + h * hd, q + h * hd, w->q_norm + (size_t)l * hd, hd, c->rms_eps);
        for (int h = 0; c->qk_norm && h < nkv; h++)
            rmsnorm(k + h * hd, k + h * hd, w->k_norm + (size_t)l * hd, hd, c->rms_eps);
        const float *freq = model_rope_freq(w, c, l);
        rope(q, freq, nh, hd, pos, c->rope_neox);
        rope(k, freq, nkv, hd, pos, c->rope_neox);
        int window = ts_model_layer_window(c, l);
        int first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
        float scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)hd);

        float *kc = f->key_cache + ((size_t)l * f->max_pos) * kv_dim;
        float *vc = f->value_cache + ((size_t)l * f->max_pos) * kv_dim;
        memcpy(kc + (size_t)pos * kv_dim, k, (size_t)kv_dim * sizeof(float));
        memcpy(vc + (size_t)pos * kv_dim, v, (size_t)kv_dim * sizeof(float));
        kv_round(kc + (size_t)pos * kv_dim, f->kv_type, nkv, hd);
        kv_round(vc + (size_t)pos * kv_dim, f->kv_type, nkv, hd);

        for (int h = 0; h < nh; h++) {
            const float *qh = q + (size_t)h * hd;
            int kvh = h / group;
            for (int t = first; t <= pos; t++) {
                const float *kt = kc + (size_t)t * kv_dim + (size_t)kvh * hd;
                float score = 0.0f;
                for (int i = 0; i < hd; i++)
                    score += qh[i] * kt[i];
                f->att[t] = softcap(score * scale, c->attn_softcap);
            }
            softmax(f->att + first, pos + 1 - first);
            float *out = xb + (size_t)h * hd;
            memset(out, 0, (size_t)hd * sizeof(float));
            for (int t = first; t <= pos; t++) {
                const float *vt = vc + (size_t)t * kv_dim + (size_t)kvh * hd;
                for (int i = 0; i < hd; i++)
                    out[i] += f->att[t] * vt[i];
            }
        }
        float *proj = f->qkv; /* q/k/v are no longer needed: reuse for the projection */
        matvec(proj, xb, &ly->wo, f->wrow);
        if (w->rms_post_att)
            rmsnorm(proj, proj, w->rms_post_att + (size_t)l * dim, dim, c->rms_eps);
        for (int i = 0; i < dim; i++)
            x[i] += proj[i];

        /* feed-forward: norm, gate and up, act(gate) * up, down (+ post-norm), residual;
         * or the weighted sum of that through the token's experts */
        rmsnorm(xb, x, w->rms_ffn + (size_t)l * dim, dim, c->rms_eps);
        float *down = f->qkv;
        if (c->n_experts > 0)
            moe(f, ly, down);
        else
            ffn_block(f, &ly->w1, &ly->w3, &ly->w2, c->hidden_dim, down);
        if (w->rms_post_ffn)
            rmsnorm(down, down, w->rms_post_ffn + (size_t)l * dim, dim, c->rms_eps);
        for (int i = 0; i < dim; i++)
            x[i] += down[i];
    }

    rmsnorm(x, x, w->rms_final, dim, c->rms_eps);
    matvec(f->logits, x, &w->output, f->wrow);
    for (int i = 0; c->final_softcap > 0.0f && i < c->vocab_size; i++)
        f->logits[i] = softcap(f->logits[i], c->final_softcap);
    return f->logits;
}
