/* step_phase.h: the parts of an engine step whose time is measured. It depends on nothing,
 * so the forward pass (src/model) can name phases without the engine API. */
#ifndef TESSERA_STEP_PHASE_H
#define TESSERA_STEP_PHASE_H

/* Parts of an engine step whose wall time the engine adds up (CLOCK_MONOTONIC around
 * each part; the phases of a step sum to its duration). */
typedef enum ts_step_phase {
    TS_PHASE_SCHEDULE,  /* cancellations, admission, KV reservation, packing the rows */
    TS_PHASE_ROWWISE,   /* embedding rows, RoPE, K/V stores */
    TS_PHASE_GEMM,      /* the layers' weight GEMMs (QKV, output, W1|W3, W2), with the
                         * RMSNorm and SwiGLU of the rows they read */
    TS_PHASE_ATTENTION, /* paged attention */
    TS_PHASE_LM_HEAD,   /* final norm and output GEMM of the rows that sample */
    TS_PHASE_EMIT,      /* sampling, detokenizing, stop strings, events, clean-up */
    TS_PHASE_COUNT
} ts_step_phase;

/* The name of a phase ("schedule", "rowwise", "gemm", "attention", "lm_head", "emit"). */
const char *ts_step_phase_name(ts_step_phase phase);

#endif /* TESSERA_STEP_PHASE_H */
