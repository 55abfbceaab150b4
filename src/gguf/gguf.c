/* gguf.c: the GGUF reader. The file is untrusted: every read goes through a cursor that
 * checks the bytes are there, and every count is checked against the bytes left before
 * anything is allocated for it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/gguf_index.h"

/* Keys and tensor names longer than this are taken for corruption. */
enum { GGUF_MAX_KEY_LEN = 65535, GGUF_MAX_NAME_LEN = 255 };

typedef struct cursor {
    const uint8_t *p;
    size_t size;
    size_t pos;
    ts_error *err;
} cursor;

static size_t left(const cursor *c)
{
    return c->size - c->pos;
}

/* Copies n bytes out, or fails naming what was being read and where. */
static ts_status take(cursor *c, void *dst, size_t n, const char *what, const char *ctx)
{
    if (n > left(c))
        return ts_error_set(c->err, TS_ERR_FORMAT,
                            "%s: truncated file: %s needs %zu bytes at offset %zu, %zu left",
                            ctx, what, n, c->pos, left(c));
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return TS_OK;
}

static ts_status take_u32(cursor *c, uint32_t *v, const char *what, const char *ctx)
{
    return take(c, v, sizeof *v, what, ctx);
}

static ts_status take_u64(cursor *c, uint64_t *v, const char *what, const char *ctx)
{
    return take(c, v, sizeof *v, what, ctx);
}

static ts_status take_str(cursor *c, gguf_str *s, uint64_t max_len, const char *what,
                          const char *ctx)
{
    uint64_t len = 0;
    ts_status st = take_u64(c, &len, what, ctx);
    if (st != TS_OK)
        return st;
    if (len > left(c))
        return ts_error_set(c->err, TS_ERR_FORMAT,
                            "%s: %s length %llu at offset %zu runs past the end of the file",
                            ctx, what, (unsigned long long)len, c->pos - 8);
    if (len > max_len)
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: %s length %llu exceeds %llu", ctx,
                            what, (unsigned long long)len, (unsigned long long)max_len);
    s->ptr = (const char *)(c->p + c->pos);
    s->len = len;
    c->pos += (size_t)len;
    return TS_OK;
}

size_t gguf_type_size(gguf_type type)
{
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(gguf_type type)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    return (unsigned)type < GGUF_TYPE_COUNT ? names[type] : "unknown";
}

/* Decodes a fixed-size scalar from its little-endian bytes. */
static void decode_scalar(gguf_value *v, gguf_type type, const uint8_t *b)
{
    v->type = type;
    switch (type) {
    case GGUF_TYPE_UINT8: v->v.u64 = b[0]; break;
    case GGUF_TYPE_INT8: v->v.i64 = (int8_t)b[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, b, 2); v->v.u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, b, 2); v->v.i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, b, 4); v->v.u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, b, 4); v->v.i64 = x; break; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, b, 4); v->v.f64 = x; break; }
    case GGUF_TYPE_UINT64: memcpy(&v->v.u64, b, 8); break;
    case GGUF_TYPE_INT64: memcpy(&v->v.i64, b, 8); break;
    case GGUF_TYPE_FLOAT64: memcpy(&v->v.f64, b, 8); break;
    case GGUF_TYPE_BOOL: v->v.b = b[0] != 0; break;
    default: break;
    }
}

static ts_status read_value(cursor *c, gguf_type type, int depth, gguf_value *v,
                            const char *ctx);

static ts_status read_array(cursor *c, int depth, gguf_value *v, const char *ctx)
{
    uint32_t elem = 0;
    uint64_t n = 0;
    ts_status st;
    v->type = GGUF_TYPE_ARRAY;
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: arrays nested deeper than %d", ctx,
                            GGUF_MAX_ARRAY_DEPTH);
    if ((st = take_u32(c, &elem, "array element type", ctx)) != TS_OK ||
        (st = take_u64(c, &n, "array length", ctx)) != TS_OK)
        return st;
    if (elem >= GGUF_TYPE_COUNT)
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: unknown array element type %u", ctx,
                            elem);
    v->v.arr.elem = (gguf_type)elem;
    size_t esize = gguf_type_size((gguf_type)elem);
    if (esize) {
        if (n > left(c) / esize)
            return ts_error_set(c->err, TS_ERR_FORMAT,
                                "%s: array of %llu %s runs past the end of the file", ctx,
                                (unsigned long long)n, gguf_type_name((gguf_type)elem));
        v->v.arr.raw = c->p + c->pos;
        v->v.arr.n = n;
        c->pos += (size_t)n * esize;
        return TS_OK;
    }
    /* Strings need at least their 8-byte length, arrays their 12-byte header. */
    size_t min_size = elem == GGUF_TYPE_STRING ? 8 : 12;
    if (n > left(c) / min_size)
        return ts_error_set(c->err, TS_ERR_FORMAT,
                            "%s: array of %llu %s cannot fit in the %zu bytes left", ctx,
                            (unsigned long long)n, gguf_type_name((gguf_type)elem), left(c));
    if (n && !(v->v.arr.items = calloc((size_t)n, sizeof *v->v.arr.items)))
        return ts_error_set(c->err, TS_ERR_NOMEM, "%s: array of %llu elements", ctx,
                            (unsigned long long)n);
    v->v.arr.n = n;
    for (uint64_t i = 0; i < n; i++)
        if ((st = read_value(c, (gguf_type)elem, depth + 1, &v->v.arr.items[i], ctx)) != TS_OK)
            return st;
    return TS_OK;
}

