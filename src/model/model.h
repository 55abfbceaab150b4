/* model.h: the in-memory model, shared by the loaders, the writer and the forward passes.
 * Every weight matrix is a simd_qmat in its file's own type: a GGUF model's matrices point
 * into the file's read-only mapping (nothing quantised is expanded or copied), while
 * models built in memory (llama2.c checkpoints, tests) hold owned f32 buffers wrapped as
 * QT_F32 matrices. Norms and RoPE factors are small f32 arrays converted at load. */
#ifndef TESSERA_MODEL_MODEL_H
#define TESSERA_MODEL_MODEL_H

#include "gguf/gguf.h"
#include "quant.h"
#include "simd.h"
#include "tessera/model.h"

/* One layer's matrices, row-major (out, in): y = x . W^T, as ggml and llama2.c store them.
 * Each may have its own type (a Q4_K_M file keeps some attn_v and ffn_down in Q6_K). */
/* A fused matrix (cfg.qkv_fused, cfg.ffn_fused) sits in the first of its parts, whose rows
 * it holds in order; the others are empty (N == 0, no data): a GEMM over the parts writes
 * the same columns either way. */
typedef struct model_layer {
    simd_qmat wq; /* (nh*hd, dim); fused: ((nh + 2*nkv)*hd, dim) [Q; K; V] */
    simd_qmat wk; /* (nkv*hd, dim) */
    simd_qmat wv; /* (nkv*hd, dim) */
    simd_qmat wo; /* (dim, nh*hd) */
    simd_qmat w1; /* (ffn, dim) gate; fused: (2*ffn, dim) [gate; up]; MoE: empty */
    simd_qmat w3; /* (ffn, dim) up */
    simd_qmat w2; /* (dim, ffn) down */
    simd_qmat router;   /* (n_experts, dim) ffn_gate_inp, in a mixture of experts */
    simd_qmat shexp_gate;     /* (shared_ffn, dim) the shared expert's gate, where the
                               * mixture has one (cfg.shared_ffn_dim); else empty */
    simd_qmat shexp_up;       /* (shared_ffn, dim) */
    simd_qmat shexp_down;     /* (dim, shared_ffn) */
    simd_qmat shexp_gate_inp; /* (1, dim) its output's scale is sigmoid(this . x) */
    simd_qmat *experts; /* (n_experts, 3) each expert's gate (ffn, dim), up (ffn, dim) and
                         * down (dim, ffn): slices of the file's 3-D ffn_*_exps; owned
                         * array, NULL for a dense layer */
} model_layer;

/* An expert's matrices in model_layer.experts. */
enum { MODEL_EXPERT_GATE, MODEL_EXPERT_UP, MODEL_EXPERT_DOWN, MODEL_EXPERT_MATRICES };

/* An encoder's tensors beyond the layer table (encoder.h reads them). */
typedef struct model_encoder {
    float *type_embd;  /* (dim) token type 0's row, added to every token: every input is one
                        * "sentence A" (zeros where the file has no token_types) */
    float *pos_embd;   /* (context_len, dim) learned positions when cfg.pos_embd, else NULL */
    float *embd_norm;  /* (2, dim) LayerNorm after the embeddings: weight, then bias */
    float *qkv_b;      /* (layer, (nh + 2*nkv)*hd) biases of Q, K and V (0 where absent) */
    float *out_b;      /* (layer, dim) attn_output's bias (0 where absent) */
    float *att_norm;   /* (layer, 2, dim) attn_output_norm: weight, bias */
    float *up_b;       /* (layer, ffn) ffn_up's bias (0 where absent) */
    float *down_b;     /* (layer, dim) ffn_down's bias (0 where absent) */
    float *out_norm;   /* (layer, 2, dim) layer_output_norm: weight, bias */
    float *ones;       /* (ffn) ones: the "up" of the gate-less GELU through gelu_mul */
    /* A reranker's classification head (rank pooling), each part NULL where the file has
     * none: score = cls_out . tanh(cls . h + cls_b) + cls_out_b of the CLS row h. */
    float *cls;        /* (dim, dim) */
    float *cls_b;      /* (dim) */
    float *cls_out;    /* (cfg.cls_out, dim) */
    float *cls_out_b;  /* (cfg.cls_out) */
    uint32_t cls_type, cls_out_type; /* the head's types in the file (qtype): its input is
                                      * rounded as a GEMM on those types rounds it */
    bool att_bf16; /* attention's products on bf16 packs of each step's keys and values
                    * (simd_qpack_f32_*, each value a hi and a lo bf16): where the model's
                    * pack policy packs F16 matrices (model_pack) and the head size is a
                    * multiple of 32; else in f32 */
} model_encoder;

