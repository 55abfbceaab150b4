/* kv_prefix.c: the prefix cache: a hash index of published full blocks keyed by
 * hash(parent key, 32 token ids), verified on every hit by parent identity and tokens,
 * and the eviction of cached blocks when the free list is empty. */
#include <string.h>

#include "kv/kv_internal.h"

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* Two token ids per 64-bit word, each word folded in through a full avalanche mix. */
static uint64_t default_hash(uint64_t parent_key, const int32_t *tokens)
{
    uint64_t h = mix64(parent_key ^ UINT64_C(0x9e3779b97f4a7c15));
    for (int i = 0; i < TS_KV_BLOCK; i += 2) {
        uint64_t w = (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32;
        h = mix64(h + w * UINT64_C(0x9e3779b97f4a7c15));
    }
    return h;
}

/* The parent key of a chain's first block: the namespace is mixed in (0 keeps the seed),
 * and find() compares it too, so no collision crosses namespaces. */
static uint64_t root_key(uint64_t ns)
{
    return ns ? mix64(KV_HASH_SEED ^ ns) : KV_HASH_SEED;
}

static uint64_t block_hash(const kv_pool *pool, uint64_t parent_key, const int32_t *tokens)
{
    if (pool->cfg.hash_fn)
        return pool->cfg.hash_fn(parent_key, tokens, pool->cfg.hash_ctx);
    return default_hash(parent_key, tokens);
}

static const int32_t *block_tokens(const kv_pool *pool, int32_t b)
{
    return pool->tokens + (size_t)b * TS_KV_BLOCK;
}

/* The published block with this key whose parent is (parent, parent_gen) and whose
 * tokens equal tokens; -1 when none. */
static int32_t find(const kv_pool *pool, uint64_t key, int32_t parent, uint32_t parent_gen,
                    uint64_t ns, const int32_t *tokens)
{
    for (int32_t b = pool->buckets[key & pool->bucket_mask]; b >= 0; b = pool->meta[b].hnext) {
        const kv_block_meta *m = &pool->meta[b];
        if (m->key == key && m->parent == parent && m->parent_gen == parent_gen && m->ns == ns &&
            memcmp(block_tokens(pool, b), tokens, TS_KV_BLOCK * sizeof *tokens) == 0)
            return b;
    }
    return -1;
}

void kv_prefix_unpublish(kv_pool *pool, int32_t b)
{
    kv_block_meta *m = &pool->meta[b];
    if (!m->published)
        return;
    int32_t *link = &pool->buckets[m->key & pool->bucket_mask];
    while (*link != b)
        link = &pool->meta[*link].hnext;
    *link = m->hnext;
    m->hnext = -1;
    m->published = false;
    m->gen++; /* children published under b no longer match (see kv_block_meta) */
}

int32_t kv_block_alloc(kv_pool *pool)
{
    int32_t b = kv_block_take_free(pool);
    if (b >= 0)
        return b;
    b = kv_block_take_cached(pool);
    if (b < 0)
        return -1;
    kv_prefix_unpublish(pool, b);
    pool->stats.evictions++;
    return b;
}

bool kv_prefix_indexed(const kv_pool *pool, int32_t b)
{
    for (int32_t c = pool->buckets[pool->meta[b].key & pool->bucket_mask]; c >= 0;
         c = pool->meta[c].hnext)
        if (c == b)
            return true;
    return false;
}

int64_t kv_prefix_index_size(const kv_pool *pool)
{
    int64_t n = 0;
    for (uint64_t i = 0; i <= pool->bucket_mask; i++)
        for (int32_t b = pool->buckets[i]; b >= 0 && n <= pool->n_blocks; b = pool->meta[b].hnext)
            n++;
    return n;
}

ts_status kv_prefix_publish(kv_pool *pool, kv_table *t, int32_t i, const int32_t *tokens,
                            bool *published, ts_error *err)
{
    bool dummy;
    if (!published)
        published = &dummy;
    *published = false;
    if (i < 0 || i >= t->n_blocks || (int64_t)(i + 1) * TS_KV_BLOCK > t->n_tokens)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv publish: block %d is not a full block of a %lld-token table", i,
                            (long long)t->n_tokens);
    int32_t b = t->blocks[i];
    kv_block_meta *m = &pool->meta[b];
    if (m->published) {
        if (memcmp(block_tokens(pool, b), tokens, TS_KV_BLOCK * sizeof *tokens) != 0)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "kv publish: block %d is already published with other tokens", i);
        *published = true;
        return TS_OK;
    }
    int32_t parent = i > 0 ? t->blocks[i - 1] : -1;
    if (parent >= 0 && !pool->meta[parent].published)
        return TS_OK; /* broken chain: nothing could find this block */
    uint64_t parent_key = parent >= 0 ? pool->meta[parent].key : root_key(t->ns);
    uint32_t parent_gen = parent >= 0 ? pool->meta[parent].gen : 0;
    uint64_t key = block_hash(pool, parent_key, tokens);

    int32_t same = find(pool, key, parent, parent_gen, t->ns, tokens);
    if (same >= 0) { /* computed twice side by side: share the published copy */
        kv_block_ref(pool, same);
        kv_block_unref(pool, b);
        t->blocks[i] = same;
        *published = true;
        return TS_OK;
    }
    m->key = key;
    m->parent = parent;
    m->parent_gen = parent_gen;
    m->ns = t->ns;
    m->published = true;
    memcpy(pool->tokens + (size_t)b * TS_KV_BLOCK, tokens, TS_KV_BLOCK * sizeof *tokens);
    int32_t *head = &pool->buckets[key & pool->bucket_mask];
    m->hnext = *head;
    *head = b;
    *published = true;
    return TS_OK;
}

