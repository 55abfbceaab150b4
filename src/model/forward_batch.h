/* forward_batch.h: the batched forward pass. One call runs every row of an engine step
 * (decode tokens and prefill chunks of many sequences) through the layer stack with one
 * GEMM per weight matrix, reading and writing K/V in the paged pool. */
#ifndef TESSERA_MODEL_FORWARD_BATCH_H
#define TESSERA_MODEL_FORWARD_BATCH_H

#include <stdint.h>

#include "kv/kv.h"
#include "model/model.h"
#include "qmat.h"
#include "simd.h"
#include "tessera/step_phase.h"

/* One sequence's share of a step: rows row0 .. row0+n_rows-1 hold its tokens at positions
 * pos0 .. pos0+n_rows-1. */
typedef struct fwd_seq {
    int row0;
    int n_rows;
    int pos0;
    const kv_table *table; /* borrowed: reserved through position pos0 + n_rows - 1 */
    int logits_row;        /* row of the logits output for its last row; -1: no logits */
    bool all_logits;       /* every row gets logits: row j's at logits_row - n_rows + 1 + j
                            * (logits_row >= 0 then; a scored prompt) */
    int logits_rows;       /* with logits_row >= 0: its last logits_rows rows (0 counts as
                            * 1) have logits, in rows logits_row, logits_row + 1, ... (a
                            * decoded row and its drafts); not with all_logits */
    int pool_row;          /* read only when the batch's n_pooled > 0: row of
                            * fwd_state.pooled for the rows the model's pooling takes of
                            * this chunk; -1: none */
} fwd_seq;

typedef struct fwd_batch {
    int n_rows;
    const int32_t *tokens; /* (n_rows) borrowed */
    int n_seqs;
    const fwd_seq *seqs;   /* (n_seqs) borrowed, rows in order, no gaps */
    int n_logits;          /* logits rows: one for each sequence with logits_row >= 0, n_rows
                            * for those with all_logits; rows 0..n_logits-1 */
    int n_pooled;          /* sequences with pool_row >= 0 (rows 0..n_pooled-1); 0: no
                            * sequence pools, pool_row unread */
} fwd_batch;

/* How the step multiplies activation rows by a weight matrix. */
typedef enum fwd_gemm_path {
    FWD_GEMM_AUTO,   /* the SIMD skinny GEMM up to the table's gemm_nt_max_rows, OpenBLAS above */
    FWD_GEMM_BLAS,   /* OpenBLAS always (cblas_sgemv for one row) */
    FWD_GEMM_KERNEL, /* the SIMD skinny GEMM always */
} fwd_gemm_path;

/* A step's activations in the forms its matrices multiply (simd_qmat_act(): indexed by
 * qmat.h's form), each row_cap[form] bytes per row; NULL for forms no matrix takes. */
typedef struct fwd_qbuf {
    void *form[SIMD_ACT_FORMS];
    size_t row_cap[SIMD_ACT_FORMS];
} fwd_qbuf;

/* Sizes buffers for max_rows rows of up to max_k inputs for the forms mats (n_mats,
 * planned, borrowed for the call) take: none for f32 matrices, which read the rows in
 * place. */
ts_status fwd_qbuf_init(fwd_qbuf *q, const simd_qmat *const *mats, int n_mats, int max_rows,
                        int max_k, ts_error *err);
void fwd_qbuf_free(fwd_qbuf *q); /* accepts a zeroed one */

/* Most matrices one fwd_gemm() call covers. */
enum { FWD_MAX_PARTS = 4 };

/* One group of a grouped pass (a mixture's expert): its matrices, which share the pass's
 * input, and the run of the pass's rows they multiply. */
typedef struct fwd_group {
    const simd_qmat *w[FWD_MAX_PARTS];
    int n_w;
    int row0, n_rows;
} fwd_group;

/* What a mixture's passes read, added up until taken (fwd_moe_take_counts): the layers'
 * passes, the experts they read and the (row, expert) pairs they multiplied, as
 * ts_step_profile's moe_*. */
