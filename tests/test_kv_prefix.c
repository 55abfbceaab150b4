/* test_kv_prefix.c: the prefix cache: sharing of common prompt prefixes, the lookup cap,
 * LRU reuse and eviction order, collision safety under a constant hash, publish rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "kv/kv.h"

enum { NL = 2, NKV = 1, HD = 2 };

static uint64_t constant_hash(uint64_t parent_key, const int32_t *tokens, void *ctx)
{
    (void)parent_key;
    (void)tokens;
    int *calls = ctx;
    (*calls)++;
    return 42;
}

static kv_pool *make_pool(int64_t n_blocks, kv_hash_fn fn, void *ctx)
{
    kv_config c = {.n_layers = NL, .n_kv_heads = NKV, .head_dim = HD, .dtype = KV_DTYPE_F32,
                   .n_blocks = n_blocks, .hash_fn = fn, .hash_ctx = ctx};
    kv_pool *pool = NULL;
    assert_int_equal(kv_pool_init(&pool, &c, NULL), TS_OK);
    return pool;
}

static void check_pool(const kv_pool *pool, const kv_table *const *tables, int n)
{
    ts_error err = {0};
    if (kv_pool_check(pool, tables, n, &err) != TS_OK)
        fail_msg("kv_pool_check: %s", err.msg);
}

/* What a model would store for token tok at position pos: a function of both. */
static float kv_value(int32_t tok, int64_t pos, int layer) { return (float)(tok * 1000 + pos * 2 + layer); }

/* Runs a prompt the way the engine admits one: lookup (capped at n - 1), reserve the rest,
 * write the new rows, publish the full blocks. Returns the matched token count. */
static int64_t admit(kv_pool *pool, kv_table *t, const int32_t *tok, int64_t n)
{
    int64_t matched = -1;
    ts_error err = {0};
    assert_int_equal(kv_prefix_lookup(pool, t, tok, n - 1, &matched, &err), TS_OK);
    assert_int_equal(kv_table_reserve(pool, t, n - matched, &err), TS_OK);
    float k[NKV * HD], v[NKV * HD];
    for (int64_t p = matched; p < n; p++)
        for (int l = 0; l < NL; l++) {
            for (int i = 0; i < NKV * HD; i++)
                k[i] = v[i] = kv_value(tok[p], p, l);
            assert_int_equal(kv_table_write(pool, t, l, p, k, v, &err), TS_OK);
        }
    for (int32_t i = 0; i < n / 32; i++)
        assert_int_equal(kv_prefix_publish(pool, t, i, tok + (size_t)i * 32, NULL, &err), TS_OK);
    return matched;
}

static void expect_content(const kv_pool *pool, const kv_table *t, const int32_t *tok)
{
    float k[NKV * HD], v[NKV * HD];
    for (int64_t p = 0; p < t->n_tokens; p++)
        for (int l = 0; l < NL; l++) {
            assert_int_equal(kv_table_read(k, v, pool, t, l, p, NULL), TS_OK);
            assert_float_equal(k[0], kv_value(tok[p], p, l), 0);
            assert_float_equal(v[NKV * HD - 1], kv_value(tok[p], p, l), 0);
        }
}

