/* kv.h: the paged KV cache: a pool of fixed 32-token blocks, per-sequence block tables
 * with reference counts and copy on write, and a prefix cache of published full blocks
 * (hash chain + token comparison, LRU reuse of released blocks).
 *
 * Ownership: the caller owns pools and tables; every other pointer parameter is borrowed
 * for the duration of the call unless its comment says otherwise.
 *
 * Threading: the engine thread that owns a pool is its only caller; nothing here locks.
 * Other threads (the /metrics handler) must not call in: the engine copies the counters
 * with kv_pool_stats() at a step boundary and publishes that snapshot under its own lock.
 *
 * Write protocol for a sequence: kv_table_reserve(n) first (it allocates blocks and copies
 * a shared partial last block, so every slot it covers lies in a block of refcount 1),
 * then kv_table_write() the K/V rows of the new positions for every layer, then, for each
 * block that became full, kv_prefix_publish(). Shared blocks are read-only.
 *
 * Sharing: kv_table_fork() shares every block, the partial last one included; the first
 * sharer to append into that block gets a private copy of its filled slots (copy on
 * write); the last holder writes in place. Full blocks are never written again.
 *
 * Prefix cache and eviction: a published block whose refcount falls to 0 is "cached": it
 * joins the tail of an LRU list and stays findable. Allocation takes the free list first,
 * then the LRU head, which it unpublishes (counted in evictions). A table releases its
 * blocks last to first and a lookup maps whole chains from block 0, so a child always sits
 * ahead of its parent on the LRU list and a chain is reclaimed from its deep end: cached
 * blocks remain a findable prefix. Should a child outlive its parent anyway, a generation
 * number bumped on unpublish makes it unreachable (never a wrong hit), and LRU reclaims it
 * as dead weight. */
#ifndef TESSERA_KV_KV_H
#define TESSERA_KV_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#ifndef TS_KV_BLOCK
#define TS_KV_BLOCK 32 /* token slots per block; simd/simd.h defines the same value */
#endif

typedef enum kv_dtype {
    KV_DTYPE_F32,
    KV_DTYPE_F16, /* IEEE binary16, stored as uint16_t; half the memory */
    KV_DTYPE_Q8_0, /* int8 with an f16 scale per 32 values (simd.h's SIMD_KV_Q8_*): 53%
                    * of f16's bytes at head_dim 128; head_dim at most 512 */
} kv_dtype;

/* Key of a full block from its parent's key (KV_HASH_SEED for block 0) and its
 * TS_KV_BLOCK token ids. Tests replace it to force collisions. */
typedef uint64_t (*kv_hash_fn)(uint64_t parent_key, const int32_t *tokens, void *ctx);
#define KV_HASH_SEED UINT64_C(0x7465737365726121) /* "tessera!" */

typedef struct kv_config {
    int n_layers;
    int n_kv_heads;
    int head_dim;
    kv_dtype dtype;
    int64_t n_blocks;   /* pool size in blocks; when <= 0, mem_bytes decides */
    size_t mem_bytes;   /* pool size in bytes, rounded down to whole blocks */
    kv_hash_fn hash_fn; /* NULL: the built-in 64-bit hash; a test hook otherwise */
    void *hash_ctx;     /* borrowed, must outlive the pool; passed to hash_fn */
    /* f32 -> f16 for an f16 pool's stores; NULL: kv_f32_to_f16. The engine passes its
     * SIMD table's (F16C, NEON), which gives the same bits: a step's K/V stores had
     * taken longer than the f16 reads saved, in plain C. */
    void (*to_f16)(uint16_t *out, const float *in, size_t n);
} kv_config;

/* Where the attention kernels find K and V. Offsets and strides count elements of dtype
 * from base. Physical block b, layer l, kv head h, slot s, dimension d:
 *   K at b*block_stride + l*layer_stride            + h*head_stride + s*head_dim + d
 *   V at b*block_stride + l*layer_stride + v_offset + h*head_stride + s*head_dim + d
 * with head_stride = 32*hd, v_offset = n_kv*head_stride, layer_stride = 2*v_offset,
 * block_stride = n_layers*layer_stride. base is 64-byte aligned. q8_0 counts bytes, and
 * each (layer, K/V, head) run holds its 32 rows' scales after their values: head_stride =
 * SIMD_KV_Q8_RUN_BYTES(hd). */