typedef struct fwd_moe_counts {
    uint64_t layers, experts_read, pairs;
} fwd_moe_counts;

/* A step's buffers for a mixture of experts (E experts, U used a row, T rows): each row
 * goes to U experts, so the experts' passes run on T * U "moe rows", grouped by expert. */
typedef struct fwd_moe {
    float *router;   /* (T, ld) each row's pass over the normalised input: the shared
                      * expert's gate | up (2 * shared_ffn, where the model has one), the
                      * router's logits (E, from column col), the shared expert's gate logit */
    int ld, col;
    float *shared;   /* (T, dim) the shared expert's output, or NULL */
    int32_t *expert; /* (T, U) row r's experts, best first */
    float *weight;   /* (T, U) their weights, summing to 1 */
    int32_t *slot;   /* (T, U) the moe row each (row, expert) went to */
    int32_t *src;    /* (T * U) the step row each moe row holds */
    int32_t *count;  /* (E) the step's rows of each expert */
    int32_t *first;  /* (E) its first moe row */
    fwd_group *groups; /* (2 E) the grouped passes' groups: gate | up, then down */
    int *scratch;    /* (E * FWD_MAX_PARTS + 1) their chunk list */
    fwd_moe_counts counts; /* added up over the passes; see fwd_moe_take_counts */
    float *in;       /* (T * U, dim) the rows, gathered by expert */
    float *gu;       /* (T * U, 2 * ffn) gate | up, then act(gate) * up */
    float *out;      /* (T * U, dim) each expert's output */
} fwd_moe;

/* Most threads of a team whose waits for a CPU a step records (fwd_state.waited). */
enum { FWD_TEAM_MAX = 256 };

/* Most spans a decoding row's context is split into for attention (split-K), and the
 * fewest positions a span holds: a long context read by one task per kv head left most
 * threads idle when few sequences decode (a 4-kv-head model on 4 of 16 threads). */
enum { FWD_ATT_MAX_SPANS = 8, FWD_ATT_SPAN_MIN = 128 };

