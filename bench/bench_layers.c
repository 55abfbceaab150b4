/* bench_layers.c: the model's own weight GEMMs, one matrix group at a time, as a step of M
 * rows runs them (fwd_gemm: activation quantization, chunks over the OpenMP threads, the
 * pack's kernel, weights streamed from memory layer after layer). For each M it prints the
 * milliseconds per step of each group (QKV, output, W1|W3, W2, LM head) split by the types
 * the file gives it (a Q4_K_M file keeps some attn_v and ffn_down in Q6_K), with GOP/s and
 * the weight read rate, so the model's GEMM can be set beside bench_qpack's kernel rates.
 * It first prints what an empty parallel region costs (the price of splitting small row
 * work over the threads). Usage: build/bench_layers MODEL.gguf [M ...]   (default M: 1 16 64 512; threads:
 * OMP_NUM_THREADS). Each figure is the best of REPS passes over every layer. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/forward_batch.h"
#include "model/model.h"
#include "qpack.h"
#include "simd.h"

enum { REPS = 3, MAX_BUCKETS = 32, ROLES = 5 };

static const char *const ROLE_NAMES[ROLES] = {"qkv", "wo", "w1|w3", "w2", "lm_head"};

/* Time of one matrix group over the layers that share a role and a type signature. */
typedef struct bucket {
    int role;
    char types[32]; /* "Q4_K" or, for a group of mixed types, "Q4_K+Q6_K" */
    int layers;
    double best_s, ops, bytes;
} bucket;