static void test_common_prefix_shares_blocks(void **state)
{
    (void)state;
    kv_pool *pool = make_pool(16, NULL, NULL);
    int32_t a[80], b[90];
    for (int i = 0; i < 90; i++) {
        if (i < 80)
            a[i] = i < 70 ? 3 * i + 1 : 500 + i;
        b[i] = i < 70 ? 3 * i + 1 : 700 + i;
    }
    kv_table ta, tb;
    kv_table_init(&ta);
    kv_table_init(&tb);
    const kv_table *all[] = {&ta, &tb};

    assert_int_equal(admit(pool, &ta, a, 80), 0);
    assert_true(kv_block_published(pool, ta.blocks[0]));
    assert_true(kv_block_published(pool, ta.blocks[1]));
    assert_false(kv_block_published(pool, ta.blocks[2]));
    assert_int_equal(kv_prefix_match(pool, b, 89), 64);
    assert_int_equal(admit(pool, &tb, b, 90), 64);
    assert_int_equal(tb.blocks[0], ta.blocks[0]);
    assert_int_equal(tb.blocks[1], ta.blocks[1]);
    assert_int_not_equal(tb.blocks[2], ta.blocks[2]);
    assert_int_equal(kv_block_refcount(pool, ta.blocks[0]), 2);
    assert_int_equal(kv_block_refcount(pool, ta.blocks[1]), 2);
    check_pool(pool, all, 2);
    expect_content(pool, &ta, a);
    expect_content(pool, &tb, b);

    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.lookups, 2);
    assert_int_equal(s.hit_blocks, 2);
    assert_int_equal(s.missed_blocks, 2); /* a's two full blocks, the first time */
    assert_int_equal(s.blocks_used, 3 + 1);

    /* The lookup cap: a prompt of exactly 64 cached tokens maps only its first block, so
     * the last token's logits are computed again. */
    kv_table tc;
    kv_table_init(&tc);
    int64_t matched = -1;
    assert_int_equal(kv_prefix_lookup(pool, &tc, a, 64 - 1, &matched, NULL), TS_OK);
    assert_int_equal(matched, 32);
    assert_int_equal(tc.n_tokens, 32);
    assert_int_equal(tc.n_blocks, 1);
    ts_error err = {0};
    assert_int_equal(kv_prefix_lookup(pool, &tc, a, 64, &matched, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(matched, 0);
    kv_table_free(pool, &tc);
    assert_int_equal(kv_prefix_lookup(pool, &tc, a, 64, &matched, NULL), TS_OK);
    assert_int_equal(matched, 64);
    assert_int_equal(kv_prefix_lookup(pool, &tb, a, -1, &matched, NULL), TS_ERR_INVALID_ARG);

    kv_table_free(pool, &ta);
    kv_table_free(pool, &tb);
    kv_table_free(pool, &tc);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_cached, 2);
    assert_int_equal(s.blocks_used, 0);
    assert_int_equal(s.blocks_free, 14);
    check_pool(pool, NULL, 0);
    kv_pool_free(pool);
}

static void fill_tokens(int32_t *tok, int n, int32_t base)
{
    for (int i = 0; i < n; i++)
        tok[i] = base + i;
}

static void test_lru_eviction_order(void **state)
{
    (void)state;
    kv_pool *pool = make_pool(4, NULL, NULL);
    int32_t p1[33], p2[33], p3[33];
    fill_tokens(p1, 33, 100);
    fill_tokens(p2, 33, 200);
    fill_tokens(p3, 33, 300);
    kv_table t1, t2, t3, x, y;
    kv_table_init(&t1);
    kv_table_init(&t2);
    kv_table_init(&t3);
    kv_table_init(&x);
    kv_table_init(&y);
    admit(pool, &t1, p1, 32);
    admit(pool, &t2, p2, 32);
    admit(pool, &t3, p3, 32);
    int32_t b1 = t1.blocks[0], b2 = t2.blocks[0], b3 = t3.blocks[0];
    kv_table_free(pool, &t1);
    kv_table_free(pool, &t2);
    kv_table_free(pool, &t3);
    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_cached, 3);
    assert_int_equal(s.blocks_free, 1);
    assert_int_equal(kv_pool_available(pool), 4);

    /* The free list serves first: nothing is evicted. */
    assert_int_equal(kv_table_reserve(pool, &x, 32, NULL), TS_OK);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.evictions, 0);
    assert_int_equal(kv_prefix_match(pool, p1, 32), 32);

    /* Then the least recently released block: p1's. */
    assert_int_equal(kv_table_reserve(pool, &x, 32, NULL), TS_OK);
    assert_int_equal(x.blocks[1], b1);
    assert_false(kv_block_published(pool, b1));
    kv_pool_stats(&s, pool);
    assert_int_equal(s.evictions, 1);
    assert_int_equal(kv_prefix_match(pool, p1, 32), 0);
    assert_int_equal(kv_prefix_match(pool, p2, 32), 32);

    /* A hit moves p2's block back to used; released again, it goes to the LRU tail, so p3's
     * block is the next victim. */
    int64_t matched;
    assert_int_equal(kv_prefix_lookup(pool, &y, p2, 32, &matched, NULL), TS_OK);
    assert_int_equal(matched, 32);
    assert_int_equal(y.blocks[0], b2);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_cached, 1);
    assert_int_equal(s.blocks_used, 3);
    const kv_table *all[] = {&x, &y};
    check_pool(pool, all, 2);
    kv_table_free(pool, &y);
    assert_int_equal(kv_table_reserve(pool, &x, 32, NULL), TS_OK);
    assert_int_equal(x.blocks[2], b3);
    assert_int_equal(kv_prefix_match(pool, p2, 32), 32);
    assert_int_equal(kv_prefix_match(pool, p3, 32), 0);
    /* The pool is now x's 3 blocks + p2's cached one; a 5th block does not exist. */
    assert_int_equal(kv_table_reserve(pool, &x, 32, NULL), TS_OK);
    assert_int_equal(x.blocks[3], b2);
    assert_int_equal(kv_table_reserve(pool, &x, 1, NULL), TS_ERR_OUT_OF_BLOCKS);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.evictions, 3);
    check_pool(pool, all, 1);
    kv_table_free(pool, &x);
    kv_pool_free(pool);
}