/* Scratch for steps of up to max_rows rows, max_logits of which sample. */
typedef struct fwd_state {
    int max_rows, max_logits;
    fwd_gemm_path gemm_path; /* auto after fwd_state_init; the engine sets its option's */
    bool f32_layers;         /* a layer matrix is f32 (OpenBLAS may take it) */
    float *x;       /* (max_rows, dim) residual stream */
    float *xn;      /* (max_rows, dim) normalised */
    float *qkv;     /* (max_rows, (nh + 2*nkv)*hd) */
    float *att;     /* (max_rows, nh*hd) attention output */
    float *gu;      /* (max_rows, 2*ffn) gate | up, then silu(gate)*up in the gate half */
    float *keys_t;  /* (max_rows, nkv*hd) an encoder's keys, scaled and transposed by
                     * sequence and head (forward_encoder.c); NULL in other models */
    uint8_t *att_packs;    /* an encoder's keys and values as bf16 packs, where its
                            * attention runs on them (model_encoder.att_bf16): grown to a
                            * step's need, att_pack_bytes of them */
    size_t att_pack_bytes;
    size_t *att_pack_off;  /* (max_rows) each sequence's first pack byte in att_packs */
    int32_t *pos;   /* (max_rows) position of each row */
    int32_t *seq;   /* (max_rows) the fwd_batch sequence each row belongs to */
    int32_t *chunk; /* (max_rows) first rows of the attention's chunks of rows, costliest
                       first */
    int64_t *chunk_key; /* (max_rows) scratch: their costs and rows, for the sort */
    int n_chunks;   /* this step's chunks in chunk */
    int att_heads;  /* this step's kv heads an attention task */
    int32_t *chunk_spans; /* (max_rows) spans each chunk's context is split into (1: none) */
    int32_t *chunk_task0; /* (max_rows + 1) each chunk's first attention task; the last
                           * entry is the step's count of tasks */
    bool att_split;       /* some chunk of this step has more than one span */
    float *att_part; /* (max_logits * FWD_ATT_MAX_SPANS, nh*hd) split rows' span outputs */
    float *att_lse;  /* (max_logits * FWD_ATT_MAX_SPANS, nh) and their log-sum-exps */
    long att_work;  /* this step's attention work: K/V floats its sequences read */
    float *rope;    /* (max_rows, SIMD_ROPE_TABLE_FLOATS(head_dim)) RoPE terms of the step */
    float *rope_swa; /* the same for windowed layers whose base differs, else NULL */
    fwd_moe moe;    /* a mixture of experts' buffers; zeroed for a dense model */
    float *xs;      /* (max_logits, dim) final-normalised rows that sample */
    float *logits;  /* (max_logits, vocab) */
    int head_rows;  /* the LM head scores the first head_rows token ids only, their logits
                     * bit for bit the whole head's and the rest of each row left as it
                     * was (a draft model's restricted vocabulary); 0: every id */
    float *pooled;  /* (max_logits, dim) each pooling sequence's chunk: the sum of the
                     * final-normalised rows its pooling takes (all for mean, position 0
                     * for cls, the chunk's last for last; zeros when it takes none) */
    fwd_qbuf qbuf;  /* (max(max_rows, max_logits), max K) quantized activations */
    double seconds[TS_PHASE_COUNT]; /* wall time forward_batch spent per phase (rowwise,
                                     * gemm, attention, lm_head), added up; the caller
                                     * reads and resets it */
    int team_threads; /* threads of the last step's team (0: it ran without one, or on
                       * more than FWD_TEAM_MAX) */
    double waited[FWD_TEAM_MAX]; /* each of them: seconds it waited for a CPU since it
                                  * finished its previous step (run_delay_since_s),
                                  * negative if the kernel does not say */
} fwd_state;

/* Fails when out of memory, or for max_rows outside 1 .. 2^24 - 1. */
ts_status fwd_state_init(fwd_state *s, const ts_model *m, int max_rows, int max_logits,
                         ts_error *err);
/* Accepts a zeroed or half-built state. */
void fwd_state_free(fwd_state *s);
/* The token ids whose logits s's LM head writes on m: the first head_rows, or all. */
int fwd_scored_ids(const fwd_state *s, const ts_model *m);
/* The mixture's counts since they were last taken, which start again from zero (all zero
 * for a dense model). */
fwd_moe_counts fwd_moe_take_counts(fwd_state *s);

/* Below this much work (multiply-adds, K/V floats read) a parallel region costs more than
 * it saves: fwd_gemm's and the attention's bound. */
enum { FWD_PARALLEL_MIN_WORK = 1 << 15 };

/* What a GEMM pass does to each input row a[r] before it reads it, row by row on the
 * thread that quantizes that row: the layer's RMS norm or gated activation, which then cost no
 * stage and barrier of their own (three a layer; ~4.5 us each at 16 threads on a 16-core
 * Xeon). The rows come out as the separate stage would write them, bit for bit: the same
 * kernel on the same row. */
typedef enum fwd_pre_kind {
    FWD_PRE_RMSNORM,  /* a[r][0, K) = rmsnorm(x[r][0, K)) * weight (x == a allowed) */
    FWD_PRE_SILU_MUL, /* a[r][0, K) = silu(a[r][0, K)) * a[r][K, 2K): gate, then up */
    FWD_PRE_GELU_MUL, /* a[r][0, K) = gelu(a[r][0, K)) * a[r][K, 2K) (tanh GELU) */
    FWD_PRE_GATHER,   /* a[r][0, K) = x[rows[r]][0, K): a mixture's rows by expert */
} fwd_pre_kind;

