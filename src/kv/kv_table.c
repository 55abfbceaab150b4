/* kv_table.c: per-sequence block tables: reserve (with copy on write of a shared partial
 * last block), truncate, fork, release, and writing / reading the K and V rows of a position. */
#include <stdlib.h>
#include <string.h>

#include "kv/kv_internal.h"
#include "simd.h"

void kv_table_init(kv_table *t)
{
    t->blocks = NULL;
    t->n_blocks = 0;
    t->cap = 0;
    t->n_tokens = 0;
    t->ns = 0;
}

void kv_table_release(kv_pool *pool, kv_table *t)
{
    /* Release from the last block down, so a sequence's deepest blocks reach the LRU list
     * first and its shared leading blocks are kept longest. */
    for (int32_t i = t->n_blocks - 1; i >= 0; i--)
        kv_block_unref(pool, t->blocks[i]);
    t->n_blocks = 0;
    t->n_tokens = 0;
}

void kv_table_free(kv_pool *pool, kv_table *t)
{
    if (!t)
        return;
    if (pool)
        kv_table_release(pool, t);
    free(t->blocks);
    kv_table_init(t);
}

/* True when the next token lands in a partial last block that another table also holds. */
static bool needs_cow(const kv_pool *pool, const kv_table *t)
{
    return t->n_tokens % TS_KV_BLOCK != 0 && pool->meta[t->blocks[t->n_blocks - 1]].refcount > 1;
}

static int64_t blocks_for(int64_t n_tokens) { return (n_tokens + TS_KV_BLOCK - 1) / TS_KV_BLOCK; }

int64_t kv_table_blocks_needed(const kv_pool *pool, const kv_table *t, int64_t n)
{
    if (n <= 0)
        return 0;
    if (n > (int64_t)INT32_MAX * TS_KV_BLOCK)
        return INT64_MAX; /* more than any pool holds; keeps the sum below from overflowing */
    return blocks_for(t->n_tokens + n) - t->n_blocks + (needs_cow(pool, t) ? 1 : 0);
}

/* Copies the first `slots` token slots of every (layer, K/V, head) run from src to dst. */
static void copy_slots(kv_pool *pool, int32_t dst, int32_t src, int slots)
{
    const kv_layout *l = &pool->layout;
    char *base = l->base;
    /* a q8_0 run's scales follow its values: copy it whole */
    size_t run = l->dtype == KV_DTYPE_Q8_0 ? l->head_stride
                                           : (size_t)slots * (size_t)l->head_dim * l->elem_size;
    size_t n_runs = (size_t)l->n_layers * 2 * (size_t)l->n_kv_heads;
    char *d = base + (size_t)dst * l->block_stride * l->elem_size;
    const char *s = base + (size_t)src * l->block_stride * l->elem_size;
    for (size_t r = 0; r < n_runs; r++) {
        size_t off = r * l->head_stride * l->elem_size;
        memcpy(d + off, s + off, run);
    }
}

ts_status kv_table_reserve(kv_pool *pool, kv_table *t, int64_t n, ts_error *err)
{
    if (n < 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv reserve: negative count %lld",
                            (long long)n);
    if (n == 0)
        return TS_OK;
    if (n > (int64_t)pool->n_blocks * TS_KV_BLOCK)
        return ts_error_set(err, TS_ERR_OUT_OF_BLOCKS,
                            "kv reserve: %lld tokens exceed the whole pool (%d blocks)",
                            (long long)n, pool->n_blocks);
    int64_t new_blocks = blocks_for(t->n_tokens + n);
    int64_t need = kv_table_blocks_needed(pool, t, n);
    if (need > kv_pool_available(pool))
        return ts_error_set(err, TS_ERR_OUT_OF_BLOCKS,
                            "kv reserve: %lld tokens need %lld blocks, %lld available",
                            (long long)n, (long long)need, (long long)kv_pool_available(pool));
    ts_status st = kv_table_grow(t, new_blocks, err);
    if (st != TS_OK)
        return st;

    /* From here nothing can fail: the pool has `need` blocks to give. */
    if (needs_cow(pool, t)) {
        int32_t old = t->blocks[t->n_blocks - 1];
        int32_t fresh = kv_block_alloc(pool);
        copy_slots(pool, fresh, old, (int)(t->n_tokens % TS_KV_BLOCK));
        kv_block_unref(pool, old);
        t->blocks[t->n_blocks - 1] = fresh;
        pool->stats.cow_copies++;
    }
    while (t->n_blocks < new_blocks)
        t->blocks[t->n_blocks++] = kv_block_alloc(pool);
    t->n_tokens += n;
    return TS_OK;
}

ts_status kv_table_truncate(kv_pool *pool, kv_table *t, int64_t n_tokens, ts_error *err)
{
    if (n_tokens < 0 || n_tokens > t->n_tokens)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv truncate: %lld tokens outside the table's %lld",
                            (long long)n_tokens, (long long)t->n_tokens);
    int32_t keep = (int32_t)blocks_for(n_tokens);
    for (int32_t i = t->n_blocks - 1; i >= keep; i--)
        kv_block_unref(pool, t->blocks[i]);
    t->n_blocks = keep;
    t->n_tokens = n_tokens;
    return TS_OK;
}

