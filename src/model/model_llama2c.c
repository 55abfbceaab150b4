/* model_llama2c.c: reads a llama2.c checkpoint (7 x int32 header, then f32 tensors in
 * run.c's order) and its tokenizer.bin into a ts_model whose matrices are owned QT_F32
 * buffers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* A bounded cursor over the checkpoint: every read checks what is left in the file. */
typedef struct l2c_reader {
    FILE *f;
    const char *path;
    long remaining; /* bytes not read yet */
} l2c_reader;

/* Reads rows x cols floats into dst (row-major, with a row stride of dst_stride floats). */
static ts_status read_matrix(l2c_reader *r, float *dst, size_t rows, size_t cols,
                             size_t dst_stride, const char *what, ts_error *err)
{
    size_t bytes = rows * cols * sizeof(float);
    if ((unsigned long)r->remaining < bytes)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: truncated at tensor %s (%zu bytes needed, %ld left)",
                            r->path, what, bytes, r->remaining);
    for (size_t i = 0; i < rows; i++)
        if (fread(dst + i * dst_stride, sizeof(float), cols, r->f) != cols)
            return ts_error_set(err, TS_ERR_IO, "%s: read error in tensor %s", r->path, what);
    r->remaining -= (long)bytes;
    return TS_OK;
}

static ts_status skip_floats(l2c_reader *r, size_t n, const char *what, ts_error *err)
{
    size_t bytes = n * sizeof(float);
    if ((unsigned long)r->remaining < bytes || fseek(r->f, (long)bytes, SEEK_CUR) != 0)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: truncated at %s", r->path, what);
    r->remaining -= (long)bytes;
    return TS_OK;
}

/* The floats of a matrix the model owns (model_weights_alloc's store): writable. */
static float *owned_f32(const simd_qmat *m)
{
    return (float *)m->data;
}

/* The per-layer tensors, in run.c's order: all layers' wq, then all wk, ... */
static ts_status read_layers(l2c_reader *r, ts_model *m, ts_error *err)
{
    const ts_model_config *c = &m->cfg;
    model_weights *w = &m->w;
    size_t L = (size_t)c->n_layers, dim = (size_t)c->dim, ffn = (size_t)c->hidden_dim;
    size_t q_dim = (size_t)c->n_heads * c->head_dim, kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    ts_status st;
    char what[64];

#define READ(dst, rows, cols, name)                                              \
    do {                                                                         \
        snprintf(what, sizeof what, "%s (layer %zu)", name, l);                  \
        if ((st = read_matrix(r, dst, rows, cols, cols, what, err)) != TS_OK)   \
            return st;                                                           \
    } while (0)

    size_t l = 0;
    for (l = 0; l < L; l++) READ(w->rms_att + l * dim, 1, dim, "rms_att");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].wq), q_dim, dim, "wq");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].wk), kv_dim, dim, "wk");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].wv), kv_dim, dim, "wv");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].wo), dim, q_dim, "wo");
    for (l = 0; l < L; l++) READ(w->rms_ffn + l * dim, 1, dim, "rms_ffn");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].w1), ffn, dim, "w1");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].w2), dim, ffn, "w2");
    for (l = 0; l < L; l++) READ(owned_f32(&w->layers[l].w3), ffn, dim, "w3");
#undef READ
    return TS_OK;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

ts_status model_load_llama2c(const char *path, const char *tokenizer_path, ts_model **out,
                             ts_error *err)
{
    *out = NULL;
    ts_status st = TS_OK;
    l2c_reader r = {.f = fopen(path, "rb"), .path = path};
    ts_model *m = calloc(1, sizeof *m);
    if (!r.f) {
        st = ts_error_set(err, TS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!m) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto fail;
    }
    fseek(r.f, 0, SEEK_END);
    r.remaining = ftell(r.f);
    fseek(r.f, 0, SEEK_SET);

    int32_t hdr[7];
    if (r.remaining < (long)sizeof hdr || fread(hdr, sizeof hdr, 1, r.f) != 1) {
        st = ts_error_set(err, TS_ERR_FORMAT, "%s: too short for a llama2.c header", path);
        goto fail;
    }
    r.remaining -= (long)sizeof hdr;

    ts_model_config *c = &m->cfg;
    snprintf(c->arch, sizeof c->arch, "llama");
    snprintf(c->name, sizeof c->name, "%s", base_name(path));
    char *dot = strrchr(c->name, '.');
    if (dot)
        *dot = '\0';
    c->dim = hdr[0];
    c->hidden_dim = hdr[1];
    c->n_layers = hdr[2];
    c->n_heads = hdr[3];
    c->n_kv_heads = hdr[4];
    c->tied_output = hdr[5] > 0; /* a negative vocab size marks a separate classifier */
    c->vocab_size = hdr[5] == INT32_MIN ? 0 : abs(hdr[5]);
    c->context_len = hdr[6];
    c->head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->rope_freq_base = 10000.0f;
    c->rope_scale = 1.0f;
    c->rms_eps = 1e-5f;
    c->rope_neox = false;
    ts_error inner = {0};
    if ((st = model_config_validate(c, &inner)) != TS_OK) {
        st = ts_error_set(err, st, "%s: %s", path, inner.msg);
        goto fail;
    }
    /* Refuse sizes the file cannot hold before allocating for them. */
    size_t dim = (size_t)c->dim, vocab = (size_t)c->vocab_size, L = (size_t)c->n_layers;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim, ffn = (size_t)c->hidden_dim;
    size_t need = vocab * dim + L * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * ffn) + dim;
    if (need > (size_t)r.remaining / sizeof(float)) {
        st = ts_error_set(err, TS_ERR_FORMAT,
                          "%s: header promises %zu floats but the file holds %ld bytes",
                          path, need, r.remaining);
        goto fail;
    }
    if ((st = model_weights_alloc(&m->w, &m->cfg, true, err)) != TS_OK)
        goto fail;

    model_weights *w = &m->w;
    if ((st = read_matrix(&r, owned_f32(&w->tok_embd), vocab, dim, dim, "token_embedding",
                          err)) != TS_OK ||
        (st = read_layers(&r, m, err)) != TS_OK ||
        (st = read_matrix(&r, w->rms_final, 1, dim, dim, "rms_final", err)) != TS_OK ||
        (st = skip_floats(&r, (size_t)c->context_len * c->head_dim, "freq_cis", err)) != TS_OK)
        goto fail;
    if (!c->tied_output &&
        (st = read_matrix(&r, owned_f32(&w->output), vocab, dim, dim, "classifier", err)) != TS_OK)
        goto fail;
    model_rope_init(w, c);

    if ((st = ts_tokenizer_load_llama2c(tokenizer_path, c->vocab_size, &m->tokenizer, err)) != TS_OK)
        goto fail;
    fclose(r.f);
    *out = m;
    return TS_OK;

fail:
    if (r.f)
        fclose(r.f);
    ts_model_free(m);
    return st;
}
