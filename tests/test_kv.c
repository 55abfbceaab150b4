/* test_kv.c: the KV block pool and block tables: block sizes, allocation, out-of-blocks
 * atomicity, refcounts with fork, copy on write, the memory layout, zeroing the free
 * blocks, committing the pool's pages and its guard page, f16 conversion. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "kv/kv.h"

/* Let the NOMEM test see a NULL from malloc under AddressSanitizer instead of a report. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static kv_config small_config(kv_dtype dtype, int64_t n_blocks)
{
    kv_config c = {.n_layers = 2, .n_kv_heads = 2, .head_dim = 4, .dtype = dtype,
                   .n_blocks = n_blocks};
    return c;
}

static void check_pool(const kv_pool *pool, const kv_table *const *tables, int n)
{
    ts_error err = {0};
    ts_status st = kv_pool_check(pool, tables, n, &err);
    if (st != TS_OK)
        fail_msg("kv_pool_check: %s", err.msg);
}

static void test_pool_sizing_and_errors(void **state)
{
    (void)state;
    ts_error err = {0};
    kv_config c = small_config(KV_DTYPE_F32, 0);
    assert_int_equal(kv_block_bytes(&c), 2 * 2 * 2 * 32 * 4 * 4);
    c.mem_bytes = 4 * 4096 + 100; /* 4 blocks of 4096 bytes, the rest rounded away */
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, &err), TS_OK);
    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_total, 4);
    assert_int_equal(s.blocks_free, 4);
    assert_int_equal(s.bytes_per_block, 4096);
    kv_layout l = kv_pool_layout(pool);
    assert_int_equal((uintptr_t)l.base % 64, 0);
    kv_pool_free(pool);

    c.dtype = KV_DTYPE_F16;
    assert_int_equal(kv_block_bytes(&c), 2048);
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_total, 8);
    kv_pool_free(pool);

    c.mem_bytes = 2000; /* smaller than one block */
    assert_int_equal(kv_pool_init(&pool, &c, &err), TS_ERR_INVALID_ARG);
    assert_null(pool);
    assert_non_null(strstr(err.msg, "smaller than one block"));

    kv_config badc = small_config(KV_DTYPE_F32, 4);
    badc.head_dim = 0;
    assert_int_equal(kv_pool_init(&pool, &badc, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(kv_block_bytes(&badc), 0);
    badc = small_config((kv_dtype)7, 4);
    assert_int_equal(kv_pool_init(&pool, &badc, &err), TS_ERR_INVALID_ARG);

    /* 2^15 blocks of 4 GiB: 128 TiB cannot be mapped. */
    kv_config huge = {.n_layers = 512, .n_kv_heads = 64, .head_dim = 512,
                      .dtype = KV_DTYPE_F32, .n_blocks = 1 << 15};
    err = (ts_error){0};
    assert_int_equal(kv_pool_init(&pool, &huge, &err), TS_ERR_NOMEM);
    assert_null(pool);
    assert_int_equal(err.status, TS_ERR_NOMEM);
    /* A byte count whose block count overflows the metadata is refused the same way. */
    huge.n_blocks = 0;
    huge.mem_bytes = SIZE_MAX;
    assert_int_equal(kv_pool_init(&pool, &huge, NULL), TS_ERR_NOMEM);
    kv_pool_free(NULL);
}

static void test_alloc_free_and_out_of_blocks(void **state)
{
    (void)state;
    kv_config c = small_config(KV_DTYPE_F32, 4);
    kv_pool *pool = NULL;
    ts_error err = {0};
    assert_int_equal(kv_pool_init(&pool, &c, &err), TS_OK);
    kv_table t;
    kv_table_init(&t);
    const kv_table *all[] = {&t};

    assert_int_equal(kv_table_blocks_needed(pool, &t, 33), 2);
    assert_int_equal(kv_table_reserve(pool, &t, 33, &err), TS_OK);
    assert_int_equal(t.n_tokens, 33);
    assert_int_equal(t.n_blocks, 2);
    assert_int_not_equal(t.blocks[0], t.blocks[1]);
    assert_int_equal(kv_pool_available(pool), 2);
    check_pool(pool, all, 1);

    assert_int_equal(kv_table_blocks_needed(pool, &t, 31), 0); /* fits in block 1 */
    assert_int_equal(kv_table_reserve(pool, &t, 31 + 64, &err), TS_OK);
    assert_int_equal(t.n_blocks, 4);
    assert_int_equal(kv_pool_available(pool), 0);

    int32_t before[4];
    memcpy(before, t.blocks, sizeof before);
    err = (ts_error){0};
    assert_int_equal(kv_table_reserve(pool, &t, 1, &err), TS_ERR_OUT_OF_BLOCKS);
    assert_non_null(strstr(err.msg, "available"));
    assert_int_equal(t.n_tokens, 128);
    assert_int_equal(t.n_blocks, 4);
    assert_memory_equal(before, t.blocks, sizeof before);
    check_pool(pool, all, 1);
    assert_int_equal(kv_table_reserve(pool, &t, 1000, &err), TS_ERR_OUT_OF_BLOCKS);
    assert_int_equal(kv_table_reserve(pool, &t, INT64_MAX, &err), TS_ERR_OUT_OF_BLOCKS);
    assert_true(kv_table_blocks_needed(pool, &t, INT64_MAX) > 4);
    assert_int_equal(kv_table_reserve(pool, &t, -1, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(kv_table_reserve(pool, &t, 0, &err), TS_OK);
    assert_int_equal(t.n_tokens, 128);

    kv_table_release(pool, &t);
    assert_int_equal(t.n_blocks, 0);
    assert_int_equal(t.n_tokens, 0);
    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_free, 4);
    assert_int_equal(s.blocks_used, 0);
    assert_int_equal(s.blocks_cached, 0);
    check_pool(pool, all, 1);

    /* Blocks come back to the free list and serve the next table. */
    assert_int_equal(kv_table_reserve(pool, &t, 128, &err), TS_OK);
    kv_table_free(pool, &t);
    assert_null(t.blocks);
    check_pool(pool, NULL, 0);
    kv_table_free(NULL, &t);
    kv_table_free(pool, NULL);
    kv_pool_free(pool);
}

static void test_fork_refcounts(void **state)
{
    (void)state;
    kv_config c = small_config(KV_DTYPE_F32, 8);
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_table a, b, d;
    kv_table_init(&a);
    kv_table_init(&b);
    kv_table_init(&d);
    const kv_table *all[] = {&a, &b, &d};

    assert_int_equal(kv_table_reserve(pool, &a, 40, NULL), TS_OK);
    assert_int_equal(kv_table_fork(pool, &b, &a, NULL), TS_OK);
    assert_int_equal(kv_table_fork(pool, &d, &a, NULL), TS_OK);
    assert_int_equal(b.n_tokens, 40);
    assert_memory_equal(a.blocks, d.blocks, 2 * sizeof(int32_t));
    assert_int_equal(kv_block_refcount(pool, a.blocks[0]), 3);
    assert_int_equal(kv_block_refcount(pool, a.blocks[1]), 3);
    assert_int_equal(kv_block_refcount(pool, -1), -1);
    check_pool(pool, all, 3);
    ts_error err = {0};
    assert_int_equal(kv_table_fork(pool, &b, &a, &err), TS_ERR_INVALID_ARG);

    kv_table_release(pool, &a);
    assert_int_equal(kv_block_refcount(pool, b.blocks[0]), 2);
    check_pool(pool, all, 3);
    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_used, 2);
    kv_table_free(pool, &b);
    kv_table_free(pool, &d);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_free, 8);
    kv_table_free(pool, &a);
    check_pool(pool, all, 3);
    kv_pool_free(pool);
}

