/* kv_pool.c: the KV block pool: one up-front mapping, a free list, reference counts,
 * the LRU list of cached blocks and the counters. Eviction, which unpublishes a block,
 * belongs to the prefix cache (kv_prefix.c); the invariant check to kv_check.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kv/kv_internal.h"
#include "simd.h"

static bool config_ok(const kv_config *c)
{
    return c && c->n_layers > 0 && c->n_layers <= 4096 && c->n_kv_heads > 0 &&
           c->n_kv_heads <= 4096 && c->head_dim > 0 && c->head_dim <= 4096 &&
           (c->dtype == KV_DTYPE_F32 || c->dtype == KV_DTYPE_F16 ||
            (c->dtype == KV_DTYPE_Q8_0 && c->head_dim <= SIMD_KV_Q8_MAX_HEAD_DIM));
}

/* Bytes of one (layer, K or V, kv head) run of a block. */
static size_t run_bytes(const kv_config *c)
{
    if (c->dtype == KV_DTYPE_Q8_0)
        return SIMD_KV_Q8_RUN_BYTES(c->head_dim);
    return (size_t)TS_KV_BLOCK * (size_t)c->head_dim * (c->dtype == KV_DTYPE_F16 ? 2 : 4);
}

size_t kv_block_bytes(const kv_config *cfg)
{
    if (!config_ok(cfg))
        return 0;
    return (size_t)cfg->n_layers * 2 * (size_t)cfg->n_kv_heads * run_bytes(cfg);
}

/* ---- pool ---- */

