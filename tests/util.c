/* util.c: file and path helpers for the tests, and models they share. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "model/forward_ref.h"
#include "model/model_gguf.h"
#include "model/synth.h"
#include "tokenizer/vocab.h"
#include "util.h"

const char *tu_shared(const char *rel)
{
    static char buf[4096];
    const char *dir = getenv("TESSERA_SHARED");
    snprintf(buf, sizeof buf, "%s/%s", dir && *dir ? dir : TS_SHARED_DIR, rel);
    return buf;
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *data = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(f);
    if (data) {
        data[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return data;
}

char *tu_run(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = calloc(1, 1 << 20);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, p);
    buf[n] = '\0';
    *status = WEXITSTATUS(pclose(p));
    return buf;
}

double tu_cosine(const float *a, const float *b, int n)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

const char *tu_tmp_path(const char *name)
{
    static char buf[4096];
    const char *dir = getenv("TESSERA_BUILD_DIR"); /* binaries run elsewhere (a bench host) */
    dir = dir && *dir ? dir : TS_BUILD_DIR;
    snprintf(buf, sizeof buf, "%s/tmp", dir);
    mkdir(buf, 0755);
    snprintf(buf, sizeof buf, "%s/tmp/%d-%s", dir, (int)getpid(), name);
    return buf;
}

long tu_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

void tu_stories_vocab(tokenizer_vocab *v)
{
    gguf_file *f = NULL;
    ts_error err = {0};
    if (gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &f, &err) != TS_OK ||
        vocab_read_gguf(v, f, &err) != TS_OK)
        fail_msg("stories260K's vocabulary: %s", err.msg);
    gguf_close(f);
}

ts_model *tu_synth_model(const ts_model_config *c, const char *type, const tokenizer_vocab *v,
                         const char *name)
{
    const char *path = tu_tmp_path(name);
    ts_error err = {0};
    if (model_synth_write(path, c, type, v, 1, &err) != TS_OK)
        fail_msg("synth %s: %s", name, err.msg);
    ts_model *m = NULL;
    if (ts_model_load(path, NULL, &m, &err) != TS_OK)
        fail_msg("load %s: %s", name, err.msg);
    unlink(path);
    return m;
}

void tu_assert_same_vocab(const tokenizer_vocab *a, const tokenizer_vocab *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->n_tokens, b->n_tokens);
    for (int i = 0; i < a->n_tokens; i++) {
        assert_int_equal(a->tokens[i].len, b->tokens[i].len);
        assert_memory_equal(a->tokens[i].text, b->tokens[i].text, a->tokens[i].len);
        assert_true(a->tokens[i].score == b->tokens[i].score);
        assert_int_equal(a->tokens[i].type, b->tokens[i].type);
    }
    assert_int_equal(a->bos_id, b->bos_id);
    assert_int_equal(a->eos_id, b->eos_id);
    assert_int_equal(a->unk_id, b->unk_id);
    assert_int_equal(a->pad_id, b->pad_id);
    assert_int_equal(a->add_bos, b->add_bos);
    assert_int_equal(a->add_space_prefix, b->add_space_prefix);
}

void tu_write_vocab_gguf(const tokenizer_vocab *v, const char *path)
{
    gguf_writer *g = NULL;
    ts_error err = {0};
    if (gguf_writer_create(32, &g, &err) != TS_OK || model_gguf_add_vocab(g, v, &err) != TS_OK ||
        gguf_writer_write_file(g, path, &err) != TS_OK)
        fail_msg("vocabulary GGUF %s: %s", path, err.msg);
    gguf_writer_free(g);
}

ts_status tu_tokenizer_via_gguf(const tokenizer_vocab *v, const char *name, ts_tokenizer **tok,
                                ts_error *err)
{
    const char *path = tu_tmp_path(name);
    tu_write_vocab_gguf(v, path);
    ts_status st = ts_tokenizer_load_gguf(path, tok, err);
    remove(path);
    return st;
}