typedef struct kv_layout {
    void *base;          /* (n_blocks, n_layers, 2, n_kv_heads, TS_KV_BLOCK, head_dim) */
    kv_dtype dtype;
    size_t elem_size;    /* 4, 2 or 1 (q8_0) bytes */
    int n_layers, n_kv_heads, head_dim;
    size_t head_stride;  /* TS_KV_BLOCK * head_dim; q8_0: SIMD_KV_Q8_RUN_BYTES(head_dim) */
    size_t v_offset;     /* n_kv_heads * head_stride */
    size_t layer_stride; /* 2 * v_offset */
    size_t block_stride; /* n_layers * layer_stride */
} kv_layout;

/* Counters and gauges. Counters only grow; copy them with kv_pool_stats(). */
typedef struct kv_stats {
    uint64_t lookups;       /* kv_prefix_lookup() calls */
    uint64_t hit_blocks;    /* full blocks a lookup mapped from the cache */
    uint64_t missed_blocks; /* full blocks a lookup looked for and did not find */
    uint64_t evictions;     /* cached blocks reclaimed (unpublished) for new data */
    uint64_t cow_copies;    /* shared partial blocks copied before a write */
    int64_t blocks_total;
    int64_t blocks_free;    /* on the free list */
    int64_t blocks_used;    /* refcount > 0 */
    int64_t blocks_cached;  /* refcount 0, published, on the LRU list */
    size_t bytes_per_block;
} kv_stats;

/* A sequence's block table. The engine reads the fields; only kv_* functions change them. */
typedef struct kv_table {
    int32_t *blocks;  /* (cap) physical id of each logical block; n_blocks are valid */
    int32_t n_blocks;
    int32_t cap;
    int64_t n_tokens; /* positions held; n_blocks == ceil(n_tokens / TS_KV_BLOCK) */
    uint64_t ns;      /* prefix-cache namespace: its blocks are published to, and found
                       * by, tables of the same ns only (0 = the shared one) */
} kv_table;

typedef struct kv_pool kv_pool;

/* ---- sizes ---- */

/* Bytes one block takes for this config (0 when the config is invalid). */
size_t kv_block_bytes(const kv_config *cfg);

/* ---- pool ---- */

/* Allocates the whole pool up front; on success *out owns it (kv_pool_free). cfg is copied. TS_ERR_INVALID_ARG for a bad shape or
 * a pool smaller than one block, TS_ERR_NOMEM when the memory cannot be had. */
ts_status kv_pool_init(kv_pool **out, const kv_config *cfg, ts_error *err);
/* Accepts NULL. Free the pool's tables first; a table outliving its pool may only be
 * passed to kv_table_free(NULL, t), which frees its array. */
void kv_pool_free(kv_pool *pool);

/* Commits every page of the pool's K/V memory now, on the calling thread's OpenMP threads,
 * so that a machine short of memory fails at start-up and no step takes first-touch page
 * faults. It changes no byte (madvise MADV_POPULATE_WRITE, Linux 5.14); where the kernel
 * refuses that, it writes zeros over the free blocks instead (kv_pool_zero_free). The lists,
 * counters and prefix cache are left as they are. */
void kv_pool_prefault(kv_pool *pool);
/* Writes zeros over the K and V of every free block, on the calling thread's OpenMP
 * threads; used and cached blocks keep their contents. (A new pool already holds zeros.) */
void kv_pool_zero_free(kv_pool *pool);

kv_layout kv_pool_layout(const kv_pool *pool);
void kv_pool_stats(kv_stats *out, const kv_pool *pool);
/* Blocks an allocation can take now: free ones plus cached ones (evicted on demand). */
int64_t kv_pool_available(const kv_pool *pool);
int32_t kv_block_refcount(const kv_pool *pool, int32_t block);
bool kv_block_published(const kv_pool *pool, int32_t block);

/* Debug check of every invariant: each block is exactly one of free / used / cached;
 * list lengths match the gauges; free and cached blocks have refcount 0, cached blocks are
 * published and in the hash index, free ones are not; each refcount equals the number of
 * references from tables[0..n_tables-1] (borrowed: all live tables of this pool; NULL skips
 * the refcount comparison); table sizes agree with their token counts. TS_ERR_INTERNAL with a message on the first breach. */
ts_status kv_pool_check(const kv_pool *pool, const kv_table *const *tables, int n_tables,
                        ts_error *err);

/* ---- block tables ---- */

/* Initializes an empty table (no allocation until the first reserve). */
void kv_table_init(kv_table *t);
/* Releases t's blocks and frees its array; t is empty afterwards. Accepts t == NULL, and
 * pool == NULL for a table whose pool is gone (its blocks are then not released). */
