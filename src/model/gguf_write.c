/* gguf_write.c: building a GGUF v3 file: metadata is encoded into a growing buffer as it
 * is added, tensors are recorded and laid out at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"

/* ggml's GGML_MAX_NAME: llama.cpp refuses longer tensor names. */
enum { GGUF_WRITER_MAX_NAME = 63 };

typedef struct writer_tensor {
    char *name;                 /* owned */
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    const void *data;           /* borrowed */
    uint64_t nbytes;
    uint64_t offset;            /* in the data section, set by finish */
} writer_tensor;

typedef struct byte_buf {
    uint8_t *p;
    size_t len, cap;
} byte_buf;

struct gguf_writer {
    uint32_t alignment;
    ts_status status;        /* the first error, sticky */
    char msg[sizeof(((ts_error *)0)->msg)];
    uint64_t n_kv;
    byte_buf kv;             /* encoded metadata entries */
    writer_tensor *tensors;  /* (n_tensors) */
    uint64_t n_tensors, cap_tensors;
};

static ts_status fail(gguf_writer *w, ts_status st, const char *what, const char *key)
{
    if (w->status == TS_OK) {
        w->status = st;
        snprintf(w->msg, sizeof w->msg, "gguf writer: %s '%s'", what, key);
    }
    return w->status;
}

static bool buf_put(byte_buf *b, const void *data, size_t n)
{
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, data, n);
    b->len += n;
    return true;
}

static bool buf_put_zeros(byte_buf *b, size_t n)
{
    static const uint8_t zeros[256];
    bool ok = true;
    for (size_t k; ok && n; n -= k) {
        k = n < sizeof zeros ? n : sizeof zeros;
        ok = buf_put(b, zeros, k);
    }
    return ok;
}

static bool buf_put_str(byte_buf *b, const char *s)
{
    uint64_t len = strlen(s);
    return buf_put(b, &len, 8) && buf_put(b, s, (size_t)len);
}

ts_status gguf_writer_create(uint32_t alignment, gguf_writer **out, ts_error *err)
{
    *out = NULL;
    if (alignment == 0)
        alignment = GGUF_DEFAULT_ALIGNMENT;
    if (alignment & (alignment - 1))
        return ts_error_set(err, TS_ERR_INVALID_ARG, "alignment %u is not a power of two",
                            alignment);
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer");
    w->alignment = alignment;
    *out = w;
    if (alignment != GGUF_DEFAULT_ALIGNMENT)
        gguf_writer_add_u32(w, "general.alignment", alignment);
    return TS_OK;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w)
        return;
    for (uint64_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->tensors);
    free(w->kv.p);
    free(w);
}

/* Appends one entry: key, type, then the value's encoded bytes. */
ts_status gguf_writer_add_raw(gguf_writer *w, const char *key, gguf_type type,
                              const void *bytes, size_t len)
{
    if (w->status != TS_OK)
        return w->status;
    if (!*key)
        return fail(w, TS_ERR_INVALID_ARG, "empty key", key);
    uint32_t t = (uint32_t)type;
    if (!buf_put_str(&w->kv, key) || !buf_put(&w->kv, &t, 4) || !buf_put(&w->kv, bytes, len))
        return fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    w->n_kv++;
    return TS_OK;
}

ts_status gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v)
{
    return gguf_writer_add_raw(w, key, GGUF_TYPE_UINT32, &v, 4);
}

ts_status gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v)
{
    return gguf_writer_add_raw(w, key, GGUF_TYPE_INT32, &v, 4);
}

ts_status gguf_writer_add_f32(gguf_writer *w, const char *key, float v)
{
    return gguf_writer_add_raw(w, key, GGUF_TYPE_FLOAT32, &v, 4);
}

ts_status gguf_writer_add_bool(gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v;
    return gguf_writer_add_raw(w, key, GGUF_TYPE_BOOL, &b, 1);
}

ts_status gguf_writer_add_str(gguf_writer *w, const char *key, const char *v)
{
    byte_buf b = {0};
    ts_status st = buf_put_str(&b, v) ? gguf_writer_add_raw(w, key, GGUF_TYPE_STRING, b.p, b.len)
                                      : fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    free(b.p);
    return st;
}

ts_status gguf_writer_add_array(gguf_writer *w, const char *key, gguf_type elem,
                                const void *data, uint64_t n)
{
    size_t esize = gguf_type_size(elem);
    if (!esize)
        return fail(w, TS_ERR_INVALID_ARG, "array of variable-size elements given as raw data",
                    key);
    uint32_t t = (uint32_t)elem;
    byte_buf b = {0};
    ts_status st = buf_put(&b, &t, 4) && buf_put(&b, &n, 8) && buf_put(&b, data, (size_t)n * esize)
                       ? gguf_writer_add_raw(w, key, GGUF_TYPE_ARRAY, b.p, b.len)
                       : fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    free(b.p);
    return st;
}