ts_model *tu_stories_with_rope(const float *factors, float rope_scale)
{
    gguf_file *f = NULL;
    ts_model_config c;
    model_weights w = {0};
    tokenizer_vocab v = {0};
    ts_error err = {0};
    if (gguf_open(tu_shared("models/stories260K/stories260K.gguf"), &f, &err) != TS_OK ||
        model_gguf_read_config(&c, f, "stories260K", &err) != TS_OK ||
        model_gguf_read_weights(&w, &c, f, &err) != TS_OK ||
        vocab_read_gguf(&v, f, &err) != TS_OK)
        fail_msg("stories260K: %s", err.msg);
    assert_false(c.rope_factors); /* the file has none to replace */
    size_t half = (size_t)c.head_dim / 2;
    if (factors) {
        c.rope_factors = true;
        assert_non_null(w.rope_factors = malloc(half * sizeof(float)));
        memcpy(w.rope_factors, factors, half * sizeof(float));
    }
    c.rope_scale = rope_scale;
    const char *path = tu_tmp_path("stories-rope.gguf");
    if (model_gguf_write(path, &c, &w, &v, NULL, &err) != TS_OK)
        fail_msg("writing %s: %s", path, err.msg);
    model_weights_free(&w);
    gguf_close(f); /* after the writer: w's matrices point into it */
    vocab_clear(&v);
    ts_model *m = NULL;
    if (ts_model_load(path, NULL, &m, &err) != TS_OK)
        fail_msg("loading %s: %s", path, err.msg);
    remove(path);
    return m;
}

float *tu_reference_logits(const struct ts_model *m, const int32_t *tokens, int n)
{
    int vocab = m->cfg.vocab_size;
    ref_forward rf;
    assert_int_equal(ref_forward_init(&rf, m, n, NULL), TS_OK);
    float *out = malloc((size_t)n * vocab * sizeof(float));
    assert_non_null(out);
    for (int p = 0; p < n; p++)
        memcpy(out + (size_t)p * vocab, ref_forward_token(&rf, tokens[p], p),
               (size_t)vocab * sizeof(float));
    ref_forward_free(&rf);
    return out;
}

float *tu_dequant_matrix(const simd_qmat *m)
{
    float *out = malloc((size_t)m->N * m->K * sizeof(float));
    assert_non_null(out);
    for (int n = 0; n < m->N; n++)
        qtype_dequant_row(out + (size_t)n * m->K, (const char *)m->data + (size_t)n * m->row_bytes,
                          m->type, m->K);
    return out;
}

struct tu_decoded {
    simd_qmat *saved; /* (model_matrices) the matrices as they were */
    float **rows;     /* (model_matrices) their decoded rows, NULL for f32 and empty ones */
};

tu_decoded *tu_decode_matrices(struct ts_model *m)
{
    int n = model_matrices(&m->w);
    tu_decoded *d = malloc(sizeof *d);
    assert_non_null(d);
    d->saved = malloc((size_t)n * sizeof *d->saved);
    d->rows = calloc((size_t)n, sizeof *d->rows);
    assert_non_null(d->saved);
    assert_non_null(d->rows);
    for (int i = 0; i < n; i++) {
        simd_qmat *q = model_matrix(&m->w, i);
        d->saved[i] = *q;
        if (q->N == 0 || q->type == QT_F32)
            continue;
        d->rows[i] = tu_dequant_matrix(q);
        q->type = QT_F32;
        q->data = d->rows[i];
        q->row_bytes = (size_t)q->K * sizeof(float);
    }
    return d;
}

void tu_restore_matrices(struct ts_model *m, tu_decoded *d)
{
    for (int i = 0; i < model_matrices(&m->w); i++) {
        *model_matrix(&m->w, i) = d->saved[i];
        free(d->rows[i]);
    }
    free(d->saved);
    free(d->rows);
    free(d);
}

void tu_assert_same_matrix(const simd_qmat *a, const simd_qmat *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->N, b->N);
    assert_int_equal(a->K, b->K);
    assert_int_equal(a->row_bytes, b->row_bytes);
    assert_memory_equal(a->data, b->data, (size_t)a->N * a->row_bytes);
}
