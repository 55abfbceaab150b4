/* bench_embed.c: `tessera bench --embed`: documents of random tokens embedded a batch at a
 * time (all submitted together, so they share the engine's steps), documents/s and
 * tokens/s per batch size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "common/clock.h"

/* Document d of round r: len random tokens of the vocabulary (past the first few ids,
 * where the special tokens usually are), a function of the seed. */
static void document(int32_t *ids, int len, int vocab, uint64_t seed, int r, int d)
{
    uint64_t x = seed * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)r * 7919 + (uint64_t)d + 1;
    for (int i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids[i] = (int32_t)(3 + x % (uint64_t)(vocab > 4 ? vocab - 3 : 1));
    }
}

/* Embeds n documents of len tokens at once; the seconds from the first submit to the last
 * vector, or a negative number after printing why it failed. */
static double run_batch(ts_engine *e, int n, int len, uint64_t seed, int round)
{
    int vocab = ts_model_get_config(ts_engine_get_model(e))->vocab_size;
    int32_t *ids = malloc((size_t)len * sizeof *ids);
    ts_request **reqs = calloc((size_t)n, sizeof *reqs);
    double t0 = clock_now_s(), dt = -1.0;
    bool ok = ids && reqs;
    for (int d = 0; ok && d < n; d++) {
        document(ids, len, vocab, seed, round, d);
        ts_request_params p;
        ts_request_params_default(&p);
        p.prompt = ids;
        p.n_prompt = (size_t)len;
        p.embed = true;
        ts_error err = {0};
        if (ts_engine_submit(e, &p, &reqs[d], &err) != TS_OK) {
            fprintf(stderr, "tessera: %s\n", err.msg);
            ok = false;
        }
    }
    for (int d = 0; d < n; d++) {
        ts_event ev = {0};
        while (reqs && reqs[d] && ts_request_next_event(reqs[d], &ev, -1) == TS_OK) {
            if (ev.kind == TS_EVENT_ERROR) {
                fprintf(stderr, "tessera: %s\n", ev.message);
                ok = false;
            }
            ts_event_clear(&ev);
        }
    }
    if (ok)
        dt = clock_now_s() - t0;
    for (int d = 0; reqs && d < n; d++)
        ts_request_release(reqs[d]);
    free(reqs);
    free(ids);
    return dt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_embed(ts_engine *e, const bench_config *cfg)
{
    const ts_model_config *c = ts_model_get_config(ts_engine_get_model(e));
    if (c->pooling == TS_POOLING_NONE) {
        fprintf(stderr, "tessera bench: --embed needs an embedding model (%s.pooling_type is "
                        "none or absent)\n", c->arch);
        return 1;
    }
    int len = cfg->prompt_len < c->context_len ? cfg->prompt_len : c->context_len;
    /* warm-up at the largest batch: its steps fault in the step buffers' pages once, which
     * a serving process does on its first large request only (at 16 threads on a 16-core
     * Xeon, bge-small's first batch of 64 spent ~11% of its time in the kernel's page
     * faults) */
    int most = 1;
    for (int l = 0; l < cfg->n_levels; l++)
        most = cfg->levels[l] > most ? cfg->levels[l] : most;
    if (run_batch(e, most, len, cfg->seed, -1) < 0)
        return 1;
    printf("embeddings: %s, documents of %d tokens, median of %d round%s\n", c->name, len,
           cfg->rounds, cfg->rounds > 1 ? "s" : "");
    printf("%8s %12s %12s %12s\n", "batch", "docs/s", "tokens/s", "batch ms");
    double times[BENCH_MAX_ROUNDS];
    for (int l = 0; l < cfg->n_levels; l++) {
        int n = cfg->levels[l];
        for (int r = 0; r < cfg->rounds; r++)
            if ((times[r] = run_batch(e, n, len, cfg->seed, r)) < 0)
                return 1;
        qsort(times, (size_t)cfg->rounds, sizeof *times, cmp_double);
        double t = times[cfg->rounds / 2];
        printf("%8d %12.1f %12.0f %12.2f\n", n, n / t, (double)n * len / t, t * 1e3);
        fflush(stdout);
    }
    return 0;
}