/* Fills positions [from, to) of t with values unique to (tag, layer, head, pos, d). */
static void fill(kv_pool *pool, kv_table *t, int64_t from, int64_t to, float tag)
{
    float k[8], v[8];
    for (int64_t p = from; p < to; p++)
        for (int l = 0; l < 2; l++) {
            for (int i = 0; i < 8; i++) {
                k[i] = tag + (float)(p * 100 + l * 10 + i);
                v[i] = -k[i];
            }
            ts_error err = {0};
            if (kv_table_write(pool, t, l, p, k, v, &err) != TS_OK)
                fail_msg("write %lld: %s", (long long)p, err.msg);
        }
}

static void expect(const kv_pool *pool, const kv_table *t, int64_t p, float tag)
{
    float k[8], v[8];
    for (int l = 0; l < 2; l++) {
        assert_int_equal(kv_table_read(k, v, pool, t, l, p, NULL), TS_OK);
        for (int i = 0; i < 8; i++) {
            assert_float_equal(k[i], tag + (float)(p * 100 + l * 10 + i), 0);
            assert_float_equal(v[i], -(tag + (float)(p * 100 + l * 10 + i)), 0);
        }
    }
}

static void test_copy_on_write(void **state)
{
    (void)state;
    kv_config c = small_config(KV_DTYPE_F32, 4);
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_layout l = kv_pool_layout(pool);
    kv_table a, b;
    kv_table_init(&a);
    kv_table_init(&b);
    const kv_table *all[] = {&a, &b};

    assert_int_equal(kv_table_reserve(pool, &a, 40, NULL), TS_OK);
    fill(pool, &a, 0, 40, 0.0f);
    assert_int_equal(kv_table_fork(pool, &b, &a, NULL), TS_OK);
    int32_t shared_partial = a.blocks[1];
    size_t bytes = l.block_stride * l.elem_size;
    unsigned char *snapshot = malloc(bytes);
    assert_non_null(snapshot);
    memcpy(snapshot, (char *)l.base + (size_t)shared_partial * bytes, bytes);

    /* Shared blocks are read-only. */
    float row[8] = {0};
    ts_error err = {0};
    assert_int_equal(kv_table_write(pool, &b, 0, 35, row, row, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "read-only"));
    assert_int_equal(kv_table_write(pool, &b, 2, 35, row, row, NULL), TS_ERR_INVALID_ARG);
    assert_int_equal(kv_table_write(pool, &b, 0, 40, row, row, NULL), TS_ERR_INVALID_ARG);
    assert_int_equal(kv_table_read(row, row, pool, &b, 0, -1, NULL), TS_ERR_INVALID_ARG);

    assert_int_equal(kv_table_blocks_needed(pool, &b, 1), 1); /* the copy */
    assert_int_equal(kv_table_reserve(pool, &b, 1, NULL), TS_OK);
    assert_int_equal(b.blocks[0], a.blocks[0]);
    assert_int_not_equal(b.blocks[1], shared_partial);
    assert_int_equal(a.blocks[1], shared_partial);
    assert_int_equal(kv_block_refcount(pool, shared_partial), 1);
    assert_int_equal(kv_block_refcount(pool, b.blocks[1]), 1);
    check_pool(pool, all, 2);
    for (int64_t p = 0; p < 40; p++)
        expect(pool, &b, p, 0.0f); /* the copy carries the 8 written slots */
    fill(pool, &b, 40, 41, 5000.0f);
    expect(pool, &b, 40, 5000.0f);
    assert_memory_equal(snapshot, (char *)l.base + (size_t)shared_partial * bytes, bytes);

    /* a now owns its partial block alone: it appends in place, no second copy. */
    assert_int_equal(kv_table_blocks_needed(pool, &a, 1), 0);
    assert_int_equal(kv_table_reserve(pool, &a, 1, NULL), TS_OK);
    assert_int_equal(a.blocks[1], shared_partial);
    fill(pool, &a, 40, 41, 9000.0f);
    expect(pool, &a, 40, 9000.0f);
    expect(pool, &b, 40, 5000.0f);
    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.cow_copies, 1);

    /* A copy needs a block: with none left the append fails and changes nothing. */
    kv_table d;
    kv_table_init(&d);
    assert_int_equal(kv_table_fork(pool, &d, &b, NULL), TS_OK);
    kv_table e;
    kv_table_init(&e);
    assert_int_equal(kv_table_reserve(pool, &e, 32, NULL), TS_OK);
    assert_int_equal(kv_pool_available(pool), 0);
    int32_t before[2] = {d.blocks[0], d.blocks[1]};
    assert_int_equal(kv_table_reserve(pool, &d, 1, NULL), TS_ERR_OUT_OF_BLOCKS);
    assert_memory_equal(before, d.blocks, sizeof before);
    assert_int_equal(d.n_tokens, 41);
    const kv_table *all4[] = {&a, &b, &d, &e};
    check_pool(pool, all4, 4);

    free(snapshot);
    kv_table_free(pool, &a);
    kv_table_free(pool, &b);
    kv_table_free(pool, &d);
    kv_table_free(pool, &e);
    check_pool(pool, NULL, 0);
    kv_pool_free(pool);
}