ts_status gguf_writer_add_str_array(gguf_writer *w, const char *key, const char *const *strs,
                                    const uint32_t *lens, uint64_t n)
{
    uint32_t t = GGUF_TYPE_STRING;
    byte_buf b = {0};
    bool ok = buf_put(&b, &t, 4) && buf_put(&b, &n, 8);
    for (uint64_t i = 0; ok && i < n; i++) {
        uint64_t len = lens ? lens[i] : strlen(strs[i]);
        ok = buf_put(&b, &len, 8) && buf_put(&b, strs[i], (size_t)len);
    }
    ts_status st = ok ? gguf_writer_add_raw(w, key, GGUF_TYPE_ARRAY, b.p, b.len)
                      : fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    free(b.p);
    return st;
}

ts_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                                 uint32_t n_dims, const uint64_t *ne, const void *data,
                                 uint64_t nbytes)
{
    if (w->status != TS_OK)
        return w->status;
    size_t len = strlen(name);
    if (len == 0 || len > GGUF_WRITER_MAX_NAME)
        return fail(w, TS_ERR_INVALID_ARG, "tensor name empty or longer than 63 bytes", name);
    uint32_t blk, blk_bytes;
    if (!gguf_tensor_type_layout(type, &blk, &blk_bytes))
        return fail(w, TS_ERR_INVALID_ARG, "unknown type for tensor", name);
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return fail(w, TS_ERR_INVALID_ARG, "dimension count out of range for tensor", name);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        n_elems *= ne[d];
    if (n_elems == 0 || ne[0] % blk != 0 || n_elems / blk * blk_bytes != nbytes)
        return fail(w, TS_ERR_INVALID_ARG, "shape, type and byte size disagree for tensor", name);
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 16;
        writer_tensor *p = realloc(w->tensors, (size_t)cap * sizeof *p);
        if (!p)
            return fail(w, TS_ERR_NOMEM, "out of memory adding tensor", name);
        w->tensors = p;
        w->cap_tensors = cap;
    }
    writer_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name)))
        return fail(w, TS_ERR_NOMEM, "out of memory adding tensor", name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->nbytes = nbytes;
    w->n_tensors++;
    return TS_OK;
}

static uint64_t align_up(uint64_t x, uint32_t a)
{
    return (x + a - 1) / a * a;
}

/* Header, metadata and tensor infos, padded to where the data section starts; sets each
 * tensor's offset. */
static bool layout_meta(gguf_writer *w, byte_buf *b)
{
    uint32_t version = 3;
    bool ok = buf_put(b, "GGUF", 4) && buf_put(b, &version, 4) &&
              buf_put(b, &w->n_tensors, 8) && buf_put(b, &w->n_kv, 8) &&
              buf_put(b, w->kv.p, w->kv.len);
    uint64_t data_size = 0;
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        writer_tensor *t = &w->tensors[i];
        t->offset = data_size;
        data_size = align_up(data_size + t->nbytes, w->alignment);
        ok = buf_put_str(b, t->name) && buf_put(b, &t->n_dims, 4) &&
             buf_put(b, t->ne, 8 * (size_t)t->n_dims) && buf_put(b, &t->type, 4) &&
             buf_put(b, &t->offset, 8);
    }
    return ok && buf_put_zeros(b, (size_t)(align_up(b->len, w->alignment) - b->len));
}

/* Bytes of zero padding after tensor t's data. */
static size_t tensor_pad(const gguf_writer *w, const writer_tensor *t)
{
    return (size_t)(align_up(t->nbytes, w->alignment) - t->nbytes);
}

ts_status gguf_writer_finish(gguf_writer *w, uint8_t **out, size_t *len, ts_error *err)
{
    *out = NULL;
    *len = 0;
    if (w->status != TS_OK)
        return ts_error_set(err, w->status, "%s", w->msg);
    byte_buf b = {0};
    bool ok = layout_meta(w, &b);
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        ok = buf_put(&b, t->data, (size_t)t->nbytes) && buf_put_zeros(&b, tensor_pad(w, t));
    }
    if (!ok) {
        free(b.p);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: %zu bytes", b.len);
    }
    *out = b.p;
    *len = b.len;
    return TS_OK;
}

/* Streams the tensor data straight from its owners: a model is never copied whole. */
ts_status gguf_writer_write_file(gguf_writer *w, const char *path, ts_error *err)
{
    if (w->status != TS_OK)
        return ts_error_set(err, w->status, "%s", w->msg);
    byte_buf b = {0};
    if (!layout_meta(w, &b)) {
        free(b.p);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: %zu bytes", b.len);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(b.p);
        return ts_error_set(err, TS_ERR_IO, "cannot create %s", path);
    }
    bool ok = fwrite(b.p, 1, b.len, f) == b.len;
    free(b.p);
    byte_buf pad = {0}; /* zeros for the padding, at most alignment - 1 of them */
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        pad.len = 0;
        ok = buf_put_zeros(&pad, tensor_pad(w, t)) &&
             fwrite(t->data, 1, (size_t)t->nbytes, f) == t->nbytes &&
             (pad.len == 0 || fwrite(pad.p, 1, pad.len, f) == pad.len);
    }
    free(pad.p);
    if (fclose(f) != 0)
        ok = false;
    if (!ok)
        return ts_error_set(err, TS_ERR_IO, "cannot write %s", path);
    return TS_OK;
}