typedef struct model_weights {
    simd_qmat tok_embd;  /* (vocab, dim) */
    simd_qmat output;    /* (vocab, dim); the same bytes as tok_embd when cfg.tied_output */
    model_layer *layers; /* (layer) owned */
    float *rms_final;    /* (dim) */
    float *rms_att;      /* (layer, dim) */
    float *rms_ffn;      /* (layer, dim) */
    float *qkv_bias;     /* (layer, (nh + 2*nkv)*hd) when cfg.qkv_bias (a missing one 0), else NULL */
    float *q_norm;       /* (layer, hd) when cfg.qk_norm, else NULL */
    float *k_norm;       /* (layer, hd) when cfg.qk_norm, else NULL */
    float *rms_post_att; /* (layer, dim) when cfg.post_norms, else NULL */
    float *rms_post_ffn; /* (layer, dim) when cfg.post_norms, else NULL */
    float *rope_factors; /* (hd/2) rope_freqs.weight when cfg.rope_factors, else NULL */
    float *rope_freq;    /* (hd/2) RoPE angle per position of each pair: model_rope_init() */
    float *rope_freq_swa; /* (hd/2) the same for windowed layers (cfg.rope_freq_base_swa) */
    float *store;        /* owned f32 bytes of every matrix of an in-memory model, else NULL */
    model_encoder *enc;  /* owned: an encoder's own tensors (encoder.h), else NULL */
    int n_layers;        /* layers allocated (cfg.n_layers) */
    int layer_matrices;  /* per layer in model_matrix()'s count: MODEL_LAYER_MATRICES, and a
                          * mixture's MODEL_MOE_MATRICES and every expert's three */
} model_weights;

struct ts_model {
    ts_model_config cfg;
    model_weights w;
    gguf_file *file;         /* owned: the mapping the matrices point into, or NULL */
    size_t locked_bytes;     /* bytes of the mapping mlock()ed (munlocked at free) */
    ts_tokenizer *tokenizer; /* owned */
    char *chat_template;     /* owned; tokenizer.chat_template from GGUF, or NULL */
};

/* Sizes derived from the config. */
static inline int model_qkv_rows(const ts_model_config *c)
{
    return (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
}

/* The RoPE table of layer l: the windowed layers' own where the family gives them another
 * base. */
static inline const float *model_rope_freq(const model_weights *w, const ts_model_config *c,
                                           int l)
{
    return ts_model_layer_window(c, l) ? w->rope_freq_swa : w->rope_freq;
}

/* Allocates the layer table and zeroed f32 norm arrays for config c (filled and validated)
 * into w (zeroed on entry); with_matrices also allocates every matrix as a zeroed QT_F32
 * buffer in w->store (the in-memory models), else the matrices are left for a loader to
 * point at its bytes. On failure w may be half built: free it. */
ts_status model_weights_alloc(model_weights *w, const ts_model_config *c, bool with_matrices,
                              ts_error *err);
/* Frees what model_weights_alloc made (a zeroed or half-built w too) and zeroes w; borrowed
 * matrix bytes are left alone. */
void model_weights_free(model_weights *w);

/* A QT_F32 matrix of n rows of k floats at data (borrowed), planned on simd_init()'s
 * gemm_nt. */
simd_qmat model_qmat_f32(const float *data, int n, int k);

/* The weight matrices the steps multiply by, the token embedding excluded: i = 0 is the
 * output, then w->layer_matrices per layer (wq wk wv wo w1 w3 w2, then in a mixture of
 * experts the router, the shared expert's gate, up, down and gate_inp, and each expert's
 * gate, up and down), model_matrices(w) in all. Some are empty (N == 0: a fused matrix's
 * other parts, a mixture's dense w1 w3 w2, a shared expert it does not have). w->layers
 * must be allocated. */
enum { MODEL_LAYER_MATRICES = 7, MODEL_MOE_MATRICES = 5 };
static inline int model_matrices(const model_weights *w)
{
    return 1 + w->layer_matrices * w->n_layers;
}
simd_qmat *model_matrix(const model_weights *w, int i);

/* Whether every matrix of w that holds rows is f32 (the engine then keeps K/V in f32 by
 * default); a fused matrix's empty parts do not count. */
bool model_all_f32(const model_weights *w);

/* Bytes of every matrix of w as stored (the tied output counted once), and the weights
 * they hold: what one token's pass reads. */
void model_weight_bytes(const model_weights *w, const ts_model_config *c, uint64_t *bytes,
                        uint64_t *params);

/* Fills w->rope_freq from c's base and linear scale and w->rope_factors (read by then):
 * pair i turns by pos * base^(-2i/hd) / (factor[i] * scale), as llama.cpp's rope does with
 * freq_factors and freq_scale; w->rope_freq_swa likewise from c's windowed layers' base
 * (the global one when it has none). Every loader calls it once the weights are in; the
 * forward passes read only the tables. */
void model_rope_init(model_weights *w, const ts_model_config *c);

/* Decides how each of m's matrices (not the token embedding) is multiplied
 * (simd_qmat_plan, simd_init()'s table): a GGUF model's repacked per mode into
 * simd/qpack.h's layout (their packs in simd_qmat.pack), the mapped pages of each packed
 * matrix given back (a tied output's excepted: the embedding lookup reads them). A matrix
 * the pack refuses stays on its file's blocks. Every loader calls it. Never fails. */
void model_pack(ts_model *m, ts_pack_mode mode);
/* Plans m's matrices again for table k (borrowed, static): those on the file's blocks or
 * f32 then run k's kernels; packs are kept. For tests that run a model on each table. */
void model_use_kernels(ts_model *m, const simd_kernels *k);
/* Frees every pack of w and clears the pointers. */
void model_pack_free(model_weights *w);

/* Checks a config read from an untrusted file: positive sizes, divisibility, caps. */
ts_status model_config_validate(const ts_model_config *c, ts_error *err);

/* Format-specific loaders behind ts_model_load_with(); opts borrowed, never NULL. */
ts_status model_load_gguf(const char *path, const ts_model_load_opts *opts, ts_model **out,
                          ts_error *err);
ts_status model_load_llama2c(const char *path, const char *tokenizer_path, ts_model **out,
                             ts_error *err);

#endif /* TESSERA_MODEL_MODEL_H */
