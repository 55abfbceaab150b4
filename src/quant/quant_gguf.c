/* quant_gguf.c: a whole GGUF file quantized to an ftype: the metadata copied, each tensor
 * given its mix type and produced row by row while the writer streams it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/strbuf.h"
#include "quant.h"
#include "quant/quantize.h"

/* llama.cpp's general.quantization_version for files holding quantized tensors. */
enum { QUANT_VERSION = 2 };

/* ---- metadata ---- */

/* The value's bytes as GGUF encodes them after its type (host little-endian). */
static bool encode_value(strbuf *b, const gguf_value *v)
{
    switch (v->type) {
    case GGUF_TYPE_STRING:
        return strbuf_add(b, &v->v.str.len, 8) && strbuf_add(b, v->v.str.ptr, (size_t)v->v.str.len);
    case GGUF_TYPE_ARRAY: {
        uint32_t elem = (uint32_t)v->v.arr.elem;
        if (!strbuf_add(b, &elem, 4) || !strbuf_add(b, &v->v.arr.n, 8))
            return false;
        if (!v->v.arr.items) {
            size_t n = (size_t)(v->v.arr.n * gguf_type_size(v->v.arr.elem));
            return strbuf_add(b, v->v.arr.raw, n);
        }
        for (uint64_t i = 0; i < v->v.arr.n; i++)
            if (!encode_value(b, &v->v.arr.items[i]))
                return false;
        return true;
    }
    case GGUF_TYPE_FLOAT32: {
        float f = (float)v->v.f64;
        return strbuf_add(b, &f, 4);
    }
    case GGUF_TYPE_FLOAT64:
        return strbuf_add(b, &v->v.f64, 8);
    case GGUF_TYPE_BOOL: {
        uint8_t x = v->v.b;
        return strbuf_add(b, &x, 1);
    }
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return strbuf_add(b, &v->v.i64, gguf_type_size(v->type));
    default: /* unsigned integers */
        return strbuf_add(b, &v->v.u64, gguf_type_size(v->type));
    }
}

static ts_status copy_metadata(gguf_writer *w, const gguf_file *in, quant_ftype f,
                               ts_error *err)
{
    strbuf b = {0};
    char key[512];
    for (uint64_t i = 0; i < in->n_kv; i++) {
        const gguf_kv *kv = &in->kv[i];
        if (kv->key.len >= sizeof key) {
            strbuf_free(&b);
            return ts_error_set(err, TS_ERR_TOO_LONG, "metadata key of %llu bytes",
                                (unsigned long long)kv->key.len);
        }
        memcpy(key, kv->key.ptr, (size_t)kv->key.len);
        key[kv->key.len] = '\0';
        if (!strcmp(key, "general.file_type") || !strcmp(key, "general.quantization_version"))
            continue;
        strbuf_reset(&b);
        if (!encode_value(&b, &kv->val)) {
            strbuf_free(&b);
            return ts_error_set(err, TS_ERR_NOMEM, "metadata '%s'", key);
        }
        gguf_writer_add_raw(w, key, kv->val.type, b.s, b.len);
    }
    strbuf_free(&b);
    gguf_writer_add_u32(w, "general.file_type", (uint32_t)f);
    uint32_t base = quant_ftype_base(f);
    if (base != QT_F32 && base != QT_F16 && base != QT_BF16)
        gguf_writer_add_u32(w, "general.quantization_version", QUANT_VERSION);
    return TS_OK;
}

/* ---- model facts the mix rules need ---- */

static bool str_eq(gguf_str s, const char *c)
{
    return gguf_str_eq(s, c);
}

static bool str_ends(gguf_str s, const char *suffix)
{
    size_t k = strlen(suffix);
    return s.len >= k && !memcmp(s.ptr + s.len - k, suffix, k);
}

static void model_info(quant_model_info *m, const gguf_file *in)
{
    memset(m, 0, sizeof *m);
    m->n_gqa = 1;
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        gguf_str name = in->tensors[i].name;
        m->n_layers += str_ends(name, "attn_v.weight");
        m->has_output |= str_eq(name, "output.weight");
    }
    gguf_str arch = {0};
    char key[160];
    int64_t heads = 0, kv_heads = 0;
    if (gguf_get_str(in, "general.architecture", &arch, NULL) == TS_OK && arch.len < 64) {
        snprintf(key, sizeof key, "%.*s.attention.head_count", (int)arch.len, arch.ptr);
        gguf_get_i64(in, key, &heads, NULL);
        snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)arch.len, arch.ptr);
        if (gguf_get_i64(in, key, &kv_heads, NULL) != TS_OK)
            kv_heads = heads;
    }
    if (heads > 0 && kv_heads > 0)
        m->n_gqa = (int)(heads / kv_heads);
    /* llama.cpp's 70B: 80 Llama layers with grouped-query attention (without it, 65B) */
    m->is_70b = str_eq(arch, "llama") && m->n_layers == 80 && m->n_gqa > 1;
}

/* ---- tensors ---- */

typedef struct quant_job {
    const gguf_file *in;
    const gguf_tensor *t;
    uint32_t type;       /* output type */
    uint64_t in_row;     /* bytes of one input row */
    uint64_t out_row;    /* bytes of one output row */
    uint64_t index, n;   /* for progress */
    char name[256];
    quant_progress progress;
    void *user;
} quant_job;