static int bucket_of(bucket *b, int *n, int role, const simd_qmat *const *w, int n_w)
{
    char types[32] = "";
    for (int i = 0; i < n_w; i++) {
        const char *name = qtype_get(w[i]->type)->name;
        if (!strstr(types, name))
            snprintf(types + strlen(types), sizeof types - strlen(types), "%s%s",
                     types[0] ? "+" : "", name);
    }
    for (int i = 0; i < *n; i++)
        if (b[i].role == role && strcmp(b[i].types, types) == 0)
            return i;
    if (*n == MAX_BUCKETS) {
        fprintf(stderr, "bench_layers: more than %d kinds of matrix group\n", MAX_BUCKETS);
        exit(1);
    }
    memset(&b[*n], 0, sizeof b[*n]);
    b[*n].role = role;
    snprintf(b[*n].types, sizeof b[*n].types, "%s", types);
    return (*n)++;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_layers MODEL.gguf [M ...]\n");
        return 2;
    }
    int Ms[16] = {1, 16, 64, 512}, n_m = 4;
    if (argc > 2)
        for (n_m = 0; n_m < argc - 2 && n_m < 16; n_m++)
            Ms[n_m] = atoi(argv[2 + n_m]) > 0 ? atoi(argv[2 + n_m]) : 1;
    int max_m = 1;
    for (int i = 0; i < n_m; i++)
        max_m = Ms[i] > max_m ? Ms[i] : max_m;

    ts_error err;
    ts_model *m;
    if (ts_model_load_with(argv[1], NULL, &m, &err) != TS_OK) {
        fprintf(stderr, "bench_layers: %s\n", err.msg);
        return 1;
    }
    const ts_model_config *c = &m->cfg;
    const model_weights *w = &m->w;
    const simd_kernels *k = simd_init();
    fwd_state s;
    if (fwd_state_init(&s, m, max_m, max_m, &err) != TS_OK) {
        fprintf(stderr, "bench_layers: %s\n", err.msg);
        return 1;
    }
    int widest = 2 * c->hidden_dim > c->vocab_size ? 2 * c->hidden_dim : c->vocab_size;
    int in_max = 2 * c->hidden_dim > c->dim ? 2 * c->hidden_dim : c->dim;
    float *in = malloc(sizeof(float) * (size_t)max_m * in_max);
    float *out = malloc(sizeof(float) * (size_t)max_m * widest);
    if (!in || !out)
        return 1;
    for (size_t i = 0; i < (size_t)max_m * in_max; i++)
        in[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    memset(out, 0, sizeof(float) * (size_t)max_m * widest);
    printf("bench_layers: %s, %d layers, dim %d, ffn %d, vocab %d; %d threads, table %s, "
           "AMX %s\n",
           argv[1], c->n_layers, c->dim, c->hidden_dim, c->vocab_size, omp_get_max_threads(),
           k->name, simd_amx_usable() ? "yes" : "no");

    /* an empty region right after another (threads still spinning), and after a 1 ms pause
     * (threads may have gone to sleep) */
    enum { REGIONS = 2000 };
    volatile int sink = 0;
    for (int pause = 0; pause < 2; pause++) {
        double spent = 0.0;
        int n = pause ? REGIONS / 20 : REGIONS;
        for (int i = 0; i < n; i++) {
            if (pause) {
                double until = omp_get_wtime() + 1e-3;
                while (omp_get_wtime() < until)
                    ;
            }
            double t0 = omp_get_wtime();
#pragma omp parallel
            {
                if (omp_get_thread_num() == 0)
                    sink++;
            }
            spent += omp_get_wtime() - t0;
        }
        printf("empty parallel region%s: %.2f us\n", pause ? " after a 1 ms pause" : "",
               spent / n * 1e6);
    }

    for (int mi = 0; mi < n_m; mi++) {
        int M = Ms[mi];
        bucket b[MAX_BUCKETS];
        int n_b = 0;
        double best_total = 1e30;
        for (int rep = 0; rep <= REPS; rep++) { /* pass 0 warms up */
            double rep_s[MAX_BUCKETS] = {0}, total = 0.0;
            for (int l = 0; l <= c->n_layers; l++) {
                const model_layer *ly = l < c->n_layers ? &w->layers[l] : NULL;
                const simd_qmat *groups[ROLES][3] = {{NULL}};
                int n_w[ROLES] = {0}, ldo[ROLES], K[ROLES];
                if (ly) {
                    groups[0][0] = &ly->wq, groups[0][1] = &ly->wk, groups[0][2] = &ly->wv;
                    groups[1][0] = &ly->wo, groups[2][0] = &ly->w1, groups[2][1] = &ly->w3;
                    groups[3][0] = &ly->w2;
                    n_w[0] = 3, n_w[1] = 1, n_w[2] = 2, n_w[3] = 1;
                } else {
                    groups[4][0] = &w->output, n_w[4] = 1;
                }
                for (int r = 0; r < ROLES; r++) {
                    if (!n_w[r])
                        continue;
                    ldo[r] = 0;
                    for (int i = 0; i < n_w[r]; i++)
                        ldo[r] += groups[r][i]->N;
                    K[r] = groups[r][0]->K;
                    int bi = bucket_of(b, &n_b, r, groups[r], n_w[r]);
                    double t0 = omp_get_wtime();
                    fwd_gemm(k, FWD_GEMM_AUTO, &s.qbuf, out, (size_t)ldo[r], in, K[r], NULL,
                             groups[r], n_w[r], M, 0.0f);
                    double t = omp_get_wtime() - t0;
                    rep_s[bi] += t;
                    total += t;
                    if (rep == 1) {
                        b[bi].layers++;
                        b[bi].ops += 2.0 * M * (double)ldo[r] * K[r];
                        for (int i = 0; i < n_w[r]; i++)
                            b[bi].bytes += (double)groups[r][i]->row_bytes * groups[r][i]->N;
                    }
                }
            }
            if (rep == 0)
                continue;
            for (int i = 0; i < n_b; i++)
                if (rep == 1 || rep_s[i] < b[i].best_s)
                    b[i].best_s = rep_s[i];
            best_total = total < best_total ? total : best_total;
        }
        printf("\nM = %d: GEMM %.3f ms per step (best pass)\n", M, best_total * 1e3);
        printf("  %-8s %-12s %6s %10s %9s %9s\n", "group", "types", "layers", "ms/step",
               "GOP/s", "GB/s");
        for (int r = 0; r < ROLES; r++)
            for (int i = 0; i < n_b; i++)
                if (b[i].role == r)
                    printf("  %-8s %-12s %6d %10.3f %9.0f %9.1f\n", ROLE_NAMES[r], b[i].types,
                           b[i].layers, b[i].best_s * 1e3, b[i].ops / b[i].best_s / 1e9,
                           b[i].bytes / b[i].best_s / 1e9);
    }
    free(in);
    free(out);
    fwd_state_free(&s);
    ts_model_free(m);
    return 0;
}
