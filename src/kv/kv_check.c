/* kv_check.c: kv_pool_check, the debug check of every invariant of a pool, its prefix
 * cache and its tables; above the other files of src/kv/, which never call it. */
#include <stdlib.h>

#include "kv/kv_internal.h"

#define CHECK(cond, ...)                                               \
    do {                                                               \
        if (!(cond)) {                                                 \
            ts_error_set(err, TS_ERR_INTERNAL, __VA_ARGS__);           \
            goto fail;                                                 \
        }                                                              \
    } while (0)

ts_status kv_pool_check(const kv_pool *pool, const kv_table *const *tables, int n_tables,
                        ts_error *err)
{
    const int32_t n = pool->n_blocks;
    int32_t *refs = calloc((size_t)n, sizeof *refs);
    uint8_t *seen = calloc((size_t)n, 1);
    if (!refs || !seen) {
        free(refs);
        free(seen);
        return ts_error_set(err, TS_ERR_NOMEM, "kv_pool_check: out of memory");
    }
    int64_t n_free = 0, n_cached = 0, n_used = 0, n_published = 0;

    for (int32_t b = pool->free_head; b >= 0; b = pool->meta[b].next) {
        CHECK(b < n && !seen[b], "free list: block %d repeated or out of range", b);
        seen[b] = 1;
        const kv_block_meta *m = &pool->meta[b];
        CHECK(m->state == KV_BLOCK_FREE && m->refcount == 0 && !m->published,
              "free list: block %d has state %d, refcount %d, published %d", b, m->state,
              m->refcount, m->published);
        n_free++;
    }
    int32_t prev = -1;
    for (int32_t b = pool->lru_head; b >= 0; prev = b, b = pool->meta[b].next) {
        CHECK(b < n && !seen[b], "lru list: block %d repeated, free, or out of range", b);
        seen[b] = 1;
        const kv_block_meta *m = &pool->meta[b];
        CHECK(m->prev == prev, "lru list: block %d has prev %d, expected %d", b, m->prev, prev);
        CHECK(m->state == KV_BLOCK_CACHED && m->refcount == 0 && m->published,
              "lru list: block %d has state %d, refcount %d, published %d", b, m->state,
              m->refcount, m->published);
        n_cached++;
    }
    CHECK(pool->lru_tail == prev, "lru tail is %d, expected %d", pool->lru_tail, prev);
    for (int32_t b = 0; b < n; b++) {
        const kv_block_meta *m = &pool->meta[b];
        if (!seen[b]) {
            CHECK(m->state == KV_BLOCK_USED && m->refcount > 0,
                  "block %d is on no list but has state %d, refcount %d", b, m->state,
                  m->refcount);
            n_used++;
        }
        CHECK(m->published == kv_prefix_indexed(pool, b),
              "block %d: published %d but indexed %d", b, m->published, !m->published);
        n_published += m->published;
    }
    CHECK(n_published == kv_prefix_index_size(pool), "hash index holds %lld blocks, %lld published",
          (long long)kv_prefix_index_size(pool), (long long)n_published);
    CHECK(n_free == pool->stats.blocks_free && n_cached == pool->stats.blocks_cached &&
              n_used == pool->stats.blocks_used && n_free + n_cached + n_used == n,
          "counts: free %lld/%lld cached %lld/%lld used %lld/%lld total %d", (long long)n_free,
          (long long)pool->stats.blocks_free, (long long)n_cached,
          (long long)pool->stats.blocks_cached, (long long)n_used,
          (long long)pool->stats.blocks_used, n);

    for (int i = 0; i < n_tables; i++) {
        const kv_table *t = tables[i];
        CHECK(t->n_blocks >= 0 && t->n_blocks <= t->cap && t->n_tokens >= 0 &&
                  t->n_blocks == (t->n_tokens + TS_KV_BLOCK - 1) / TS_KV_BLOCK,
              "table %d: %d blocks for %lld tokens", i, t->n_blocks, (long long)t->n_tokens);
        for (int32_t j = 0; j < t->n_blocks; j++) {
            int32_t b = t->blocks[j];
            CHECK(b >= 0 && b < n, "table %d: block %d out of range", i, b);
            CHECK(pool->meta[b].state == KV_BLOCK_USED, "table %d holds block %d in state %d", i,
                  b, pool->meta[b].state);
            refs[b]++;
        }
    }
    if (tables) {
        for (int32_t b = 0; b < n; b++)
            CHECK(refs[b] == pool->meta[b].refcount, "block %d: refcount %d, held by %d tables",
                  b, pool->meta[b].refcount, refs[b]);
    }
    free(refs);
    free(seen);
    return TS_OK;
fail:
    free(refs);
    free(seen);
    return TS_ERR_INTERNAL;
}
