/* tessera/model.h: loading a model (a GGUF of a family src/model/model_arch.c lists, or a
 * llama2.c checkpoint), its weights kept in the file's own types (a GGUF is mapped, not
 * copied), and writing it back out as GGUF. */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/status.h"
#include "tessera/tokenizer.h"

typedef struct ts_model ts_model;

/* The feed-forward block's activation of the gate: out = act(gate) * up. */
typedef enum ts_ffn_act {
    TS_FFN_SILU,      /* SwiGLU (Llama, Qwen, Phi) */
    TS_FFN_GELU_TANH, /* GeGLU with the tanh approximation of GELU (Gemma) */
    TS_FFN_GELU,      /* no gate: out = gelu(up), GELU's tanh form, with biases (BERT) */
} ts_ffn_act;

/* How an embedding model pools the final-normalised hidden states of a text's tokens into
 * one vector: the GGUF's ARCH.pooling_type, its values llama.cpp's. */
typedef enum ts_pooling {
    TS_POOLING_NONE = 0, /* no pooling: a generative model (no embeddings served) */
    TS_POOLING_MEAN = 1, /* the mean over every token */
    TS_POOLING_CLS = 2,  /* the first token's */
    TS_POOLING_LAST = 3, /* the last token's (Qwen3-Embedding) */
    TS_POOLING_RANK = 4, /* a reranker (Qwen3-Reranker): it scores a query and a document
                          * with its "yes"/"no" logits (POST /v1/rerank) and serves no
                          * embeddings */
} ts_pooling;

/* Hyper-parameters, read from a GGUF's `ARCH.*` keys (model_arch.c's table says which
 * family has which feature) or the llama2.c header. A zeroed config's features are
 * Llama's: every field below `tied_output` is off at zero. */
typedef struct ts_model_config {
    char arch[32];        /* general.architecture: "llama", "qwen2", "gemma3", ... */
    char name[64];        /* general.name, or the file's base name */
    int dim;              /* embedding length */
    int hidden_dim;       /* feed-forward length: each expert's in a mixture-of-experts model */
    int n_layers;
    int n_heads;
    int n_kv_heads;       /* < n_heads for grouped-query attention */
    int head_dim;         /* attention.key_length, else dim / n_heads */
    int vocab_size;
    int context_len;      /* the longest sequence the model was trained for */
    float rope_freq_base; /* 10000 for Llama-2 */
    float rope_scale;     /* linear RoPE scaling: every frequency divided by this; 1 for none */
    float rms_eps;        /* 1e-5 for Llama-2 */
    bool rope_neox;       /* rotate (i, i + hd/2) pairs instead of (2i, 2i+1) */
    bool rope_factors;    /* rope_freqs.weight divides each pair's frequency (Llama 3.1 on) */
    bool tied_output;     /* the LM head is the token embedding */

    /* The family's layer features (zero: Llama's). */
    bool qkv_fused;       /* one attn_qkv matrix of rows [Q; K; V] (Phi-3) */
    bool ffn_fused;       /* ffn_up of rows [gate; up], no ffn_gate (Phi-3) */
    bool qkv_bias;        /* attn_{q,k,v}.bias added after the projections (Qwen2) */
    bool qk_norm;         /* RMS norm of each Q and K head before RoPE (Qwen3, Gemma 3) */
    bool post_norms;      /* RMS norm of each block's output before the residual add
                           * (post_attention_norm, post_ffw_norm: Gemma) */
    bool embd_scaled;     /* embedding rows times sqrt(dim) (Gemma) */
    ts_ffn_act ffn_act;
    float attn_scale;     /* attention scores times this; 0: 1 / sqrt(head_dim) */
    float attn_softcap;   /* scores become cap * tanh(score / cap) (Gemma 2); 0: none */
    float final_softcap;  /* logits likewise; 0: none */
    int swa_window;       /* positions a windowed layer attends to, its own included (a
                           * query at p sees keys p - swa_window < k <= p); 0: no layer
                           * is windowed */
    int swa_pattern;      /* with swa_window, layer l is windowed iff l % swa_pattern <
                           * swa_pattern - 1 (0: every layer) */
    float rope_freq_base_swa; /* RoPE base of windowed layers; 0: rope_freq_base */
    float rope_scale_swa; /* linear RoPE scaling of windowed layers (Gemma 3's are unscaled:
                           * 1); 0: rope_scale */
    int n_experts;        /* > 0: every layer's feed-forward block is a mixture of this many
                           * experts (ffn_*_exps), routed by ffn_gate_inp */
    int n_experts_used;   /* experts a token goes through: the top ones of the router's
                           * softmax, their weights renormalised to sum to 1 (unless
                           * experts_unnormed) */
    bool experts_unnormed; /* the top experts weigh by their softmax probabilities as they
                            * are, not renormalised (Qwen1.5-MoE, Qwen2-MoE) */
    int shared_ffn_dim;   /* > 0: a shared expert of this feed-forward length (ffn_*_shexp)
                           * runs on every token beside the routed ones, its output scaled
                           * by sigmoid(ffn_gate_inp_shexp . x); 0: none */
    ts_pooling pooling;   /* embeddings' pooling (ARCH.pooling_type; absent: none) */
    /* An encoder (BERT family): bidirectional attention over one whole sequence, LayerNorm
     * (rms_eps is its epsilon) after the embeddings and after each block's residual add,
     * biases on every matrix, no KV kept: it only pools (src/model/encoder.h). */
    bool encoder;
    bool pos_embd;        /* with encoder: learned absolute positions (position_embd) rather
                           * than RoPE */
    int cls_out;          /* an encoder reranker's (rank pooling) scores per input: the rows
                           * of its classification head's cls.output (else 1: the first
                           * value of the CLS row or of the cls dense layer); 0 otherwise */
} ts_model_config;

