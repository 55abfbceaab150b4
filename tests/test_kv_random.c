/* test_kv_random.c: thousands of random pool operations (create, lookup, append, fork,
 * release, publish) checked against a simple model: every table's contents must equal what
 * its own token history wrote, and kv_pool_check() must pass after every operation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv/kv.h"

enum { NL = 2, NKV = 1, HD = 2, POOL_BLOCKS = 20, MAX_TABLES = 8, MAX_TOK = 4096 };

/* The model of one sequence: its tokens; the KV of position p is a function of tokens[0..p]
 * alone, as a real model's would be, so shared prefixes must hold identical values. */
typedef struct model_seq {
    bool live;
    kv_table t;
    int32_t tok[MAX_TOK];
    uint32_t ph[MAX_TOK]; /* prefix hash of tok[0..p] */
} model_seq;

typedef struct world {
    kv_pool *pool;
    model_seq seq[MAX_TABLES];
    uint64_t rng;
} world;

static uint32_t rnd(world *w, uint32_t n)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return (uint32_t)(w->rng % n);
}

static uint32_t prefix_hash(uint32_t prev, int32_t tok)
{
    uint32_t h = (prev ^ (uint32_t)tok) * 2654435761u;
    return (h ^ (h >> 15)) & 0xfffff;
}

/* Exact in f32: below 2^24. */
static float value(uint32_t ph, int layer, int is_v, int d)
{
    return (float)(ph * 8 + (uint32_t)(layer * 4 + is_v * 2 + d));
}

static void set_tokens(model_seq *s, int64_t from, int64_t to, const int32_t *tok)
{
    for (int64_t p = from; p < to; p++) {
        s->tok[p] = tok[p - from];
        s->ph[p] = prefix_hash(p ? s->ph[p - 1] : 0x1234, s->tok[p]);
    }
}

static void write_rows(world *w, model_seq *s, int64_t from, int64_t to)
{
    float k[NKV * HD], v[NKV * HD];
    for (int64_t p = from; p < to; p++)
        for (int l = 0; l < NL; l++) {
            for (int d = 0; d < HD; d++) {
                k[d] = value(s->ph[p], l, 0, d);
                v[d] = value(s->ph[p], l, 1, d);
            }
            ts_error err = {0};
            if (kv_table_write(w->pool, &s->t, l, p, k, v, &err) != TS_OK)
                fail_msg("write of position %lld: %s", (long long)p, err.msg);
        }
}

static void verify(world *w)
{
    const kv_table *tables[MAX_TABLES];
    int n = 0;
    for (int i = 0; i < MAX_TABLES; i++)
        if (w->seq[i].live)
            tables[n++] = &w->seq[i].t;
    ts_error err = {0};
    if (kv_pool_check(w->pool, tables, n, &err) != TS_OK)
        fail_msg("kv_pool_check: %s", err.msg);
    float k[NKV * HD], v[NKV * HD];
    for (int i = 0; i < MAX_TABLES; i++) {
        model_seq *s = &w->seq[i];
        if (!s->live)
            continue;
        for (int64_t p = 0; p < s->t.n_tokens; p++)
            for (int l = 0; l < NL; l++) {
                assert_int_equal(kv_table_read(k, v, w->pool, &s->t, l, p, NULL), TS_OK);
                for (int d = 0; d < HD; d++)
                    if (k[d] != value(s->ph[p], l, 0, d) || v[d] != value(s->ph[p], l, 1, d))
                        fail_msg("table %d position %lld layer %d: wrong KV", i, (long long)p, l);
            }
    }
}

static int free_slot(world *w)
{
    int start = (int)rnd(w, MAX_TABLES);
    for (int i = 0; i < MAX_TABLES; i++)
        if (!w->seq[(start + i) % MAX_TABLES].live)
            return (start + i) % MAX_TABLES;
    return -1;
}

static int live_slot(world *w)
{
    int start = (int)rnd(w, MAX_TABLES);
    for (int i = 0; i < MAX_TABLES; i++)
        if (w->seq[(start + i) % MAX_TABLES].live)
            return (start + i) % MAX_TABLES;
    return -1;
}

static int32_t random_token(world *w) { return (int32_t)rnd(w, 3); }

/* Appends n tokens; on out-of-blocks checks that nothing changed. Returns success. */
static bool append(world *w, model_seq *s, int64_t n, const int32_t *tok)
{
    kv_table before = s->t;
    int32_t blocks[POOL_BLOCKS + 1];
    if (s->t.n_blocks > 0)
        memcpy(blocks, s->t.blocks, (size_t)s->t.n_blocks * sizeof *blocks);
    kv_stats st0, st1;
    kv_pool_stats(&st0, w->pool);
    int64_t need = kv_table_blocks_needed(w->pool, &s->t, n);
    int64_t fresh = (s->t.n_tokens + n + 31) / 32 - s->t.n_blocks;
    assert_true(need == fresh || need == fresh + 1);
    ts_error err = {0};
    ts_status rc = kv_table_reserve(w->pool, &s->t, n, &err);
    if (rc == TS_ERR_OUT_OF_BLOCKS) {
        assert_true(need > st0.blocks_free + st0.blocks_cached);
        assert_int_equal(s->t.n_tokens, before.n_tokens);
        assert_int_equal(s->t.n_blocks, before.n_blocks);
        if (s->t.n_blocks > 0)
            assert_memory_equal(blocks, s->t.blocks, (size_t)s->t.n_blocks * sizeof *blocks);
        kv_pool_stats(&st1, w->pool);
        assert_memory_equal(&st0, &st1, sizeof st0);
        return false;
    }
    assert_int_equal(rc, TS_OK);
    assert_true(need <= st0.blocks_free + st0.blocks_cached);
    int64_t from = before.n_tokens;
    set_tokens(s, from, from + n, tok);
    write_rows(w, s, from, from + n);
    return true;
}