/* Walks the chain of published blocks matching tokens; fills found[] (may be NULL) with up
 * to max_blocks ids and returns how many matched. */
static int64_t walk(const kv_pool *pool, uint64_t ns, int32_t *found, const int32_t *tokens,
                    int64_t max_blocks)
{
    int32_t parent = -1;
    uint64_t parent_key = root_key(ns);
    uint32_t parent_gen = 0;
    int64_t i = 0;
    for (; i < max_blocks; i++) {
        const int32_t *tok = tokens + i * TS_KV_BLOCK;
        int32_t b = find(pool, block_hash(pool, parent_key, tok), parent, parent_gen, ns, tok);
        if (b < 0)
            break;
        if (found)
            found[i] = b;
        parent = b;
        parent_key = pool->meta[b].key;
        parent_gen = pool->meta[b].gen;
    }
    return i;
}

int64_t kv_prefix_match(const kv_pool *pool, const int32_t *tokens, int64_t n_tokens)
{
    if (n_tokens <= 0)
        return 0;
    return walk(pool, 0, NULL, tokens, n_tokens / TS_KV_BLOCK) * TS_KV_BLOCK;
}

ts_status kv_prefix_lookup(kv_pool *pool, kv_table *t, const int32_t *tokens, int64_t n_tokens,
                           int64_t *n_matched, ts_error *err)
{
    *n_matched = 0;
    if (t->n_blocks != 0 || t->n_tokens != 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv lookup: the table is not empty");
    if (n_tokens < 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "kv lookup: negative token count");
    int64_t max_blocks = n_tokens / TS_KV_BLOCK;
    if (max_blocks > pool->n_blocks)
        max_blocks = pool->n_blocks; /* a chain cannot be longer than the pool */
    /* Grow first so that a failure leaves nothing half mapped. */
    ts_status st = kv_table_grow(t, max_blocks, err);
    if (st != TS_OK)
        return st;
    int64_t n = walk(pool, t->ns, t->blocks, tokens, max_blocks);
    for (int64_t i = 0; i < n; i++)
        kv_block_ref(pool, t->blocks[i]);
    t->n_blocks = (int32_t)n;
    t->n_tokens = n * TS_KV_BLOCK;
    *n_matched = t->n_tokens;
    pool->stats.lookups++;
    pool->stats.hit_blocks += (uint64_t)n;
    pool->stats.missed_blocks += (uint64_t)(n_tokens / TS_KV_BLOCK - n);
    return TS_OK;
}
