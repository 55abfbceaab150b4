/* model.h: the in-memory model, shared by the loaders, the writer and the forward passes.
 * Weights are f32, immutable after loading, and laid out for batched GEMMs: Q, K, V are
 * concatenated per layer, as are the FFN gate (W1) and up (W3) projections. */
#ifndef TESSERA_MODEL_MODEL_H
#define TESSERA_MODEL_MODEL_H

#include "tessera/model.h"

/* Every matrix is row-major (out, in): y = x . W^T, as ggml and llama2.c store them. */
typedef struct model_weights {
    float *tok_embd;  /* (vocab, dim) */
    float *output;    /* (vocab, dim); == tok_embd when cfg.tied_output */
    float *rms_final; /* (dim) */
    float *rms_att;   /* (layer, dim) */
    float *rms_ffn;   /* (layer, dim) */
    float *wqkv;      /* (layer, (nh + 2*nkv)*hd, dim): Wq rows, then Wk, then Wv */
    float *wo;        /* (layer, dim, nh*hd) */
    float *w13;       /* (layer, 2*ffn, dim): W1 (gate) rows, then W3 (up) rows */
    float *w2;        /* (layer, dim, ffn) */
    float *rope_factors; /* (hd/2) rope_freqs.weight when cfg.rope_factors, else NULL */
    float *rope_freq;    /* (hd/2) RoPE angle per position of each pair: model_rope_init() */
} model_weights;

struct ts_model {
    ts_model_config cfg;
    model_weights w;
    ts_tokenizer *tokenizer; /* owned */
    char *chat_template;     /* owned; tokenizer.chat_template from GGUF, or NULL */
};

/* Sizes derived from the config. */
static inline int model_qkv_rows(const ts_model_config *c)
{
    return (c->n_heads + 2 * c->n_kv_heads) * c->head_dim;
}

/* Allocates zeroed weight arrays for config c (filled and validated) into w. Untied
 * models get a separate output matrix, models with rope_factors their factors. On
 * failure w may be half built: free it. */
ts_status model_weights_alloc(model_weights *w, const ts_model_config *c, ts_error *err);
/* Frees what model_weights_alloc made (a zeroed or half-built w too) and zeroes w. */
void model_weights_free(model_weights *w);

/* Fills w->rope_freq from c's base and linear scale and w->rope_factors (read by then):
 * pair i turns by pos * base^(-2i/hd) / (factor[i] * scale), as llama.cpp's rope does with
 * freq_factors and freq_scale. Every loader calls it once the weights are in; the forward
 * passes read only the table. */
void model_rope_init(model_weights *w, const ts_model_config *c);

/* Checks a config read from an untrusted file: positive sizes, divisibility, caps. */
ts_status model_config_validate(const ts_model_config *c, ts_error *err);

/* Format-specific loaders behind ts_model_load(). */
ts_status model_load_gguf(const char *path, ts_model **out, ts_error *err);
ts_status model_load_llama2c(const char *path, const char *tokenizer_path, ts_model **out,
                             ts_error *err);

#endif /* TESSERA_MODEL_MODEL_H */
