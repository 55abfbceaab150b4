/* gguf_write.c: building a GGUF v3 file: metadata is encoded into a growing buffer as it
 * is added, tensors are recorded and laid out at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "gguf/gguf.h"

/* ggml's GGML_MAX_NAME: llama.cpp refuses longer tensor names. */
enum { GGUF_WRITER_MAX_NAME = 63 };

typedef struct writer_tensor {
    char *name;                 /* owned */
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    const void *data;           /* borrowed; NULL when fill produces the bytes */
    gguf_tensor_fill fill;
    void *user;                 /* borrowed, for fill */
    uint64_t nbytes;
    uint64_t n_rows;            /* elements / ne[0] */
    uint64_t offset;            /* in the data section, set by finish */
} writer_tensor;

struct gguf_writer {
    uint32_t alignment;
    ts_status status;        /* the first error, sticky */
    char msg[sizeof(((ts_error *)0)->msg)];
    uint64_t n_kv;
    strbuf kv;               /* encoded metadata entries */
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

static bool buf_put_zeros(strbuf *b, size_t n)
{
    static const uint8_t zeros[256];
    bool ok = true;
    for (size_t k; ok && n; n -= k) {
        k = n < sizeof zeros ? n : sizeof zeros;
        ok = strbuf_add(b, zeros, k);
    }
    return ok;
}

static bool buf_put_str(strbuf *b, const char *s)
{
    uint64_t len = strlen(s);
    return strbuf_add(b, &len, 8) && strbuf_add(b, s, (size_t)len);
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
    strbuf_free(&w->kv);
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
    if (!buf_put_str(&w->kv, key) || !strbuf_add(&w->kv, &t, 4) || !strbuf_add(&w->kv, bytes, len))
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
    strbuf b = {0};
    ts_status st = buf_put_str(&b, v) ? gguf_writer_add_raw(w, key, GGUF_TYPE_STRING, b.s, b.len)
                                      : fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    strbuf_free(&b);
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
    strbuf b = {0};
    bool ok = strbuf_add(&b, &t, 4) && strbuf_add(&b, &n, 8) &&
              strbuf_add(&b, data, (size_t)n * esize);
    ts_status st = ok ? gguf_writer_add_raw(w, key, GGUF_TYPE_ARRAY, b.s, b.len)
                      : fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    strbuf_free(&b);
    return st;
}

ts_status gguf_writer_add_str_array(gguf_writer *w, const char *key, const char *const *strs,
                                    const uint32_t *lens, uint64_t n)
{
    uint32_t t = GGUF_TYPE_STRING;
    strbuf b = {0};
    bool ok = strbuf_add(&b, &t, 4) && strbuf_add(&b, &n, 8);
    for (uint64_t i = 0; ok && i < n; i++) {
        uint64_t len = lens ? lens[i] : strlen(strs[i]);
        ok = strbuf_add(&b, &len, 8) && strbuf_add(&b, strs[i], (size_t)len);
    }
    ts_status st = ok ? gguf_writer_add_raw(w, key, GGUF_TYPE_ARRAY, b.s, b.len)
                      : fail(w, TS_ERR_NOMEM, "out of memory adding", key);
    strbuf_free(&b);
    return st;
}

/* Checks and records a tensor; nbytes == 0 means "compute it from the shape". */
static ts_status add_tensor(gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                            const uint64_t *ne, const void *data, uint64_t nbytes,
                            gguf_tensor_fill fill, void *user)
{
    if (w->status != TS_OK)
        return w->status;
    size_t len = strlen(name);
    if (len == 0 || len > GGUF_WRITER_MAX_NAME)
        return fail(w, TS_ERR_INVALID_ARG, "tensor name empty or longer than 63 bytes", name);
    uint32_t blk, blk_bytes;
    if (!gguf_tensor_type_layout(type, &blk, &blk_bytes))
        return fail(w, TS_ERR_INVALID_ARG, "unknown type for tensor", name);
    if (!data && !fill)
        return fail(w, TS_ERR_INVALID_ARG, "no data for tensor", name);
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return fail(w, TS_ERR_INVALID_ARG, "dimension count out of range for tensor", name);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; d++)
        n_elems *= ne[d];
    if (fill && n_elems && ne[0] % blk == 0)
        nbytes = n_elems / blk * blk_bytes;
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
    t->fill = fill;
    t->user = user;
    t->nbytes = nbytes;
    t->n_rows = n_elems / ne[0];
    w->n_tensors++;
    return TS_OK;
}

ts_status gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                                 uint32_t n_dims, const uint64_t *ne, const void *data,
                                 uint64_t nbytes)
{
    return add_tensor(w, name, type, n_dims, ne, data, nbytes, NULL, NULL);
}

ts_status gguf_writer_add_tensor_fill(gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *ne,
                                      gguf_tensor_fill fill, void *user)
{
    return add_tensor(w, name, type, n_dims, ne, NULL, 0, fill, user);
}

static uint64_t align_up(uint64_t x, uint32_t a)
{
    return (x + a - 1) / a * a;
}

/* Header, metadata and tensor infos, padded to where the data section starts; sets each
 * tensor's offset. */