static ts_status read_value(cursor *c, gguf_type type, int depth, gguf_value *v,
                            const char *ctx)
{
    size_t size = gguf_type_size(type);
    if (size) {
        uint8_t b[8];
        ts_status st = take(c, b, size, gguf_type_name(type), ctx);
        if (st != TS_OK)
            return st;
        if (type == GGUF_TYPE_BOOL && b[0] > 1)
            return ts_error_set(c->err, TS_ERR_FORMAT, "%s: bool value %u is not 0 or 1", ctx,
                                b[0]);
        decode_scalar(v, type, b);
        return TS_OK;
    }
    if (type == GGUF_TYPE_STRING) {
        v->type = type;
        return take_str(c, &v->v.str, UINT64_MAX, "string", ctx);
    }
    if (type == GGUF_TYPE_ARRAY)
        return read_array(c, depth, v, ctx);
    return ts_error_set(c->err, TS_ERR_FORMAT, "%s: unknown value type %u", ctx,
                        (unsigned)type);
}

static void free_value(gguf_value *v)
{
    if (v->type != GGUF_TYPE_ARRAY || !v->v.arr.items)
        return;
    for (uint64_t i = 0; i < v->v.arr.n; i++)
        free_value(&v->v.arr.items[i]);
    free(v->v.arr.items);
    v->v.arr.items = NULL;
}

bool gguf_str_eq(gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

static ts_status read_kvs(gguf_file *f, cursor *c)
{
    char ctx[128];
    ts_status st;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        uint32_t type = 0;
        snprintf(ctx, sizeof ctx, "metadata entry %llu", (unsigned long long)i);
        if ((st = take_str(c, &kv->key, GGUF_MAX_KEY_LEN, "key", ctx)) != TS_OK)
            return st;
        if (kv->key.len == 0)
            return ts_error_set(c->err, TS_ERR_FORMAT, "%s: empty key", ctx);
        snprintf(ctx, sizeof ctx, "metadata key '%.*s'", (int)(kv->key.len > 80 ? 80 : kv->key.len),
                 kv->key.ptr);
        if ((st = take_u32(c, &type, "value type", ctx)) != TS_OK ||
            (st = read_value(c, (gguf_type)type, 0, &kv->val, ctx)) != TS_OK)
            return st;
    }
    return TS_OK;
}

/* The general.alignment entry, if any (read once the keys are indexed). */
static ts_status read_alignment(gguf_file *f, ts_error *err)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv)
        return TS_OK;
    if (kv->val.type != GGUF_TYPE_UINT32)
        return ts_error_set(err, TS_ERR_FORMAT, "general.alignment has type %s, expected uint32",
                            gguf_type_name(kv->val.type));
    uint64_t a = kv->val.v.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return ts_error_set(err, TS_ERR_FORMAT, "general.alignment %llu is not a power of two",
                            (unsigned long long)a);
    f->alignment = (uint32_t)a;
    return TS_OK;
}