static void row_to_f32(float *out, const uint8_t *row, uint32_t type, uint64_t k)
{
    if (type == QT_F32) {
        memcpy(out, row, (size_t)k * sizeof *out);
    } else if (type == QT_F16) {
        for (uint64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = gguf_f16_to_f32(h);
        }
    } else { /* BF16 */
        for (uint64_t i = 0; i < k; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            uint32_t u = (uint32_t)h << 16;
            memcpy(&out[i], &u, 4);
        }
    }
}

/* Lets the kernel drop the mapped input pages of rows already quantized (whole pages
 * inside [p, p + n) only), so the process's RSS holds about one chunk of the input rather
 * than all of it: the mapping is read-only and private, so a later touch reads the file
 * again. A buffer that is not a mapping (gguf_open_buffer) is left alone. */
static void release_input(const gguf_file *in, const uint8_t *p, uint64_t n)
{
    if (!in->map)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static ts_status fill_rows(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                           ts_error *err)
{
    const quant_job *j = user;
    uint64_t k = j->t->ne[0];
    if (row0 == 0 && j->progress)
        j->progress(j->user, j->index, j->n, j->name, j->type);
    bool ok = true;
    uint64_t bad_row = UINT64_MAX; /* the first row holding a NaN or infinity */
#pragma omp parallel reduction(&& : ok)
    {
        float *buf = malloc((size_t)k * sizeof *buf);
        ok = buf != NULL;
#pragma omp for schedule(dynamic, 4) reduction(min : bad_row)
        for (long long r = 0; r < (long long)n_rows; r++) {
            if (!buf)
                continue;
            uint64_t row = row0 + (uint64_t)r;
            row_to_f32(buf, j->t->data + row * j->in_row, j->t->type, k);
            bool finite = true;
            for (uint64_t i = 0; i < k; i++)
                finite &= isfinite(buf[i]) != 0;
            if (!finite && row < bad_row)
                bad_row = row;
            quant_row(dst + (uint64_t)r * j->out_row, buf, j->type, (int64_t)k);
        }
        free(buf);
    }
    release_input(j->in, j->t->data + row0 * j->in_row, n_rows * j->in_row);
    if (!ok)
        return ts_error_set(err, TS_ERR_NOMEM, "a row of %llu floats", (unsigned long long)k);
    if (bad_row != UINT64_MAX)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s' holds a NaN or infinity in row %llu",
                            j->name, (unsigned long long)bad_row);
    return TS_OK;
}

ts_status quant_gguf_write(const char *path, const gguf_file *in, quant_ftype f,
                           quant_progress progress, void *user, ts_error *err)
{
    gguf_writer *w = NULL;
    quant_job *jobs = NULL;
    quant_model_info m;
    ts_status st = TS_OK;
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const gguf_tensor *t = &in->tensors[i];
        if (t->type != QT_F32 && t->type != QT_F16 && t->type != QT_BF16) {
            const char *tn = qtype_name(t->type);
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "tensor '%.*s' has type %s: quantize "
                                "takes F32, F16 or BF16 tensors", (int)t->name.len,
                                t->name.ptr, tn ? tn : "unknown");
        }
    }
    model_info(&m, in);
    if (!(jobs = calloc(in->n_tensors ? in->n_tensors : 1, sizeof *jobs)))
        return ts_error_set(err, TS_ERR_NOMEM, "%llu tensors", (unsigned long long)in->n_tensors);
    if ((st = gguf_writer_create(in->alignment, &w, err)) != TS_OK)
        goto done;
    if ((st = copy_metadata(w, in, f, err)) != TS_OK)
        goto done;
    for (uint64_t i = 0; i < in->n_tensors; i++) {
        const gguf_tensor *t = &in->tensors[i];
        quant_job *j = &jobs[i];
        if (t->name.len >= sizeof j->name || t->n_elems == 0) {
            st = ts_error_set(err, TS_ERR_FORMAT, "tensor %llu: empty, or a name of %llu bytes",
                              (unsigned long long)i, (unsigned long long)t->name.len);
            goto done;
        }
        memcpy(j->name, t->name.ptr, (size_t)t->name.len);
        j->name[t->name.len] = '\0';
        j->in = in;
        j->t = t;
        j->type = quant_mix_type(f, &m, j->name, t->n_dims, t->ne[0]);
        if (j->type == QUANT_TYPE_NONE) {
            st = ts_error_set(err, TS_ERR_INVALID_ARG, "%s needs rows of whole 32-element "
                              "blocks: '%s' has rows of %llu", qtype_name(quant_ftype_base(f)),
                              j->name, (unsigned long long)t->ne[0]);
            goto done;
        }
        j->in_row = t->nbytes / (t->n_elems / t->ne[0]);
        j->out_row = qtype_row_bytes(j->type, (int64_t)t->ne[0]);
        j->index = i;
        j->n = in->n_tensors;
        j->progress = progress;
        j->user = user;
        gguf_writer_add_tensor_fill(w, j->name, j->type, t->n_dims, t->ne, fill_rows, j);
    }
    st = gguf_writer_write_file(w, path, err);
done:
    gguf_writer_free(w);
    free(jobs);
    return st;
}
