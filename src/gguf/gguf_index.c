/* gguf_index.c: metadata keys and tensor names sorted once at open, and the binary search
 * that finds one by name. Below both the reader (gguf.c), which builds the indices and
 * looks up general.alignment while it parses, and the typed getters (gguf_meta.c). */
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_index.h"

static int str_cmp(gguf_str a, gguf_str b)
{
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int r = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (r)
        return r;
    return (a.len > b.len) - (a.len < b.len);
}

/* qsort has no context argument: sort (name, index) pairs instead. */
typedef struct named_index {
    gguf_str name;
    uint64_t index;
} named_index;

static int named_index_cmp(const void *a, const void *b)
{
    return str_cmp(((const named_index *)a)->name, ((const named_index *)b)->name);
}

ts_status gguf_build_order(uint64_t **order, const gguf_str *names, size_t stride, uint64_t n,
                           const char *what, ts_error *err)
{
    if (n == 0)
        return TS_OK;
    named_index *tmp = malloc((size_t)n * sizeof *tmp);
    *order = malloc((size_t)n * sizeof **order);
    if (!tmp || !*order) {
        free(tmp);
        return ts_error_set(err, TS_ERR_NOMEM, "index of %llu %ss", (unsigned long long)n,
                            what);
    }
    for (uint64_t i = 0; i < n; i++) {
        tmp[i].name = *(const gguf_str *)((const char *)names + i * stride);
        tmp[i].index = i;
    }
    qsort(tmp, (size_t)n, sizeof *tmp, named_index_cmp);
    ts_status st = TS_OK;
    for (uint64_t i = 0; i < n; i++) {
        (*order)[i] = tmp[i].index;
        if (i && st == TS_OK && str_cmp(tmp[i - 1].name, tmp[i].name) == 0)
            st = ts_error_set(err, TS_ERR_FORMAT, "duplicate %s '%.*s'", what,
                              (int)tmp[i].name.len, tmp[i].name.ptr);
    }
    free(tmp);
    return st;
}

/* Binary search over the n indices in order, sorted by the name each element (stride bytes
 * apart from base) starts with: gguf_kv and gguf_tensor both begin with theirs. */
static const void *lookup(const void *base, size_t stride, const uint64_t *order, uint64_t n,
                          const char *name)
{
    if (!base || !order || !name)
        return NULL;
    const gguf_str key = {name, strlen(name)};
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const void *elem = (const char *)base + order[mid] * stride;
        int r = str_cmp(*(const gguf_str *)elem, key);
        if (r == 0)
            return elem;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key)
{
    return lookup(f->kv, sizeof *f->kv, f->kv_order, f->n_kv, key);
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    return lookup(f->tensors, sizeof *f->tensors, f->tensor_order, f->n_tensors, name);
}