static ts_status read_tensor_info(gguf_file *f, cursor *c, uint64_t i)
{
    gguf_tensor *t = &f->tensors[i];
    char ctx[128];
    ts_status st;
    snprintf(ctx, sizeof ctx, "tensor info %llu", (unsigned long long)i);
    if ((st = take_str(c, &t->name, GGUF_MAX_NAME_LEN, "name", ctx)) != TS_OK)
        return st;
    if (t->name.len == 0)
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: empty name", ctx);
    snprintf(ctx, sizeof ctx, "tensor '%.*s'", (int)t->name.len, t->name.ptr);
    if ((st = take_u32(c, &t->n_dims, "dimension count", ctx)) != TS_OK)
        return st;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: %u dimensions (1 to %d allowed)", ctx,
                            t->n_dims, GGUF_MAX_DIMS);
    t->n_elems = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d < t->n_dims && (st = take_u64(c, &t->ne[d], "shape", ctx)) != TS_OK)
            return st;
        if (t->ne[d] == 0 || t->ne[d] > INT64_MAX ||
            __builtin_mul_overflow(t->n_elems, t->ne[d], &t->n_elems) || t->n_elems > INT64_MAX)
            return ts_error_set(c->err, TS_ERR_FORMAT,
                                "%s: dimension %u of size %llu is zero or overflows", ctx, d,
                                (unsigned long long)t->ne[d]);
    }
    if ((st = take_u32(c, &t->type, "type", ctx)) != TS_OK ||
        (st = take_u64(c, &t->offset, "data offset", ctx)) != TS_OK)
        return st;
    uint32_t blk, blk_bytes;
    if (!gguf_tensor_type_layout(t->type, &blk, &blk_bytes)) {
        const char *type = gguf_tensor_type_name(t->type);
        if (type) /* a ggml type that tessera does not compute on: refused by name */
            return ts_error_set(c->err, TS_ERR_UNSUPPORTED, "%s has type %s (%u), which "
                                "tessera does not support", ctx, type, t->type);
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: unknown tensor type %u", ctx, t->type);
    }
    if (t->ne[0] % blk != 0)
        return ts_error_set(c->err, TS_ERR_FORMAT,
                            "%s: row length %llu is not a multiple of the %s block size %u",
                            ctx, (unsigned long long)t->ne[0], gguf_tensor_type_name(t->type),
                            blk);
    if (__builtin_mul_overflow(t->n_elems / blk, (uint64_t)blk_bytes, &t->nbytes))
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: byte size overflows", ctx);
    if (t->offset % f->alignment != 0)
        return ts_error_set(c->err, TS_ERR_FORMAT, "%s: data offset %llu is not a multiple of "
                            "the alignment %u", ctx, (unsigned long long)t->offset, f->alignment);
    return TS_OK;
}

/* Orders tensors by data offset, ties by index so that the error names a fixed pair. */
static int offset_cmp(const void *a, const void *b)
{
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x > y) - (x < y);
}

/* Refuses tensors whose bytes overlap. Sizes are checked against the file one by one, so
 * without this many tensors could share one offset and promise far more weights than the
 * file holds: the loader would allocate for all of them. Disjoint tensors bound the sum of
 * their sizes by the file size. llama.cpp asks more (each tensor right after the previous
 * one in file order); gaps and any order are harmless, so they are allowed here. */
static ts_status check_disjoint(const gguf_file *f, ts_error *err)
{
    if (f->n_tensors < 2)
        return TS_OK;
    const gguf_tensor **by_offset = malloc((size_t)f->n_tensors * sizeof *by_offset);
    if (!by_offset)
        return ts_error_set(err, TS_ERR_NOMEM, "offset index of %llu tensors",
                            (unsigned long long)f->n_tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        by_offset[i] = &f->tensors[i];
    qsort(by_offset, (size_t)f->n_tensors, sizeof *by_offset, offset_cmp);
    ts_status st = TS_OK;
    for (uint64_t i = 1; i < f->n_tensors && st == TS_OK; i++) {
        const gguf_tensor *prev = by_offset[i - 1], *t = by_offset[i];
        if (t->offset < prev->offset + prev->nbytes) /* both inside the file: no overflow */
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "tensor '%.*s' at data offset %llu overlaps tensor '%.*s' "
                              "(%llu bytes at data offset %llu)",
                              (int)t->name.len, t->name.ptr, (unsigned long long)t->offset,
                              (int)prev->name.len, prev->name.ptr,
                              (unsigned long long)prev->nbytes,
                              (unsigned long long)prev->offset);
    }
    free(by_offset);
    return st;
}

/* Places every tensor inside the data section, now that its start is known, and no two
 * on the same bytes. */
static ts_status place_tensors(gguf_file *f, ts_error *err)
{
    uint64_t data_size = f->size - f->data_offset;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tensor '%.*s': %llu bytes at data offset %llu run past the "
                                "end of the file (data section holds %llu bytes)",
                                (int)t->name.len, t->name.ptr, (unsigned long long)t->nbytes,
                                (unsigned long long)t->offset, (unsigned long long)data_size);
        t->data = f->base + f->data_offset + t->offset;
    }
    return check_disjoint(f, err);
}