static size_t page_bytes(void)
{
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

/* The K/V memory's length: its blocks, rounded up to whole pages. */
static size_t mapped_bytes(const kv_pool *pool)
{
    const size_t page = page_bytes();
    return ((size_t)pool->n_blocks * pool->bytes_per_block + page - 1) / page * page;
}

/* The K/V memory: its own anonymous mapping, so a new pool holds zeros whatever the
 * allocator would have handed back, and its pages are committed by the kernel
 * (kv_pool_prefault) rather than by writing them. A PROT_NONE page after it makes a read or
 * write past the last block fault in every build, as AddressSanitizer's redzone did for the
 * heap block it replaces. NULL when refused. */
static void *map_blocks(size_t len)
{
    const size_t page = page_bytes();
    char *p = mmap(NULL, len + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (mprotect(p + len, page, PROT_NONE) != 0) {
        munmap(p, len + page);
        return NULL;
    }
    return p;
}

ts_status kv_pool_init(kv_pool **out, const kv_config *cfg, ts_error *err)
{
    *out = NULL;
    if (!config_ok(cfg))
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv config: layers, kv heads and head_dim must be in 1..4096 and "
                            "the type f32, f16 or q8_0 (head_dim at most %d)",
                            SIMD_KV_Q8_MAX_HEAD_DIM);
    size_t bpb = kv_block_bytes(cfg);
    int64_t n = cfg->n_blocks > 0 ? cfg->n_blocks : (int64_t)(cfg->mem_bytes / bpb);
    if (n <= 0)
        return ts_error_set(err, TS_ERR_INVALID_ARG,
                            "kv memory of %zu bytes is smaller than one block (%zu bytes)",
                            cfg->mem_bytes, bpb);
    if (n > INT32_MAX / 2 || (uint64_t)n > SIZE_MAX / 2 / bpb)
        return ts_error_set(err, TS_ERR_NOMEM, "kv pool of %lld blocks of %zu bytes is too large",
                            (long long)n, bpb);

    kv_pool *pool = calloc(1, sizeof *pool);
    if (!pool)
        return ts_error_set(err, TS_ERR_NOMEM, "kv pool: out of memory");
    pool->cfg = *cfg;
    if (!pool->cfg.to_f16)
        pool->cfg.to_f16 = kv_f32_to_f16;
    pool->n_blocks = (int32_t)n;
    pool->bytes_per_block = bpb;

    size_t n_buckets = 1;
    while (n_buckets < (size_t)n)
        n_buckets <<= 1;
    pool->bucket_mask = n_buckets - 1;
    pool->meta = calloc((size_t)n, sizeof *pool->meta);
    pool->tokens = malloc((size_t)n * TS_KV_BLOCK * sizeof *pool->tokens);
    pool->buckets = malloc(n_buckets * sizeof *pool->buckets);
    size_t bytes = (size_t)n * bpb;
    void *data = map_blocks(mapped_bytes(pool));
    pool->layout.base = data;
    if (!pool->meta || !pool->tokens || !pool->buckets || !data) {
        ts_error_set(err, TS_ERR_NOMEM, "kv pool: cannot allocate %lld blocks (%zu bytes)",
                     (long long)n, bytes);
        goto fail;
    }

    kv_layout *l = &pool->layout;
    l->dtype = cfg->dtype;
    l->elem_size = cfg->dtype == KV_DTYPE_Q8_0 ? 1 : cfg->dtype == KV_DTYPE_F16 ? 2 : 4;
    l->n_layers = cfg->n_layers;
    l->n_kv_heads = cfg->n_kv_heads;
    l->head_dim = cfg->head_dim;
    l->head_stride = run_bytes(cfg) / l->elem_size;
    l->v_offset = (size_t)cfg->n_kv_heads * l->head_stride;
    l->layer_stride = 2 * l->v_offset;
    l->block_stride = (size_t)cfg->n_layers * l->layer_stride;

    for (size_t i = 0; i < n_buckets; i++)
        pool->buckets[i] = -1;
    for (int32_t b = 0; b < pool->n_blocks; b++) {
        kv_block_meta *m = &pool->meta[b];
        m->state = KV_BLOCK_FREE;
        m->prev = -1;
        m->next = b + 1 < pool->n_blocks ? b + 1 : -1;
        m->hnext = -1;
        m->parent = -1;
    }
    pool->free_head = 0;
    pool->lru_head = pool->lru_tail = -1;
    pool->stats.blocks_total = n;
    pool->stats.blocks_free = n;
    pool->stats.bytes_per_block = bpb;
    *out = pool;
    return TS_OK;
fail:
    kv_pool_free(pool);
    return TS_ERR_NOMEM;
}

void kv_pool_free(kv_pool *pool)
{
    if (!pool)
        return;
    if (pool->layout.base)
        munmap(pool->layout.base, mapped_bytes(pool) + page_bytes());
    free(pool->meta);
    free(pool->tokens);
    free(pool->buckets);
    free(pool);
}

void kv_pool_zero_free(kv_pool *pool)
{
    const size_t bytes = pool->bytes_per_block; /* f16 or f32: the dtype's size included */
    char *base = pool->layout.base;
#pragma omp parallel for schedule(static)
    for (int32_t b = 0; b < pool->n_blocks; b++)
        if (pool->meta[b].state == KV_BLOCK_FREE) /* the others hold K/V someone reads */
            memset(base + (size_t)b * bytes, 0, bytes);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older C libraries lack the name */
#endif

void kv_pool_prefault(kv_pool *pool)
{
    /* Chunks of 2 MiB (whole pages, and whole huge pages where the kernel gives them) spread
     * over the threads, each faulting its part in as a write would, without writing it. A
     * write of the whole pool did the same at memory speed; under ThreadSanitizer, which
     * shadows every byte written, it took 4 s for stories260K's 170 MB pool per engine. */
    enum { CHUNK = 2 << 20 };
    char *base = pool->layout.base;
    const size_t len = mapped_bytes(pool);
    const int64_t n_chunks = (int64_t)((len + CHUNK - 1) / CHUNK);
    int refused = 0;
#pragma omp parallel for schedule(static) reduction(| : refused)
    for (int64_t i = 0; i < n_chunks; i++) {
        size_t at = (size_t)i * CHUNK, n = len - at < CHUNK ? len - at : CHUNK;
        refused |= madvise(base + at, n, MADV_POPULATE_WRITE) != 0;
    }
    if (refused) /* an older kernel: the write commits the pages instead */
        kv_pool_zero_free(pool);
}

kv_layout kv_pool_layout(const kv_pool *pool) { return pool->layout; }

void kv_pool_stats(kv_stats *out, const kv_pool *pool) { *out = pool->stats; }

int64_t kv_pool_available(const kv_pool *pool)
{
    return pool->stats.blocks_free + pool->stats.blocks_cached;
}

int32_t kv_block_refcount(const kv_pool *pool, int32_t block)
{
    return block >= 0 && block < pool->n_blocks ? pool->meta[block].refcount : -1;
}

bool kv_block_published(const kv_pool *pool, int32_t block)
{
    return block >= 0 && block < pool->n_blocks && pool->meta[block].published;
}

/* ---- free list and LRU ---- */

static void lru_remove(kv_pool *pool, int32_t b)
{
    kv_block_meta *m = &pool->meta[b];
    if (m->prev >= 0)
        pool->meta[m->prev].next = m->next;
    else
        pool->lru_head = m->next;
    if (m->next >= 0)
        pool->meta[m->next].prev = m->prev;
    else
        pool->lru_tail = m->prev;
    m->prev = m->next = -1;
}

static void lru_push_tail(kv_pool *pool, int32_t b)
{
    kv_block_meta *m = &pool->meta[b];
    m->next = -1;
    m->prev = pool->lru_tail;
    if (pool->lru_tail >= 0)
        pool->meta[pool->lru_tail].next = b;
    else
        pool->lru_head = b;
    pool->lru_tail = b;
}

/* The block leaves its list as a USED block of refcount 1. */
static int32_t claim(kv_pool *pool, int32_t b)
{
    kv_block_meta *m = &pool->meta[b];
    m->state = KV_BLOCK_USED;
    m->refcount = 1;
    m->prev = m->next = -1;
    pool->stats.blocks_used++;
    return b;
}

int32_t kv_block_take_free(kv_pool *pool)
{
    int32_t b = pool->free_head;
    if (b < 0)
        return -1;
    pool->free_head = pool->meta[b].next;
    pool->stats.blocks_free--;
    return claim(pool, b);
}

int32_t kv_block_take_cached(kv_pool *pool)
{
    int32_t b = pool->lru_head;
    if (b < 0)
        return -1;
    lru_remove(pool, b);
    pool->stats.blocks_cached--;
    return claim(pool, b);
}

void kv_block_ref(kv_pool *pool, int32_t b)
{
    kv_block_meta *m = &pool->meta[b];
    if (m->state == KV_BLOCK_CACHED) {
        lru_remove(pool, b);
        m->state = KV_BLOCK_USED;
        pool->stats.blocks_cached--;
        pool->stats.blocks_used++;
    }
    m->refcount++;
}

void kv_block_unref(kv_pool *pool, int32_t b)
{
    kv_block_meta *m = &pool->meta[b];
    if (--m->refcount > 0)
        return;
    pool->stats.blocks_used--;
    if (m->published) {
        m->state = KV_BLOCK_CACHED;
        lru_push_tail(pool, b);
        pool->stats.blocks_cached++;
    } else {
        m->state = KV_BLOCK_FREE;
        m->prev = -1;
        m->next = pool->free_head;
        pool->free_head = b;
        pool->stats.blocks_free++;
    }
}