static void test_chain_evicted_from_the_deep_end(void **state)
{
    (void)state;
    kv_pool *pool = make_pool(3, NULL, NULL);
    int32_t p[96];
    fill_tokens(p, 96, 1);
    kv_table t, x;
    kv_table_init(&t);
    kv_table_init(&x);
    admit(pool, &t, p, 96); /* 3 published blocks */
    int32_t chain[3];
    memcpy(chain, t.blocks, sizeof chain);
    kv_table_free(pool, &t);
    assert_int_equal(kv_prefix_match(pool, p, 96), 96);
    /* A table releases its last block first, so the chain is reclaimed from its end and
     * what stays cached is still a findable prefix. */
    assert_int_equal(kv_table_reserve(pool, &x, 1, NULL), TS_OK);
    assert_int_equal(x.blocks[0], chain[2]);
    assert_int_equal(kv_prefix_match(pool, p, 96), 64);
    assert_int_equal(kv_table_reserve(pool, &x, 32, NULL), TS_OK);
    assert_int_equal(x.blocks[1], chain[1]);
    assert_int_equal(kv_prefix_match(pool, p, 96), 32);
    const kv_table *all[] = {&x};
    check_pool(pool, all, 1);
    kv_table_free(pool, &x);
    kv_pool_free(pool);
}

static void test_collisions_never_share_wrong_kv(void **state)
{
    (void)state;
    int calls = 0;
    kv_pool *pool = make_pool(16, constant_hash, &calls);
    /* Chains X+Y and Z+Y: the same second block of tokens under different parents. */
    int32_t xy[65], zy[65], xw[65];
    fill_tokens(xy, 32, 10);
    fill_tokens(zy, 32, 60);
    fill_tokens(xw, 32, 10);
    fill_tokens(xy + 32, 33, 400);
    fill_tokens(zy + 32, 33, 400);
    fill_tokens(xw + 32, 33, 400);
    xw[63] = 9999; /* differs from xy in the last token of block 1 */
    kv_table a, b, c;
    kv_table_init(&a);
    kv_table_init(&b);
    kv_table_init(&c);
    assert_int_equal(admit(pool, &a, xy, 65), 0);
    assert_true(calls > 0);
    assert_int_equal(kv_prefix_match(pool, zy, 64), 0);
    assert_int_equal(admit(pool, &b, zy, 65), 0); /* same keys, different tokens: misses */
    assert_int_not_equal(b.blocks[1], a.blocks[1]);
    assert_int_equal(admit(pool, &c, xw, 65), 32); /* block 0 matches, block 1 differs */
    assert_int_equal(c.blocks[0], a.blocks[0]);
    assert_int_not_equal(c.blocks[1], a.blocks[1]);
    expect_content(pool, &a, xy);
    expect_content(pool, &b, zy);
    expect_content(pool, &c, xw);
    kv_table_free(pool, &a);
    kv_table_free(pool, &b);
    kv_table_free(pool, &c);

    /* All three chains stay findable, each to its own blocks, through one bucket. */
    kv_table_init(&a);
    assert_int_equal(admit(pool, &a, zy, 65), 64);
    expect_content(pool, &a, zy);
    assert_int_equal(kv_prefix_match(pool, xy, 64), 64);
    assert_int_equal(kv_prefix_match(pool, xw, 64), 64);
    const kv_table *all[] = {&a};
    check_pool(pool, all, 1);
    kv_table_free(pool, &a);
    kv_pool_free(pool);
}