static ts_status read_header(gguf_file *f, cursor *c)
{
    char magic[4];
    ts_status st;
    if ((st = take(c, magic, 4, "magic", "header")) != TS_OK)
        return st;
    if (memcmp(magic, "GGUF", 4) != 0)
        return ts_error_set(c->err, TS_ERR_FORMAT, "header: bad magic, not a GGUF file");
    if ((st = take_u32(c, &f->version, "version", "header")) != TS_OK)
        return st;
    if (f->version != 2 && f->version != 3) {
        if (f->version != 0 && (f->version & 0xffff) == 0)
            return ts_error_set(c->err, TS_ERR_UNSUPPORTED,
                                "header: big-endian GGUF files are not supported");
        return ts_error_set(c->err, TS_ERR_UNSUPPORTED,
                            "header: GGUF version %u is not supported (2 and 3 are)",
                            f->version);
    }
    if ((st = take_u64(c, &f->n_tensors, "tensor count", "header")) != TS_OK ||
        (st = take_u64(c, &f->n_kv, "metadata count", "header")) != TS_OK)
        return st;
    /* A metadata entry takes at least 13 bytes, a tensor info at least 32. */
    if (f->n_kv > left(c) / 13)
        return ts_error_set(c->err, TS_ERR_FORMAT,
                            "header: metadata count %llu cannot fit in a %zu-byte file",
                            (unsigned long long)f->n_kv, c->size);
    if (f->n_tensors > left(c) / 32)
        return ts_error_set(c->err, TS_ERR_FORMAT,
                            "header: tensor count %llu cannot fit in a %zu-byte file",
                            (unsigned long long)f->n_tensors, c->size);
    return TS_OK;
}

static ts_status parse(gguf_file *f, ts_error *err)
{
    cursor c = {f->base, f->size, 0, err};
    ts_status st;
    if ((st = read_header(f, &c)) != TS_OK)
        return st;
    if ((f->n_kv && !(f->kv = calloc((size_t)f->n_kv, sizeof *f->kv))) ||
        (f->n_tensors && !(f->tensors = calloc((size_t)f->n_tensors, sizeof *f->tensors))))
        return ts_error_set(err, TS_ERR_NOMEM, "header: %llu metadata entries, %llu tensors",
                            (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors);
    if ((st = read_kvs(f, &c)) != TS_OK)
        return st;
    if (f->n_kv && (st = gguf_build_order(&f->kv_order, &f->kv[0].key, sizeof *f->kv,
                                          f->n_kv, "metadata key", err)) != TS_OK)
        return st;
    if ((st = read_alignment(f, err)) != TS_OK)
        return st;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((st = read_tensor_info(f, &c, i)) != TS_OK)
            return st;
    if (f->n_tensors &&
        (st = gguf_build_order(&f->tensor_order, &f->tensors[0].name, sizeof *f->tensors,
                               f->n_tensors, "tensor name", err)) != TS_OK)
        return st;
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    f->data_offset = c.pos + pad;
    if (f->data_offset > f->size) {
        if (f->n_tensors)
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tensor data section starts at %llu, past the end of the "
                                "%zu-byte file", (unsigned long long)f->data_offset, f->size);
        f->data_offset = f->size; /* vocabulary-only files may omit the final padding */
    }
    return place_tensors(f, err);
}

ts_status gguf_open_buffer(const void *data, size_t size, gguf_file **out, ts_error *err)
{
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f)
        return ts_error_set(err, TS_ERR_NOMEM, "gguf reader");
    f->base = data;
    f->size = size;
    ts_status st = parse(f, err);
    if (st != TS_OK) {
        gguf_close(f);
        return st;
    }
    *out = f;
    return TS_OK;
}

ts_status gguf_open(const char *path, gguf_file **out, ts_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ts_error_set(err, TS_ERR_IO, "cannot open %s", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ts_error_set(err, TS_ERR_IO, "%s is not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return ts_error_set(err, TS_ERR_FORMAT, "%s: %lld bytes is too short for GGUF", path,
                            (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return ts_error_set(err, TS_ERR_IO, "cannot map %s", path);
    ts_status st = gguf_open_buffer(map, size, out, err);
    if (st != TS_OK) {
        munmap(map, size);
        if (err) { /* prefix the path to the reader's message */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            ts_error_set(err, st, "%s: %s", path, msg);
        }
        return st;
    }
    (*out)->map = map;
    return TS_OK;
}

void gguf_close(gguf_file *f)
{
    if (!f)
        return;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++)
            free_value(&f->kv[i].val);
    free(f->kv);
    free(f->tensors);
    free(f->kv_order);
    free(f->tensor_order);
    if (f->map)
        munmap(f->map, f->size);
    free(f);
}
