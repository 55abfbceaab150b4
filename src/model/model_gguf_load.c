/* model_gguf_load.c: ts_model from a GGUF file, kept mapped, and back
 * (model_load_gguf behind ts_model_load_with, and ts_model_save_gguf). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "model/model_gguf.h"

/* The file name without folders or extension, to name models that carry no general.name. */
static void base_name(char *out, size_t cap, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, b, n);
    out[n] = '\0';
}

static ts_status read_chat_template(ts_model *m, const gguf_file *f, ts_error *err)
{
    gguf_str s;
    ts_status st = gguf_get_str(f, "tokenizer.chat_template", &s, err);
    if (st == TS_ERR_NOT_FOUND)
        return TS_OK;
    if (st != TS_OK)
        return st;
    /* a C string would end the template at its first NUL and render what is before it */
    const char *nul = memchr(s.ptr, '\0', (size_t)s.len);
    if (nul)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "tokenizer.chat_template holds a NUL byte at offset %zu of %llu",
                            (size_t)(nul - s.ptr), (unsigned long long)s.len);
    if (!(m->chat_template = malloc((size_t)s.len + 1)))
        return ts_error_set(err, TS_ERR_NOMEM, "chat template of %llu bytes",
                            (unsigned long long)s.len);
    memcpy(m->chat_template, s.ptr, (size_t)s.len);
    m->chat_template[s.len] = '\0';
    return TS_OK;
}

/* Refuses a config whose arrays the file's tensors cannot fill, before allocating them:
 * a few bytes of metadata must not make the loader ask for gigabytes. The loader allocates
 * the embedding's worth of logits and, per layer, the norms and biases it converts to f32;
 * each of those values comes from one element of some tensor, so the elements of all
 * tensors bound what a loadable file needs; and as the reader refuses tensors that share
 * bytes, those elements are bounded in turn by the file's size (a few elements per byte
 * for the densest quantisations). The matrices are mapped, not allocated: a missing one
 * is left to the weights' reader, which names it. */
static ts_status check_weights_fit(const ts_model_config *c, const gguf_file *f,
                                   const char *name, ts_error *err)
{
    /* Validated sizes keep this far below 2^64. */
    uint64_t dim = (uint64_t)c->dim, L = (uint64_t)c->n_layers, hd = (uint64_t)c->head_dim;
    /* a mixture's expert records: each expert matrix has dim rows or inputs */
    uint64_t per_layer = 2 * dim + (c->post_norms ? 2 * dim : 0) + (c->qk_norm ? 2 * hd : 0) +
                         (c->qkv_bias ? (uint64_t)model_qkv_rows(c) : 0) +
                         (uint64_t)c->n_experts * MODEL_EXPERT_MATRICES * dim;
    uint64_t need = (uint64_t)c->vocab_size * dim + dim + L * per_layer;
    uint64_t have = 0;
    for (uint64_t i = 0; i < f->n_tensors && have < need; i++)
        have = f->tensors[i].n_elems > UINT64_MAX - have ? UINT64_MAX
                                                         : have + f->tensors[i].n_elems;
    if (have < need)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "%s: the config needs %llu weights but the file's tensors hold %llu",
                            name, (unsigned long long)need, (unsigned long long)have);
    return TS_OK;
}

ts_status model_gguf_load_parsed(const gguf_file *f, const char *name, ts_model **out,
                                 ts_error *err)
{
    *out = NULL;
    tokenizer_vocab v = {0};
    ts_model *m = calloc(1, sizeof *m);
    if (!m)
        return ts_error_set(err, TS_ERR_NOMEM, "model %s", name);
    ts_status st;
    if ((st = model_gguf_read_config(&m->cfg, f, name, err)) != TS_OK ||
        (st = model_config_validate(&m->cfg, err)) != TS_OK ||
        (st = vocab_read_gguf(&v, f, err)) != TS_OK)
        goto fail;
    if (v.n_tokens != m->cfg.vocab_size) {
        st = ts_error_set(err, TS_ERR_FORMAT, "%s: %d tokens in the vocabulary, %d in the model",
                          name, v.n_tokens, m->cfg.vocab_size);
        goto fail;
    }
    if ((st = check_weights_fit(&m->cfg, f, name, err)) != TS_OK ||
        (st = model_gguf_read_weights(&m->w, &m->cfg, f, err)) != TS_OK)
        goto fail;
    model_rope_init(&m->w, &m->cfg);
    if ((st = read_chat_template(m, f, err)) != TS_OK ||
        (st = tokenizer_create(&v, &m->tokenizer, err)) != TS_OK)
        goto fail;
    vocab_clear(&v);
    *out = m;
    return TS_OK;
fail:
    vocab_clear(&v);
    ts_model_free(m);
    return st;
}

/* Applies opts to the model's mapping: huge-page advice first (mlock faults the pages in),
 * then the lock, which the model undoes when freed. */
static ts_status apply_map_opts(ts_model *m, const ts_model_load_opts *opts, const char *path,
                                ts_error *err)
{
    const gguf_file *f = m->file;
    if (!f->map)
        return TS_OK;
#ifdef MADV_HUGEPAGE
    if (opts->hugepages)
        (void)madvise(f->map, f->size, MADV_HUGEPAGE); /* advice: a refusal changes nothing */
#endif
    if (opts->mlock) {
        if (mlock(f->map, f->size) != 0) {
            struct rlimit lim = {0};
            getrlimit(RLIMIT_MEMLOCK, &lim);
            return ts_error_set(err, TS_ERR_IO,
                                "cannot lock %s (%zu bytes) in RAM: %s (RLIMIT_MEMLOCK %llu "
                                "bytes; raise it with ulimit -l)", path, f->size,
                                strerror(errno), (unsigned long long)lim.rlim_cur);
        }
        m->locked_bytes = f->size;
    }
    return TS_OK;
}

ts_status model_load_gguf(const char *path, const ts_model_load_opts *opts, ts_model **out,
                          ts_error *err)
{
    *out = NULL;
    gguf_file *f = NULL;
    char name[64];
    ts_status st = gguf_open(path, &f, err);
    if (st != TS_OK)
        return st;
    base_name(name, sizeof name, path);
    if ((st = model_gguf_load_parsed(f, name, out, err)) != TS_OK) {
        gguf_close(f);
        return st;
    }
    (*out)->file = f; /* the model's matrices point into it */
    if ((st = apply_map_opts(*out, opts, path, err)) != TS_OK) {
        ts_model_free(*out);
        *out = NULL;
        return st;
    }
    model_pack(*out, opts->pack); /* after the lock: a locked mapping keeps its pages */
    return TS_OK;
}

ts_status ts_model_save_gguf(const ts_model *m, const char *path, ts_error *err)
{
    const tokenizer_vocab *v = tokenizer_get_vocab(m->tokenizer);
    return model_gguf_write(path, &m->cfg, &m->w, v, m->chat_template, err);
}