static void op_create(world *w)
{
    int i = free_slot(w);
    if (i < 0)
        return;
    model_seq *s = &w->seq[i];
    int32_t prompt[200];
    int64_t n = 1 + rnd(w, 150), copied = 0;
    int src = live_slot(w);
    if (src >= 0 && rnd(w, 4) != 0) { /* mostly reuse another sequence's prefix */
        copied = rnd(w, (uint32_t)w->seq[src].t.n_tokens + 1);
        if (copied > n)
            copied = n;
        memcpy(prompt, w->seq[src].tok, (size_t)copied * sizeof *prompt);
    }
    for (int64_t p = copied; p < n; p++)
        prompt[p] = random_token(w);
    int64_t cap = rnd(w, 2) ? n - 1 : n;
    int64_t predicted = kv_prefix_match(w->pool, prompt, cap);
    kv_stats st0, st1;
    kv_pool_stats(&st0, w->pool);
    kv_table_init(&s->t);
    int64_t matched = -1;
    assert_int_equal(kv_prefix_lookup(w->pool, &s->t, prompt, cap, &matched, NULL), TS_OK);
    kv_pool_stats(&st1, w->pool);
    assert_int_equal(matched, predicted);
    assert_int_equal(matched % 32, 0);
    assert_true(matched <= cap);
    assert_int_equal(st1.lookups, st0.lookups + 1);
    assert_int_equal(st1.hit_blocks - st0.hit_blocks, matched / 32);
    assert_int_equal(st1.hit_blocks + st1.missed_blocks - st0.hit_blocks - st0.missed_blocks,
                     cap / 32);
    s->live = true;
    set_tokens(s, 0, matched, prompt);
    if (!append(w, s, n - matched, prompt + matched)) {
        kv_table_free(w->pool, &s->t);
        s->live = false;
    }
}

static void op_append(world *w)
{
    int i = live_slot(w);
    if (i < 0)
        return;
    model_seq *s = &w->seq[i];
    int64_t n = 1 + rnd(w, 40);
    if (s->t.n_tokens + n > MAX_TOK)
        return;
    int32_t tok[40];
    for (int64_t p = 0; p < n; p++)
        tok[p] = random_token(w);
    append(w, s, n, tok);
}

static void op_fork(world *w)
{
    int src = live_slot(w), dst = free_slot(w);
    if (src < 0 || dst < 0)
        return;
    model_seq *d = &w->seq[dst], *s = &w->seq[src];
    kv_table_init(&d->t);
    assert_int_equal(kv_table_fork(w->pool, &d->t, &s->t, NULL), TS_OK);
    memcpy(d->tok, s->tok, (size_t)s->t.n_tokens * sizeof *d->tok);
    memcpy(d->ph, s->ph, (size_t)s->t.n_tokens * sizeof *d->ph);
    d->live = true;
}

static void op_release(world *w)
{
    int i = live_slot(w);
    if (i < 0)
        return;
    kv_table_free(w->pool, &w->seq[i].t);
    w->seq[i].live = false;
}

static void op_publish(world *w)
{
    int i = live_slot(w);
    if (i < 0)
        return;
    model_seq *s = &w->seq[i];
    for (int32_t b = 0; b < s->t.n_tokens / 32; b++) {
        bool published = false;
        ts_error err = {0};
        if (kv_prefix_publish(w->pool, &s->t, b, s->tok + (size_t)b * 32, &published, &err) != TS_OK)
            fail_msg("publish: %s", err.msg);
        assert_true(published); /* published in order, so every parent is published */
        assert_true(kv_block_published(w->pool, s->t.blocks[b]));
    }
}

static void run(uint64_t seed, int n_ops)
{
    world *w = calloc(1, sizeof *w);
    assert_non_null(w);
    w->rng = seed;
    kv_config c = {.n_layers = NL, .n_kv_heads = NKV, .head_dim = HD, .dtype = KV_DTYPE_F32,
                   .n_blocks = POOL_BLOCKS};
    assert_int_equal(kv_pool_init(&w->pool, &c, NULL), TS_OK);
    for (int op = 0; op < n_ops; op++) {
        switch (rnd(w, 10)) {
        case 0: case 1: op_create(w); break;
        case 2: case 3: case 4: op_append(w); break;
        case 5: op_fork(w); break;
        case 6: case 7: op_release(w); break;
        default: op_publish(w); break;
        }
        verify(w);
    }
    kv_stats s;
    kv_pool_stats(&s, w->pool);
    /* The mix must have exercised every path. */
    assert_true(s.hit_blocks > 0);
    assert_true(s.evictions > 0);
    assert_true(s.cow_copies > 0);
    for (int i = 0; i < MAX_TABLES; i++)
        kv_table_free(w->pool, &w->seq[i].t);
    kv_pool_stats(&s, w->pool);
    assert_int_equal(s.blocks_used, 0);
    assert_int_equal(s.blocks_free + s.blocks_cached, POOL_BLOCKS);
    kv_pool_free(w->pool);
    free(w);
}

static void test_random_ops(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 8; seed++)
        run(seed * 0x9e3779b97f4a7c15u, 2500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_ops),
    };
    return cmocka_run_group_tests_name("kv_random", tests, NULL, NULL);
}
