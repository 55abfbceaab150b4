/* tessera/model.h: loading a Llama-family model (GGUF or llama2.c checkpoint), its weights
 * kept in the file's own types (a GGUF is mapped, not copied), and writing it back out as
 * GGUF. */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/status.h"
#include "tessera/tokenizer.h"

typedef struct ts_model ts_model;

/* Hyper-parameters, read from GGUF `llama.*` keys or the llama2.c header. */
typedef struct ts_model_config {
    char arch[32];        /* "llama" */
    char name[64];        /* general.name, or the file's base name */
    int dim;              /* embedding length */
    int hidden_dim;       /* feed-forward length */
    int n_layers;
    int n_heads;
    int n_kv_heads;       /* < n_heads for grouped-query attention */
    int head_dim;         /* dim / n_heads */
    int vocab_size;
    int context_len;      /* the longest sequence the model was trained for */
    float rope_freq_base; /* 10000 for Llama-2 */
    float rope_scale;     /* linear RoPE scaling: every frequency divided by this; 1 for none */
    float rms_eps;        /* 1e-5 for Llama-2 */
    bool rope_neox;       /* rotate (i, i + hd/2) pairs instead of (2i, 2i+1) */
    bool rope_factors;    /* rope_freqs.weight divides each pair's frequency (Llama 3.1 on) */
    bool tied_output;     /* the LM head is the token embedding */
} ts_model_config;

/* Which weight matrices are repacked at load into the AMX tile layout (simd/qpack.h). A
 * packed matrix runs the tile kernel for every step (batch invariance needs one path per
 * matrix) and its pages of the mapped file are given back (MADV_DONTNEED; they fault back
 * in from the file if the file's blocks are read again, by the reference forward or the
 * writer), so RSS stays about the file size plus what the packs add. The token embedding
 * is never packed. */
typedef enum ts_amx_mode {
    TS_AMX_OFF = 0,  /* never: the default, because on the benchmark host a packed matrix
                      * is slower at one row (decode M = 1: Q8_0 37 ms a step on the packs
                      * against 20 ms on qgemm; Q4_K_M 19 against 14) and faster only from
                      * ~16 rows (prefill 1.5x Q8_0, 2.0x Q4_K_M) */
    TS_AMX_AUTO,     /* where AMX is usable, the types whose pack costs at most ~1.1x the
                      * file's bytes: Q8_0 (1.06x), F16 and BF16 (1.0x, bf16 tiles) */
    TS_AMX_ALL,      /* where AMX is usable, every type the pack takes, Q4_K / Q4_0 (2.0x),
                      * Q5_K (1.6x), Q6_K (1.3x) too: more RSS, faster prefill */
    TS_AMX_FORCE,    /* every type the pack takes, AMX or not: without AMX the packed GEMM
                      * is the tile kernel's plain-C twin (slow; for tests) */
} ts_amx_mode;

/* "off", "auto", "all", "force" into *out; false for anything else. */
bool ts_amx_mode_parse(const char *s, ts_amx_mode *out);

/* How a model is loaded. A zeroed struct is the default. */
typedef struct ts_model_load_opts {
    const char *tokenizer_path; /* borrowed, read during the call only: a llama2.c
                                 * checkpoint's tokenizer.bin; ignored for GGUF, may be NULL */
    bool mlock;     /* lock a GGUF's mapping in RAM (mlock) so its pages are never evicted;
                     * failing (RLIMIT_MEMLOCK) is an error naming the limit */
    bool hugepages; /* advise transparent huge pages for a GGUF's mapping (madvise
                     * MADV_HUGEPAGE: fewer TLB misses while streaming weights); advice
                     * the kernel refuses is ignored */
    ts_amx_mode amx; /* which matrices to repack for AMX (GGUF only; off by default) */
} ts_model_load_opts;

/* Loads path (borrowed): a .gguf file, kept mapped read-only for the model's life with
 * every weight matrix in its own type, or a llama2.c checkpoint (read into owned f32
 * buffers) whose tokenizer opts->tokenizer_path names. opts is borrowed for the call and
 * may be NULL (defaults). On success *out owns the model; free it with ts_model_free().
 * On failure err says what was wrong. */
ts_status ts_model_load_with(const char *path, const ts_model_load_opts *opts, ts_model **out,
                             ts_error *err);
/* ts_model_load_with() with only a tokenizer path (borrowed, may be NULL). */
ts_status ts_model_load(const char *path, const char *tokenizer_path, ts_model **out,
                        ts_error *err);

/* Accepts NULL. */
void ts_model_free(ts_model *model);

/* Borrowed views, valid while the model lives. */
const ts_model_config *ts_model_get_config(const ts_model *model);
const ts_tokenizer *ts_model_get_tokenizer(const ts_model *model);
/* The GGUF tokenizer.chat_template (Jinja text), or NULL when the file has none. */
const char *ts_model_get_chat_template(const ts_model *model);

/* Bytes of the weight matrices as loaded (in their own types; a tied output matrix counted
 * once) and the number of weights they hold. */
void ts_model_weight_bytes(const ts_model *model, uint64_t *bytes, uint64_t *params);

/* How many weight matrices run on AMX packs (of how many), and the packs' bytes. */
void ts_model_packed(const ts_model *model, int *packed, int *matrices, uint64_t *bytes);

/* Writes the model with its vocabulary as a GGUF v3 file with F32 tensors (every type
 * dequantised). */
ts_status ts_model_save_gguf(const ts_model *model, const char *path, ts_error *err);

#endif /* TESSERA_MODEL_H */