typedef struct fwd_pre {
    fwd_pre_kind kind;
    const float *x;      /* RMSNORM: input rows, stride lda like a; GATHER: rows of K
                          * floats, stride K; borrowed */
    const float *weight; /* RMSNORM: (K) */
    float eps;
    const int32_t *rows; /* GATHER: the row of x each row of a takes; borrowed */
} fwd_pre;

/* One pass over n_w (1..FWD_MAX_PARTS) matrices that share the input a (M, K; row stride
 * lda), each w[i] (N_i, K) in its own type: out (M, ldo) gets w[0]'s N_0 columns first,
 * then w[1]'s, ...: out[m][col_i + n] = a[m] . w[i][n] + beta * out[m][col_i + n].
 * f32 matrices go through `path` (fwd_gemm_takes_blas: OpenBLAS or their kernel); the
 * others' rows are made once per activation form into qb (sized by fwd_qbuf_init for M
 * rows; may be NULL when every matrix is f32). Every matrix but those OpenBLAS takes runs
 * as simd_qmat_plan() chose at load, one simd_qmat_gemm() per chunk of its rows; the
 * chunks of every matrix share one parallel region. pre (NULL: none) first rewrites a's M
 * rows in place. All pointers borrowed; out must not overlap a, qb or the weights. */
void fwd_gemm(const simd_kernels *k, fwd_gemm_path path, const fwd_qbuf *qb, float *out,
              size_t ldo, float *a, int lda, const fwd_pre *pre, const simd_qmat *const *w,
              int n_w, int M, float beta);

/* Rows a task when a pass of fwd_gemm / fwd_gemm_team over w (n_w) on M rows and
 * `threads` threads splits the rows rather than the columns (forward_gemm.c,
 * GEMM_ROWS_TASK, says when: bf16 forms of small matrices in long steps); 0 when it splits
 * the columns. Either way every output is the same, bit for bit. */
int fwd_gemm_rows_task(const simd_qmat *const *w, int n_w, int M, int threads);

/* Whether fwd_gemm on `path` sends an f32 matrix of an M-row pass to OpenBLAS. */
bool fwd_gemm_takes_blas(const simd_kernels *k, fwd_gemm_path path, int M);

/* The grouped pass: for each group g, out's rows [row0, row0 + n_rows) (ldo wide) get
 * a's same rows times g's matrices, their columns side by side as in fwd_gemm (beta 0).
 * pre (NULL: none) first rewrites a's M rows, which are then quantized once for the forms
 * of every group's matrices (qb sized for M rows); f32 matrices take the skinny SIMD GEMM.
 * Chunks of every group's matrices share one worksharing loop, so a step's experts run
 * side by side on the threads. team: the caller is inside a parallel region that every
 * thread reaches with the same arguments; else the pass opens its own. scratch holds
 * n_groups * FWD_MAX_PARTS + 1 ints. All pointers borrowed. */
void fwd_gemm_grouped(const simd_kernels *k, const fwd_qbuf *qb, float *out, size_t ldo,
                      float *a, int lda, const fwd_pre *pre, const fwd_group *g, int n_groups,
                      int M, int *scratch, bool team);

/* fwd_gemm's pass for a caller inside a parallel region that every thread of the team
 * reaches with the same arguments: the team shares the work, with no region of its own
 * (a barrier where fwd_gemm starts and joins one), and all of it returns together. f32
 * matrices take the SIMD skinny GEMM at every M: a team has no OpenBLAS. */
void fwd_gemm_team(const simd_kernels *k, const fwd_qbuf *qb, float *out, size_t ldo,
                   float *a, int lda, const fwd_pre *pre, const simd_qmat *const *w, int n_w,
                   int M, float beta);

/* Runs the batch. K/V of every row are written into the pool (the tables must be
 * reserved and their blocks unshared for those positions); logits land in s->logits. */
ts_status forward_batch(fwd_state *s, const ts_model *m, kv_pool *pool, const simd_kernels *k,
                        const fwd_batch *b, ts_error *err);

#endif /* TESSERA_MODEL_FORWARD_BATCH_H */
