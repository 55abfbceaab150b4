/* step_util.h: helpers for tests that run models step by step through the batched forward
 * pass, and the stories260K-k files (../shared's archive, extracted into the build folder
 * by tests/CMakeLists.txt) they run. */
#ifndef TESSERA_TESTS_STEP_UTIL_H
#define TESSERA_TESTS_STEP_UTIL_H

#include "kv/kv.h"
#include "model/forward_batch.h"

/* Every stories260K-k file's type, as its name spells it ("f32", "Q4_K_M", ...). */
enum { SU_N_TYPES = 16 };
extern const char *const su_types[SU_N_TYPES];

/* TS_BUILD_DIR/stories260K-k/ followed by fmt with its one %s replaced by type. Returns a
 * static buffer overwritten by the next call. */
const char *su_kpath(const char *fmt, const char *type);
/* Loads a model, failing the test on error. */
ts_model *su_load_path(const char *path);
ts_model *su_load_type(const char *type); /* stories260K-k-TYPE.gguf */

int su_argmax(const float *x, int n);

/* How far logits a are from logits b, both (rows, vocab): the largest |a - b| of each row
 * relative to the largest |b| of that row (at least 1), the worst row's. */
double su_rel_err(const float *a, const float *b, int rows, int vocab);

enum { SU_MAX_SEQS = 4 };

/* A KV pool of 64 f32 blocks, one table per sequence and the forward scratch. */
typedef struct su_runner {
    const ts_model *m;
    const simd_kernels *k;
    kv_pool *pool;
    fwd_state fs;
    kv_table tables[SU_MAX_SEQS];
    int pos[SU_MAX_SEQS]; /* positions computed so far */
} su_runner;

/* m and k borrowed; steps of up to max_rows rows; K/V in f32. */
void su_runner_init(su_runner *r, const ts_model *m, const simd_kernels *k, int max_rows);
/* The same with K/V stored as dtype (f16: by kv's plain-C conversion). */
void su_runner_init_kv(su_runner *r, const ts_model *m, const simd_kernels *k, int max_rows,
                       kv_dtype dtype);
void su_runner_free(su_runner *r);

/* One step: sequence s takes cnt[s] rows (0: not in this step), tokens toks[s][0 ..), at
 * its next positions; the logits of its last row are copied to out[s] (vocab). */
void su_runner_step(su_runner *r, int32_t *const *toks, const int *cnt, float **out);

/* What one step costs in memory: RSS growth since before (a tu_rss_bytes() value) beyond
 * the KV pool, measured after a fresh runner on m, its pool prefaulted (resident, as the
 * engine makes it), has run one step of 8 prompt rows. *kv_bytes gets the pool's size. The
 * runner is freed after the measure. */
double su_step_rss_cost(const ts_model *m, long before, double *kv_bytes);

/* Batch invariance: three sequences' steps. A takes a_prefill rows in its first step, then
 * one row a step, SU_A_STEPS steps in all. Beside it, B takes b_rows[0], b_rows[1], ... rows
 * in its first n_b steps, then one row a step; C one row a step. */
enum { SU_A_STEPS = 11 };
typedef struct su_schedule {
    int a_prefill;
    int n_b, b_rows[4];
} su_schedule;

/* Sequence A's logits at each of its SU_A_STEPS steps (SU_A_STEPS, vocab; malloc'd) under
 * schedule sch (borrowed), run alone (others false) or beside B and C in every step: A's
 * rows and steps are the same either way. */
float *su_logits_of_a(const ts_model *m, bool others, const su_schedule *sch);

#endif