static void test_publish_rules(void **state)
{
    (void)state;
    kv_pool *pool = make_pool(8, NULL, NULL);
    int32_t p[64];
    fill_tokens(p, 64, 7);
    kv_table a, b;
    kv_table_init(&a);
    kv_table_init(&b);
    const kv_table *all[] = {&a, &b};
    ts_error err = {0};
    bool published = true;

    assert_int_equal(kv_table_reserve(pool, &a, 40, NULL), TS_OK);
    assert_int_equal(kv_prefix_publish(pool, &a, 1, p + 32, &published, &err), TS_ERR_INVALID_ARG);
    assert_false(published);
    assert_int_equal(kv_prefix_publish(pool, &a, -1, p, NULL, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(kv_table_reserve(pool, &a, 24, NULL), TS_OK);
    /* Block 1 before block 0: its parent is not published, so nothing happens. */
    assert_int_equal(kv_prefix_publish(pool, &a, 1, p + 32, &published, &err), TS_OK);
    assert_false(published);
    assert_false(kv_block_published(pool, a.blocks[1]));
    assert_int_equal(kv_prefix_publish(pool, &a, 0, p, &published, &err), TS_OK);
    assert_true(published);
    assert_int_equal(kv_prefix_publish(pool, &a, 0, p, &published, &err), TS_OK); /* no-op */
    assert_true(published);
    assert_int_equal(kv_prefix_publish(pool, &a, 0, p + 1, &published, &err), TS_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "other tokens"));
    float row[NKV * HD] = {0};
    assert_int_equal(kv_table_write(pool, &a, 0, 3, row, row, &err), TS_ERR_INVALID_ARG);
    assert_int_equal(kv_prefix_publish(pool, &a, 1, p + 32, &published, &err), TS_OK);
    assert_true(published);

    /* The same prompt computed side by side: b's publish switches b to a's blocks and
     * returns b's own copies to the pool. */
    assert_int_equal(kv_table_reserve(pool, &b, 64, NULL), TS_OK);
    int32_t own0 = b.blocks[0];
    kv_stats s;
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_free, 4);
    assert_int_equal(kv_prefix_publish(pool, &b, 0, p, &published, NULL), TS_OK);
    assert_int_equal(kv_prefix_publish(pool, &b, 1, p + 32, &published, NULL), TS_OK);
    assert_true(published);
    assert_int_equal(b.blocks[0], a.blocks[0]);
    assert_int_equal(b.blocks[1], a.blocks[1]);
    assert_false(kv_block_published(pool, own0));
    assert_int_equal(kv_block_refcount(pool, own0), 0);
    assert_int_equal(kv_block_refcount(pool, a.blocks[1]), 2);
    kv_pool_stats(&s, pool);
    assert_int_equal(s.blocks_free, 6);
    check_pool(pool, all, 2);
    kv_table_free(pool, &a);
    kv_table_free(pool, &b);
    check_pool(pool, NULL, 0);
    kv_pool_free(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common_prefix_shares_blocks),
        cmocka_unit_test(test_lru_eviction_order),
        cmocka_unit_test(test_chain_evicted_from_the_deep_end),
        cmocka_unit_test(test_collisions_never_share_wrong_kv),
        cmocka_unit_test(test_publish_rules),
    };
    return cmocka_run_group_tests_name("kv_prefix", tests, NULL, NULL);
}
