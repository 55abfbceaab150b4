/* bench_sampler.c: time per sampled token over a large vocabulary for common settings.
 * Usage: bench_sampler [vocab_size] [iterations] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "engine/sampler.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    const int V = argc > 1 ? atoi(argv[1]) : 128256;
    const int iters = argc > 2 ? atoi(argv[2]) : 200;
    if (V <= 0 || iters <= 0) {
        fprintf(stderr, "usage: bench_sampler [vocab_size > 0] [iterations > 0]\n");
        return 1;
    }
    float *model = malloc((size_t)V * sizeof *model);
    float *logits = malloc((size_t)V * sizeof *logits);
    double *times = malloc((size_t)iters * sizeof *times);
    if (!model || !logits || !times) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    /* logits shaped like a language model's: a few strong tokens over a Gaussian-ish bulk */
    uint64_t x = 12345;
    for (int i = 0; i < V; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u = (double)(x >> 11) * 0x1.0p-53;
        model[i] = (float)(3.0 * (u + u * u - 1.0) + (i % 997 == 0 ? 12.0 : 0.0));
    }
    int32_t hist[64];
    for (int i = 0; i < 64; i++)
        hist[i] = (i * 7919) % V;

    static const struct { const char *name; float t; int k; float top_p, min_p, rep, freq; } cfg[] = {
        { "greedy", 0.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f },
        { "T=1 (no filter)", 1.0f, 0, 1.0f, 0.0f, 1.0f, 0.0f },
        { "T=0.8 top_k=40", 0.8f, 40, 1.0f, 0.0f, 1.0f, 0.0f },
        { "T=0.8 top_p=0.95", 0.8f, 0, 0.95f, 0.0f, 1.0f, 0.0f },
        { "T=0.8 min_p=0.05", 0.8f, 0, 1.0f, 0.05f, 1.0f, 0.0f },
        { "llama.cpp-like", 0.8f, 40, 0.95f, 0.05f, 1.1f, 0.0f },
        { "T=1 top_p=0.9 +pen", 1.0f, 0, 0.9f, 0.0f, 1.1f, 0.5f },
    };
    sampler_scratch sc;
    ts_error err = {0};
    if (sampler_scratch_init(&sc, V, &err) != TS_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("vocab %d, median of %d samples, logprobs off / on (top 5)\n", V, iters);
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        ts_sampling_params p = ts_sampling_params_default();
        p.temperature = cfg[c].t;
        p.top_k = cfg[c].k;
        p.top_p = cfg[c].top_p;
        p.min_p = cfg[c].min_p;
        p.repetition_penalty = cfg[c].rep;
        p.frequency_penalty = cfg[c].freq;
        p.logprobs = true;
        p.top_logprobs = 5;
        double us[2];
        for (int with_lp = 0; with_lp < 2; with_lp++) {
            sampler s;
            if (sampler_init(&s, &p, V, 1, &err) != TS_OK) {
                fprintf(stderr, "%s\n", err.msg);
                return 1;
            }
            sampler_logprobs lp;
            for (int it = 0; it < iters; it++) {
                memcpy(logits, model, (size_t)V * sizeof *logits);
                int32_t tok;
                double t1 = clock_now_s();
                sampler_sample(&s, &sc, &tok, with_lp ? &lp : NULL, logits, hist, 64, 32, NULL);
                times[it] = clock_now_s() - t1;
            }
            /* the median resists other processes taking the core now and then */
            qsort(times, (size_t)iters, sizeof *times, cmp_double);
            us[with_lp] = 1e6 * times[iters / 2];
        }
        printf("  %-22s %8.1f us   %8.1f us\n", cfg[c].name, us[0], us[1]);
    }
    sampler_scratch_free(&sc);
    free(model);
    free(logits);
    free(times);
    return 0;
}