/* K/V of (block, layer, head, slot) land at the offsets kv.h documents. */
static void layout_case(kv_dtype dtype)
{
    enum { NL = 3, NKV = 2, HD = 4, NTOK = 70 };
    kv_config c = {.n_layers = NL, .n_kv_heads = NKV, .head_dim = HD, .dtype = dtype,
                   .n_blocks = 5};
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_layout l = kv_pool_layout(pool);
    assert_int_equal(l.head_stride, 32 * HD);
    assert_int_equal(l.v_offset, NKV * 32 * HD);
    assert_int_equal(l.layer_stride, 2 * NKV * 32 * HD);
    assert_int_equal(l.block_stride, NL * 2 * NKV * 32 * HD);
    assert_int_equal(l.elem_size, dtype == KV_DTYPE_F16 ? 2 : 4);

    kv_table t;
    kv_table_init(&t);
    assert_int_equal(kv_table_reserve(pool, &t, NTOK, NULL), TS_OK);
    float k[NKV * HD], v[NKV * HD];
    /* Codes stay below 2048 so f16 holds them exactly. */
#define CODE(layer, h, p, d) ((float)((((layer) * NKV + (h)) * NTOK + (p)) * HD + (d)) / 4.0f)
    for (int p = 0; p < NTOK; p++)
        for (int layer = 0; layer < NL; layer++) {
            for (int h = 0; h < NKV; h++)
                for (int d = 0; d < HD; d++) {
                    k[h * HD + d] = CODE(layer, h, p, d);
                    v[h * HD + d] = -CODE(layer, h, p, d);
                }
            assert_int_equal(kv_table_write(pool, &t, layer, p, k, v, NULL), TS_OK);
        }
    for (int p = 0; p < NTOK; p++)
        for (int layer = 0; layer < NL; layer++)
            for (int h = 0; h < NKV; h++)
                for (int d = 0; d < HD; d++) {
                    size_t b = (size_t)t.blocks[p / 32], s = (size_t)(p % 32);
                    size_t ko = b * l.block_stride + (size_t)layer * 2 * NKV * 32 * HD +
                                (size_t)h * 32 * HD + s * HD + (size_t)d;
                    size_t vo = ko + NKV * 32 * HD;
                    float kg, vg;
                    if (dtype == KV_DTYPE_F16) {
                        kv_f16_to_f32(&kg, (const uint16_t *)l.base + ko, 1);
                        kv_f16_to_f32(&vg, (const uint16_t *)l.base + vo, 1);
                    } else {
                        kg = ((const float *)l.base)[ko];
                        vg = ((const float *)l.base)[vo];
                    }
                    assert_float_equal(kg, CODE(layer, h, p, d), 0);
                    assert_float_equal(vg, -CODE(layer, h, p, d), 0);
                }
#undef CODE
    kv_table_free(pool, &t);
    kv_pool_free(pool);
}