/* Positions layer l of c attends to: c->swa_window for a windowed layer, else 0 (all). */
static inline int ts_model_layer_window(const ts_model_config *c, int l)
{
    if (c->swa_window <= 0)
        return 0;
    bool windowed = c->swa_pattern == 0 || l % c->swa_pattern < c->swa_pattern - 1;
    return windowed ? c->swa_window : 0;
}

/* Which weight matrices are repacked at load into simd/qpack.h's layout: 16 rows
 * interleaved in the order one vpdpbusd (AVX-512 VNNI) or one AMX tile multiplies, each
 * weight kept in its file's bits. A packed matrix serves every step (the vector kernel, and
 * AMX tiles from 16 rows where the CPU has them, which give the same bits), and its pages
 * of the mapped file are given back (MADV_DONTNEED; they fault back in from the file if the
 * file's blocks are read again, by the reference forward or the writer), so RSS stays about
 * the file size plus what the packs add (1.0-1.12x the blocks they replace). The token
 * embedding is never packed. */
typedef enum ts_pack_mode {
    TS_PACK_AUTO = 0, /* the default: Q8_0, Q4_0, Q4_K, Q5_K and Q6_K where a packed
                       * kernel runs here (AVX-512 VNNI, or AMX-INT8): the same integers as
                       * the file blocks' GEMM, summed in another float order; in an
                       * embedding model (pooling set) also as TS_PACK_ALL's F16 / BF16 */
    TS_PACK_OFF,      /* never: every matrix computes on the file's blocks */
    TS_PACK_ALL,      /* auto, and F16 and BF16 where the CPU has AMX-BF16: bf16 tiles on
                       * a hi and a lo bf16 of each value (simd/qpack.h), within about 2^-16
                       * of the f32 pass; an F16 pack takes twice the file's bytes */
    TS_PACK_FORCE,    /* every type the pack takes, whatever the CPU: where no packed
                       * kernel runs, the plain-C twin (slow; for tests) */
} ts_pack_mode;

/* "auto", "off", "all", "force" into *out; false for anything else. */
bool ts_pack_mode_parse(const char *s, ts_pack_mode *out);

/* How a model is loaded. A zeroed struct is the default. */
typedef struct ts_model_load_opts {
    const char *tokenizer_path; /* borrowed, read during the call only: a llama2.c
                                 * checkpoint's tokenizer.bin; ignored for GGUF, may be NULL */
    bool mlock;     /* lock a GGUF's mapping in RAM (mlock) so its pages are never evicted;
                     * failing (RLIMIT_MEMLOCK) is an error naming the limit */
    bool hugepages; /* advise transparent huge pages for a GGUF's mapping (madvise
                     * MADV_HUGEPAGE: fewer TLB misses while streaming weights); advice
                     * the kernel refuses is ignored */
    ts_pack_mode pack; /* which matrices to repack (GGUF only; auto by default) */
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

/* What packed int8-type matrices compute on here: "AVX-512 VNNI + AMX tiles",
 * "AVX-512 VNNI", "AMX tiles" or "plain C" (a static string). */
const char *ts_pack_kernels(void);

/* How the model's weight matrices are multiplied, as decided at load: each(arg, kernel,
 * n) once per kind of kernel ("Q4_K 16-row pack, AVX-512 VNNI, AMX tiles from 32 rows":
 * borrowed for the call) with the number of matrices that run on it. */
void ts_model_kernels(const ts_model *model, void (*each)(void *arg, const char *kernel, int n),
                      void *arg);

/* How many weight matrices run on packs (of how many), and the packs' bytes. */
void ts_model_packed(const ts_model *model, int *packed, int *matrices, uint64_t *bytes);

/* Writes the model with its vocabulary as a GGUF v3 file with F32 tensors (every type
 * dequantised). */
ts_status ts_model_save_gguf(const ts_model *model, const char *path, ts_error *err);

#endif /* TESSERA_MODEL_H */
