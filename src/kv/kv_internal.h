/* kv_internal.h: the pool's block metadata, shared by the files of src/kv/ only. */
#ifndef TESSERA_KV_KV_INTERNAL_H
#define TESSERA_KV_KV_INTERNAL_H

#include <stdlib.h>

#include "kv/kv.h"

typedef enum kv_block_state {
    KV_BLOCK_FREE,   /* on the free list, refcount 0, not published */
    KV_BLOCK_USED,   /* refcount > 0, maybe published */
    KV_BLOCK_CACHED, /* refcount 0, published, on the LRU list */
} kv_block_state;

/* One per physical block. A published block stays findable through the hash index by
 * (key, parent id, parent generation, tokens). gen changes whenever a block is unpublished,
 * so a child published under an evicted parent can no longer be reached: it is dead
 * weight that LRU reclaims, never a wrong match. */
typedef struct kv_block_meta {
    int32_t refcount;
    int32_t state;       /* kv_block_state */
    int32_t prev, next;  /* free list (next only) or LRU list; -1 ends */
    int32_t hnext;       /* hash bucket chain; -1 ends */
    int32_t parent;      /* physical id of the parent block, -1 for logical block 0 */
    uint32_t parent_gen; /* parent's gen when this block was published */
    uint32_t gen;        /* bumped on unpublish */
    uint64_t key;        /* chain hash; valid while published */
    uint64_t ns;         /* namespace of the table that published it */
    bool published;
} kv_block_meta;

struct kv_pool {
    kv_config cfg;
    kv_layout layout; /* layout.base: the K/V memory (kv_pool.c's map_blocks) */
    size_t bytes_per_block;
    int32_t n_blocks;
    kv_block_meta *meta; /* (n_blocks) */
    int32_t *tokens;     /* (n_blocks, TS_KV_BLOCK) token ids of published blocks */
    int32_t *buckets;    /* (n_buckets) head of each hash chain, -1 empty */
    uint64_t bucket_mask; /* n_buckets - 1 */
    int32_t free_head;
    int32_t lru_head, lru_tail; /* head = least recently released: evicted first */
    kv_stats stats;
};

/* The files of src/kv/ call down only: kv_table.c -> kv_prefix.c -> kv_pool.c, and
 * kv_check.c, which nothing here calls, -> kv_prefix.c. */

/* kv_pool.c: takes the free list's head; -1 when the list is empty. */
int32_t kv_block_take_free(kv_pool *pool);
/* kv_pool.c: takes the LRU head off the LRU list, still published (the caller evicts it);
 * -1 when no block is cached. Both takers hand the block back USED with refcount 1. */
int32_t kv_block_take_cached(kv_pool *pool);
/* refcount - 1; at 0 a published block goes to the LRU tail, others to the free list. */
void kv_block_unref(kv_pool *pool, int32_t b);
/* refcount + 1; a cached block leaves the LRU list. */
void kv_block_ref(kv_pool *pool, int32_t b);

/* kv_prefix.c: takes a block (free list first, else evicts the LRU head: unpublished and
 * counted in evictions); -1 when none. The block comes back USED with refcount 1. */
int32_t kv_block_alloc(kv_pool *pool);
/* Removes a published block from the hash index and bumps its gen. */
void kv_prefix_unpublish(kv_pool *pool, int32_t b);
/* True when b is reachable in the hash index (for kv_pool_check). */
bool kv_prefix_indexed(const kv_pool *pool, int32_t b);
/* Number of entries in the hash index (for kv_pool_check). */
int64_t kv_prefix_index_size(const kv_pool *pool);

/* Makes room for n_blocks entries in t->blocks; TS_ERR_NOMEM leaves t as is. Here, below
 * both its callers (kv_table.c's reserve and fork, kv_prefix.c's lookup), since it touches
 * no pool. */
static inline ts_status kv_table_grow(kv_table *t, int64_t n_blocks, ts_error *err)
{
    if (n_blocks <= t->cap)
        return TS_OK;
    int64_t cap = t->cap ? t->cap : 8;
    while (cap < n_blocks)
        cap *= 2;
    int32_t *blocks = realloc(t->blocks, (size_t)cap * sizeof *blocks);
    if (!blocks)
        return ts_error_set(err, TS_ERR_NOMEM, "kv table: cannot grow to %lld blocks",
                            (long long)cap);
    t->blocks = blocks;
    t->cap = (int32_t)cap;
    return TS_OK;
}

#endif /* TESSERA_KV_KV_INTERNAL_H */