static void test_layout_f32(void **state)
{
    (void)state;
    layout_case(KV_DTYPE_F32);
}

static void test_layout_f16(void **state)
{
    (void)state;
    layout_case(KV_DTYPE_F16);
}

/* kv_pool_zero_free (kv_pool_prefault's way on a kernel without MADV_POPULATE_WRITE) zeroes
 * the free blocks and nothing else: a used block and a cached one (published, then
 * released) keep their K and V, and the counts, the free list and the prefix cache are as
 * they were. */
static void zero_free_case(kv_dtype dtype)
{
    enum { N_BLOCKS = 6 };
    kv_config c = small_config(dtype, N_BLOCKS);
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_layout l = kv_pool_layout(pool);
    const size_t bytes = l.block_stride * l.elem_size;
    memset(l.base, 0xa5, N_BLOCKS * bytes); /* dirty, so zeros afterwards are its work */

    int32_t tokens[TS_KV_BLOCK];
    for (int i = 0; i < TS_KV_BLOCK; i++)
        tokens[i] = i + 1;
    kv_table cached, used;
    kv_table_init(&cached);
    kv_table_init(&used);
    assert_int_equal(kv_table_reserve(pool, &cached, TS_KV_BLOCK, NULL), TS_OK);
    fill(pool, &cached, 0, TS_KV_BLOCK, 1.0f);
    bool published = false;
    assert_int_equal(kv_prefix_publish(pool, &cached, 0, tokens, &published, NULL), TS_OK);
    assert_true(published);
    int32_t cached_block = cached.blocks[0];
    kv_table_free(pool, &cached);
    assert_int_equal(kv_table_reserve(pool, &used, 40, NULL), TS_OK); /* one full, one partial */
    fill(pool, &used, 0, 40, 2.0f);

    unsigned char *before = malloc(N_BLOCKS * bytes);
    assert_non_null(before);
    memcpy(before, l.base, N_BLOCKS * bytes);
    kv_stats s0, s1;
    kv_pool_stats(&s0, pool);
    assert_int_equal(s0.blocks_free, 3);
    assert_int_equal(s0.blocks_cached, 1);
    assert_int_equal(s0.blocks_used, 2);

    kv_pool_zero_free(pool);

    int n_zeroed = 0;
    for (int32_t b = 0; b < N_BLOCKS; b++) {
        const unsigned char *p = (const unsigned char *)l.base + (size_t)b * bytes;
        bool is_free = kv_block_refcount(pool, b) == 0 && !kv_block_published(pool, b);
        if (is_free) {
            for (size_t i = 0; i < bytes; i++)
                if (p[i] != 0)
                    fail_msg("free block %d: byte %zu is 0x%02x after zeroing", b, i, p[i]);
            n_zeroed++;
        } else {
            assert_memory_equal(p, before + (size_t)b * bytes, bytes);
        }
    }
    assert_int_equal(n_zeroed, 3);
    kv_pool_stats(&s1, pool);
    assert_int_equal(s1.blocks_free, s0.blocks_free);
    assert_int_equal(s1.blocks_cached, s0.blocks_cached);
    assert_int_equal(s1.blocks_used, s0.blocks_used);
    assert_int_equal(s1.evictions, 0);
    const kv_table *all[] = {&used};
    check_pool(pool, all, 1);
    assert_true(kv_block_published(pool, cached_block));
    assert_int_equal(kv_prefix_match(pool, tokens, TS_KV_BLOCK), TS_KV_BLOCK);

    /* The free list still holds the three zeroed blocks: taking them evicts nothing. */
    kv_table more;
    kv_table_init(&more);
    assert_int_equal(kv_table_reserve(pool, &more, 3 * TS_KV_BLOCK, NULL), TS_OK);
    kv_pool_stats(&s1, pool);
    assert_int_equal(s1.evictions, 0);
    assert_int_equal(s1.blocks_cached, 1);
    assert_int_equal(kv_prefix_match(pool, tokens, TS_KV_BLOCK), TS_KV_BLOCK);

    free(before);
    kv_table_free(pool, &more);
    kv_table_free(pool, &used);
    kv_pool_free(pool);
}