ts_status kv_table_fork(kv_pool *pool, kv_table *dst, const kv_table *src, ts_error *err)
{
    if (dst->n_blocks != 0 || dst->n_tokens != 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv fork: destination table is not empty");
    ts_status st = kv_table_grow(dst, src->n_blocks, err);
    if (st != TS_OK)
        return st;
    for (int32_t i = 0; i < src->n_blocks; i++) {
        dst->blocks[i] = src->blocks[i];
        kv_block_ref(pool, src->blocks[i]);
    }
    dst->n_blocks = src->n_blocks;
    dst->n_tokens = src->n_tokens;
    dst->ns = src->ns;
    return TS_OK;
}

/* Element offset of K (or V when is_v) of (block, layer, head 0, slot). */
static size_t row_offset(const kv_layout *l, int32_t block, int layer, int slot, bool is_v)
{
    return (size_t)block * l->block_stride + (size_t)layer * l->layer_stride +
           (is_v ? l->v_offset : 0) + (size_t)slot * (size_t)l->head_dim;
}

static ts_status locate(int32_t *block, int *slot, const kv_pool *pool, const kv_table *t,
                        int layer, int64_t pos, ts_error *err)
{
    if (layer < 0 || layer >= pool->layout.n_layers)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv: layer %d out of range (%d layers)",
                            layer, pool->layout.n_layers);
    if (pos < 0 || pos >= t->n_tokens)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv: position %lld outside the %lld reserved tokens", (long long)pos,
                            (long long)t->n_tokens);
    *block = t->blocks[pos / TS_KV_BLOCK];
    *slot = (int)(pos % TS_KV_BLOCK);
    return TS_OK;
}

/* Where slot's row of a q8_0 run keeps its values (*q) and scales (*scales). run: the
 * run's byte offset from base. */
static void q8_row(int8_t **q, uint16_t **scales, const kv_layout *l, size_t run, int slot)
{
    size_t hd = (size_t)l->head_dim;
    char *p = (char *)l->base + run;
    *q = (int8_t *)p + (size_t)slot * hd;
    *scales = (uint16_t *)(p + TS_KV_BLOCK * hd) + (size_t)slot * SIMD_KV_Q8_GROUPS(hd);
}

static void store_row(const kv_pool *pool, size_t off, const float *src)
{
    const kv_layout *l = &pool->layout;
    size_t hd = (size_t)l->head_dim;
    for (int h = 0; h < l->n_kv_heads; h++) {
        size_t o = off + (size_t)h * l->head_stride;
        if (l->dtype == KV_DTYPE_Q8_0) {
            int8_t *q;
            uint16_t *sc;
            size_t slot = (off % l->head_stride) / hd; /* runs start at head_stride multiples */
            q8_row(&q, &sc, l, o - slot * hd, (int)slot);
            simd_kv_q8_quantize(q, sc, src + (size_t)h * hd, (int)hd);
        } else if (l->dtype == KV_DTYPE_F16)
            pool->cfg.to_f16((uint16_t *)l->base + o, src + (size_t)h * hd, hd);
        else
            memcpy((float *)l->base + o, src + (size_t)h * hd, hd * sizeof(float));
    }
}

static void load_row(float *dst, const kv_layout *l, size_t off)
{
    size_t hd = (size_t)l->head_dim;
    for (int h = 0; h < l->n_kv_heads; h++) {
        size_t o = off + (size_t)h * l->head_stride;
        if (l->dtype == KV_DTYPE_Q8_0) {
            int8_t *q;
            uint16_t *sc;
            size_t slot = (off % l->head_stride) / hd;
            q8_row(&q, &sc, l, o - slot * hd, (int)slot);
            simd_kv_q8_dequantize(dst + (size_t)h * hd, q, sc, (int)hd);
        } else if (l->dtype == KV_DTYPE_F16)
            kv_f16_to_f32(dst + (size_t)h * hd, (const uint16_t *)l->base + o, hd);
        else
            memcpy(dst + (size_t)h * hd, (const float *)l->base + o, hd * sizeof(float));
    }
}

ts_status kv_table_write(kv_pool *pool, const kv_table *t, int layer, int64_t pos,
                         const float *k, const float *v, ts_error *err)
{
    int32_t b = -1;
    int slot = 0;
    ts_status st = locate(&b, &slot, pool, t, layer, pos, err);
    if (st != TS_OK)
        return st;
    if (pool->meta[b].refcount != 1 || pool->meta[b].published)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv write: position %lld lies in read-only block %d (refcount %d%s)",
                            (long long)pos, b, pool->meta[b].refcount,
                            pool->meta[b].published ? ", published" : "");
    store_row(pool, row_offset(&pool->layout, b, layer, slot, false), k);
    store_row(pool, row_offset(&pool->layout, b, layer, slot, true), v);
    return TS_OK;
}

ts_status kv_table_read(float *k, float *v, const kv_pool *pool, const kv_table *t, int layer,
                        int64_t pos, ts_error *err)
{
    int32_t b = -1;
    int slot = 0;
    ts_status st = locate(&b, &slot, pool, t, layer, pos, err);
    if (st != TS_OK)
        return st;
    load_row(k, &pool->layout, row_offset(&pool->layout, b, layer, slot, false));
    load_row(v, &pool->layout, row_offset(&pool->layout, b, layer, slot, true));
    return TS_OK;
}
