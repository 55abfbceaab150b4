/* forward_ref.c: the single-sequence reference forward pass, after llama2.c's run.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward_ref.h"

/* out (d) = W (d, n) . x (n) */
static void matvec(float *out, const float *x, const float *w, int n, int d)
{
    for (int i = 0; i < d; i++) {
        float sum = 0.0f;
        for (int j = 0; j < n; j++)
            sum += w[(size_t)i * n + j] * x[j];
        out[i] = sum;
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

ts_status ref_forward_init(ref_forward *f, const ts_model *model, int max_pos, ts_error *err)
{
    const ts_model_config *c = &model->cfg;
    memset(f, 0, sizeof *f);
    if (max_pos <= 0 || max_pos > c->context_len)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "max_pos %d outside 1..%d", max_pos,
                            c->context_len);
    f->model = model;
    f->max_pos = max_pos;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    size_t cache = (size_t)c->n_layers * max_pos * kv_dim;
    f->x = calloc((size_t)c->dim, sizeof(float));
    f->xb = calloc(q_dim > (size_t)c->dim ? q_dim : (size_t)c->dim, sizeof(float));
    f->qkv = calloc((size_t)model_qkv_rows(c), sizeof(float));
    f->att = calloc((size_t)max_pos, sizeof(float));
    f->hb = calloc(2 * (size_t)c->hidden_dim, sizeof(float));
    f->key_cache = calloc(cache, sizeof(float));
    f->value_cache = calloc(cache, sizeof(float));
    f->logits = calloc((size_t)c->vocab_size, sizeof(float));
    if (!f->x || !f->xb || !f->qkv || !f->att || !f->hb || !f->key_cache || !f->value_cache ||
        !f->logits) {
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
    memset(f, 0, sizeof *f);
}

const float *ref_forward_token(ref_forward *f, int32_t token, int pos)
{
    const ts_model_config *c = &f->model->cfg;
    const model_weights *w = &f->model->w;
    int dim = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int ffn = c->hidden_dim, q_dim = nh * hd, kv_dim = nkv * hd, qkv_rows = model_qkv_rows(c);
    int group = nh / nkv;
    float *x = f->x, *xb = f->xb;

    memcpy(x, w->tok_embd + (size_t)token * dim, (size_t)dim * sizeof(float));

    for (int l = 0; l < c->n_layers; l++) {
        /* attention: norm, q/k/v, rope, cache, scores, weighted sum, projection */
        rmsnorm(xb, x, w->rms_att + (size_t)l * dim, dim, c->rms_eps);
        matvec(f->qkv, xb, w->wqkv + (size_t)l * qkv_rows * dim, dim, qkv_rows);
        float *q = f->qkv, *k = f->qkv + q_dim, *v = f->qkv + q_dim + kv_dim;
        rope(q, w->rope_freq, nh, hd, pos, c->rope_neox);
        rope(k, w->rope_freq, nkv, hd, pos, c->rope_neox);

        float *kc = f->key_cache + ((size_t)l * f->max_pos) * kv_dim;
        float *vc = f->value_cache + ((size_t)l * f->max_pos) * kv_dim;
        memcpy(kc + (size_t)pos * kv_dim, k, (size_t)kv_dim * sizeof(float));
        memcpy(vc + (size_t)pos * kv_dim, v, (size_t)kv_dim * sizeof(float));

        for (int h = 0; h < nh; h++) {
            const float *qh = q + (size_t)h * hd;
            int kvh = h / group;
            for (int t = 0; t <= pos; t++) {
                const float *kt = kc + (size_t)t * kv_dim + (size_t)kvh * hd;
                float score = 0.0f;
                for (int i = 0; i < hd; i++)
                    score += qh[i] * kt[i];
                f->att[t] = score / sqrtf((float)hd);
            }
            softmax(f->att, pos + 1);
            float *out = xb + (size_t)h * hd;
            memset(out, 0, (size_t)hd * sizeof(float));
            for (int t = 0; t <= pos; t++) {
                const float *vt = vc + (size_t)t * kv_dim + (size_t)kvh * hd;
                for (int i = 0; i < hd; i++)
                    out[i] += f->att[t] * vt[i];
            }
        }
        float *proj = f->qkv; /* q/k/v are no longer needed: reuse for the projection */
        matvec(proj, xb, w->wo + (size_t)l * dim * q_dim, q_dim, dim);
        for (int i = 0; i < dim; i++)
            x[i] += proj[i];

        /* feed-forward: norm, gate and up, silu(gate) * up, down, residual */
        rmsnorm(xb, x, w->rms_ffn + (size_t)l * dim, dim, c->rms_eps);
        matvec(f->hb, xb, w->w13 + (size_t)l * 2 * ffn * dim, dim, 2 * ffn);
        float *gate = f->hb, *up = f->hb + ffn;
        for (int i = 0; i < ffn; i++)
            gate[i] = gate[i] * (1.0f / (1.0f + expf(-gate[i]))) * up[i];
        float *down = f->qkv;
        matvec(down, gate, w->w2 + (size_t)l * dim * ffn, ffn, dim);
        for (int i = 0; i < dim; i++)
            x[i] += down[i];
    }

    rmsnorm(x, x, w->rms_final, dim, c->rms_eps);
    matvec(f->logits, x, w->output, dim, c->vocab_size);
    return f->logits;
}