static void test_zero_free_f32(void **state)
{
    (void)state;
    zero_free_case(KV_DTYPE_F32);
}

static void test_zero_free_f16(void **state)
{
    (void)state;
    zero_free_case(KV_DTYPE_F16);
}

/* Pages of [p, p + n) the kernel holds in memory (mincore). */
static size_t resident_pages(const void *p, size_t n)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t n_pages = (n + page - 1) / page;
    unsigned char *vec = malloc(n_pages);
    assert_non_null(vec);
    assert_int_equal(mincore((void *)p, n, vec), 0);
    size_t in = 0;
    for (size_t i = 0; i < n_pages; i++)
        in += vec[i] & 1;
    free(vec);
    return in;
}

/* A new pool holds zeros and no committed page; kv_pool_prefault commits every page and
 * changes no byte of a used block (nor of a free one, where the kernel populates without
 * writing; its fallback zeroes free blocks); the counts stay. */
static void test_prefault_commits_pages(void **state)
{
    (void)state;
    enum { N_BLOCKS = 300 };
    kv_config c = small_config(KV_DTYPE_F32, N_BLOCKS);
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    kv_layout l = kv_pool_layout(pool);
    const size_t bytes = l.block_stride * l.elem_size, all = N_BLOCKS * bytes;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), n_pages = (all + page - 1) / page;
    assert_true(n_pages >= 100);
    assert_int_equal(resident_pages(l.base, all), 0);

    kv_table used;
    kv_table_init(&used);
    assert_int_equal(kv_table_reserve(pool, &used, 40, NULL), TS_OK);
    fill(pool, &used, 0, 40, 2.0f);
    const int32_t dirty = N_BLOCKS - 1; /* a free block that holds something */
    unsigned char *last = (unsigned char *)l.base + (size_t)dirty * bytes;
    memset(last, 0xa5, bytes);
    unsigned char *before = malloc(2 * bytes);
    assert_non_null(before);
    memcpy(before, l.base, 2 * bytes); /* the used table's two blocks, 0 and 1 */
    assert_int_equal(used.blocks[0], 0);
    assert_int_equal(used.blocks[1], 1);
    assert_true(resident_pages(l.base, all) < n_pages);
    kv_stats s0, s1;
    kv_pool_stats(&s0, pool);

    kv_pool_prefault(pool);

    assert_int_equal(resident_pages(l.base, all), n_pages);
    assert_memory_equal(l.base, before, 2 * bytes);
    bool kept = last[0] == 0xa5;
    for (size_t i = 0; i < bytes; i++)
        if (last[i] != (kept ? 0xa5 : 0))
            fail_msg("free block %d: byte %zu is 0x%02x, neither kept nor zeroed", dirty, i,
                     last[i]);
    for (size_t i = 2 * bytes; i < (size_t)dirty * bytes; i++)
        if (((const unsigned char *)l.base)[i] != 0)
            fail_msg("byte %zu of a new pool's free blocks is 0x%02x", i,
                     ((const unsigned char *)l.base)[i]);
    kv_pool_stats(&s1, pool);
    assert_int_equal(s1.blocks_free, s0.blocks_free);
    assert_int_equal(s1.blocks_used, s0.blocks_used);
    const kv_table *tables[] = {&used};
    check_pool(pool, tables, 1);
    free(before);
    kv_table_free(pool, &used);
    kv_pool_free(pool);
}