void kv_table_free(kv_pool *pool, kv_table *t);
/* Drops every block of t (refcount - 1; at 0 published blocks become cached, others free);
 * keeps the array for reuse. */
void kv_table_release(kv_pool *pool, kv_table *t);

/* Blocks kv_table_reserve(n) would take from the pool: new blocks plus one copy when the
 * last block is partial and shared. */
int64_t kv_table_blocks_needed(const kv_pool *pool, const kv_table *t, int64_t n);

/* Makes room for n more tokens: allocates blocks (reusing cached ones, LRU first, when the
 * free list is empty) and copies a shared partial last block (copy on write). Atomic:
 * TS_ERR_OUT_OF_BLOCKS or TS_ERR_NOMEM leave t and the pool unchanged. */
ts_status kv_table_reserve(kv_pool *pool, kv_table *t, int64_t n, ts_error *err);

/* Gives back the positions of t from n_tokens on (n_tokens <= t->n_tokens): the blocks
 * past the one holding position n_tokens - 1 are released (refcount - 1), and the slots
 * kept in the last block are overwritten by the next reserve's writes. Rolls back the K/V
 * of rejected draft tokens. TS_ERR_INVALID_ARG for n_tokens outside 0..t->n_tokens. */
ts_status kv_table_truncate(kv_pool *pool, kv_table *t, int64_t n_tokens, ts_error *err);

/* Makes dst (empty, initialized) share every block of src: refcount + 1 each. Call it
 * n - 1 times for n completions of one prompt. A partial last block is then shared; the
 * first sequence to reserve into it gets a private copy (see kv_table_reserve). */
ts_status kv_table_fork(kv_pool *pool, kv_table *dst, const kv_table *src, ts_error *err);

/* Writes the K and V rows of position pos (< n_tokens) for one layer: k and v are
 * (n_kv_heads, head_dim) f32 each (borrowed), converted to the pool's dtype.
 * TS_ERR_INVALID_ARG when pos or layer is out of range or the block is shared. */
ts_status kv_table_write(kv_pool *pool, const kv_table *t, int layer, int64_t pos,
                         const float *k, const float *v, ts_error *err);

/* Reads back what kv_table_write stored, as f32 (tests, reference attention). */
ts_status kv_table_read(float *k, float *v, const kv_pool *pool, const kv_table *t, int layer,
                        int64_t pos, ts_error *err);

/* ---- element conversion: the SIMD library's plain-C reference (kv_config.to_f16 takes a
 * faster one for the stores) ---- */

void kv_f32_to_f16(uint16_t *out, const float *in, size_t n);
void kv_f16_to_f32(float *out, const uint16_t *in, size_t n);

/* ---- prefix cache ---- */

/* Publishes logical block i of t, which must be full; tokens are its TS_KV_BLOCK ids
 * (copied). Its key chains from block i-1, which must be published already; when it is
 * not (a chain broken by eviction or by an earlier skipped publish) nothing happens and
 * *published is false. When an equal block (same parent, same tokens) is already
 * published, t switches to that block and drops its own copy, so identical prompts that
 * ran side by side end up sharing. Publishing a block already published is a no-op.
 * published may be NULL. */
ts_status kv_prefix_publish(kv_pool *pool, kv_table *t, int32_t i, const int32_t *tokens,
                            bool *published, ts_error *err);

/* Walks the full blocks of tokens[0..n_tokens) (borrowed) and maps the longest chain of
 * published blocks into t, which must be empty: refcount + 1 each, cached ones move back
 * to used. *n_matched gets the tokens mapped, a multiple of TS_KV_BLOCK; t->n_tokens is
 * set to it. A hit compares parent block and tokens, never the key alone, so a hash
 * collision cannot share wrong KV.
 * Callers that must compute the logits of the prompt's last token pass
 * n_tokens = n_prompt - 1, so the block holding that token is never mapped (at most
 * (n_prompt - 1) rounded down to a block is matched). */
ts_status kv_prefix_lookup(kv_pool *pool, kv_table *t, const int32_t *tokens, int64_t n_tokens,
                           int64_t *n_matched, ts_error *err);

/* The number of tokens kv_prefix_lookup would match for a table of namespace 0, without
 * mapping or counting. */
int64_t kv_prefix_match(const kv_pool *pool, const int32_t *tokens, int64_t n_tokens);

#endif /* TESSERA_KV_KV_H */