static bool layout_meta(gguf_writer *w, strbuf *b)
{
    uint32_t version = 3;
    bool ok = strbuf_add(b, "GGUF", 4) && strbuf_add(b, &version, 4) &&
              strbuf_add(b, &w->n_tensors, 8) && strbuf_add(b, &w->n_kv, 8) &&
              strbuf_add(b, w->kv.s, w->kv.len);
    uint64_t data_size = 0;
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        writer_tensor *t = &w->tensors[i];
        t->offset = data_size;
        data_size = align_up(data_size + t->nbytes, w->alignment);
        ok = buf_put_str(b, t->name) && strbuf_add(b, &t->n_dims, 4) &&
             strbuf_add(b, t->ne, 8 * (size_t)t->n_dims) && strbuf_add(b, &t->type, 4) &&
             strbuf_add(b, &t->offset, 8);
    }
    return ok && buf_put_zeros(b, (size_t)(align_up(b->len, w->alignment) - b->len));
}

/* Bytes of zero padding after tensor t's data. */
static size_t tensor_pad(const gguf_writer *w, const writer_tensor *t)
{
    return (size_t)(align_up(t->nbytes, w->alignment) - t->nbytes);
}

/* Where tensor bytes go: the in-memory buffer or the file. */
typedef bool (*byte_sink)(void *ctx, const void *data, size_t n);

static bool sink_buf(void *ctx, const void *data, size_t n)
{
    return strbuf_add(ctx, data, n);
}

static bool sink_file(void *ctx, const void *data, size_t n)
{
    return fwrite(data, 1, n, ctx) == n;
}

enum { FILL_CHUNK_BYTES = 4 << 20 };

/* Sends t's bytes and its padding to sink: straight from t->data, or from t->fill in
 * chunks of whole rows. A sink that fails gives sink_status (out of memory, or I/O). */
static ts_status emit_tensor(const gguf_writer *w, const writer_tensor *t, byte_sink sink,
                             void *ctx, ts_status sink_status, ts_error *err)
{
    static const uint8_t zeros[256]; /* padding, written in pieces of at most this */
    size_t pad = tensor_pad(w, t);
    if (t->data) {
        if (!sink(ctx, t->data, (size_t)t->nbytes))
            return ts_error_set(err, sink_status, "gguf writer: storing tensor '%s'", t->name);
    } else {
        uint64_t n_rows = t->n_rows, row_bytes = t->nbytes / n_rows;
        uint64_t chunk = FILL_CHUNK_BYTES / row_bytes ? FILL_CHUNK_BYTES / row_bytes : 1;
        if (chunk > n_rows)
            chunk = n_rows;
        uint8_t *buf = malloc((size_t)(chunk * row_bytes));
        if (!buf)
            return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: tensor '%s'", t->name);
        ts_status st = TS_OK;
        for (uint64_t r = 0; st == TS_OK && r < n_rows; r += chunk) {
            uint64_t n = n_rows - r < chunk ? n_rows - r : chunk;
            if ((st = t->fill(t->user, buf, r, n, err)) == TS_OK &&
                !sink(ctx, buf, (size_t)(n * row_bytes)))
                st = ts_error_set(err, sink_status, "gguf writer: storing tensor '%s'", t->name);
        }
        free(buf);
        if (st != TS_OK)
            return st;
    }
    for (size_t k; pad; pad -= k) {
        k = pad < sizeof zeros ? pad : sizeof zeros;
        if (!sink(ctx, zeros, k))
            return ts_error_set(err, sink_status, "gguf writer: padding tensor '%s'", t->name);
    }
    return TS_OK;
}

ts_status gguf_writer_finish(gguf_writer *w, uint8_t **out, size_t *len, ts_error *err)
{
    *out = NULL;
    *len = 0;
    if (w->status != TS_OK)
        return ts_error_set(err, w->status, "%s", w->msg);
    strbuf b = {0};
    if (!layout_meta(w, &b)) {
        strbuf_free(&b);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: %zu bytes", b.len);
    }
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        ts_status st = emit_tensor(w, &w->tensors[i], sink_buf, &b, TS_ERR_NOMEM, err);
        if (st != TS_OK) {
            strbuf_free(&b);
            return st;
        }
    }
    *out = (uint8_t *)b.s;
    *len = b.len;
    return TS_OK;
}

/* Streams the tensor data straight from its owners (or their fill functions): a model is
 * never copied whole. A failed write removes the file. */
ts_status gguf_writer_write_file(gguf_writer *w, const char *path, ts_error *err)
{
    if (w->status != TS_OK)
        return ts_error_set(err, w->status, "%s", w->msg);
    strbuf b = {0};
    if (!layout_meta(w, &b)) {
        strbuf_free(&b);
        return ts_error_set(err, TS_ERR_NOMEM, "gguf writer: %zu bytes", b.len);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        strbuf_free(&b);
        return ts_error_set(err, TS_ERR_IO, "cannot create %s", path);
    }
    ts_status st = fwrite(b.s, 1, b.len, f) == b.len
                       ? TS_OK
                       : ts_error_set(err, TS_ERR_IO, "cannot write %s", path);
    strbuf_free(&b);
    for (uint64_t i = 0; st == TS_OK && i < w->n_tensors; i++)
        st = emit_tensor(w, &w->tensors[i], sink_file, f, TS_ERR_IO, err);
    if (fclose(f) != 0 && st == TS_OK)
        st = ts_error_set(err, TS_ERR_IO, "cannot write %s", path);
    if (st != TS_OK)
        remove(path);
    return st;
}