/* The protection of the mapping that holds addr, as /proc/self/maps writes it ("rw-p"),
 * or "" when no mapping holds it. */
static void protection_at(const void *addr, char perms[5])
{
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    unsigned long lo, hi;
    char p[5];
    perms[0] = 0;
    while (fscanf(maps, "%lx-%lx %4s%*[^\n]", &lo, &hi, p) == 3)
        if ((uintptr_t)addr >= lo && (uintptr_t)addr < hi)
            memcpy(perms, p, 5);
    fclose(maps);
}

/* The page after a pool of whole pages is mapped with no access (so the check below does
 * not pass merely because nothing was mapped there), and a read of its first byte kills a
 * child process by SIGSEGV instead of reading on. */
static void test_guard_page(void **state)
{
    (void)state;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    kv_config c = small_config(KV_DTYPE_F32, 1);
    const size_t bytes = kv_block_bytes(&c);
    c.n_blocks = (int64_t)(page / bytes > 0 ? page / bytes : 1);
    assert_int_equal(c.n_blocks * bytes % page, 0);
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    const volatile unsigned char *end =
        (const unsigned char *)kv_pool_layout(pool).base + (size_t)c.n_blocks * bytes;
    char perms[5];
    protection_at((const void *)end, perms);
    assert_string_equal(perms, "---p");
    protection_at((const void *)(end - 1), perms);
    assert_string_equal(perms, "rw-p");
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        signal(SIGSEGV, SIG_DFL); /* not cmocka's handler, which would go on with the tests */
        unsigned char x = end[0];
        _exit(x == 0 ? 0 : 1); /* reached only if the read did not fault */
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);
    kv_pool_free(pool);
}

static void test_f16_conversion(void **state)
{
    (void)state;
    const float in[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 70000.0f, 1.0f + 1.0f / 2048,
                        1.0f + 3.0f / 2048, 5.9604645e-8f, 6.1035156e-5f, 1e-9f, INFINITY,
                        -INFINITY, 0.333333f};
    const uint16_t want[] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x7c00, 0x3c00,
                             0x3c02, 0x0001, 0x0400, 0x0000, 0x7c00, 0xfc00, 0x3555};
    enum { N = sizeof in / sizeof in[0] };
    uint16_t h[N];
    kv_f32_to_f16(h, in, N);
    for (int i = 0; i < N; i++)
        if (h[i] != want[i])
            fail_msg("f16(%g) = 0x%04x, want 0x%04x", (double)in[i], h[i], want[i]);
    float back[N];
    kv_f16_to_f32(back, h, N);
    assert_float_equal(back[2], 1.0f, 0);
    assert_float_equal(back[3], -2.5f, 0);
    assert_float_equal(back[4], 65504.0f, 0);
    assert_float_equal(back[8], 5.9604645e-8f, 0);
    assert_true(isinf(back[5]) && back[5] > 0);
    assert_true(signbit(back[1]));
    float nan_in = NAN;
    uint16_t nan_h;
    kv_f32_to_f16(&nan_h, &nan_in, 1);
    kv_f16_to_f32(back, &nan_h, 1);
    assert_true(isnan(back[0]));
    /* Every finite half survives the trip through f32. */
    for (uint32_t x = 0; x < 0x10000; x++) {
        uint16_t hx = (uint16_t)x, again;
        float f;
        if ((hx & 0x7c00) == 0x7c00)
            continue;
        kv_f16_to_f32(&f, &hx, 1);
        kv_f32_to_f16(&again, &f, 1);
        assert_int_equal(again, hx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_sizing_and_errors),
        cmocka_unit_test(test_alloc_free_and_out_of_blocks),
        cmocka_unit_test(test_fork_refcounts),
        cmocka_unit_test(test_copy_on_write),
        cmocka_unit_test(test_layout_f32),
        cmocka_unit_test(test_layout_f16),
        cmocka_unit_test(test_zero_free_f32),
        cmocka_unit_test(test_zero_free_f16),
        cmocka_unit_test(test_prefault_commits_pages),
        cmocka_unit_test(test_guard_page),
        cmocka_unit_test(test_f16_conversion),
    };
    return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
