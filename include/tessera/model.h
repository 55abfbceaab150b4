/* tessera/model.h: loading a Llama-family model (GGUF or llama2.c checkpoint) into
 * memory as f32 weights, and writing it back out as GGUF. */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H

#include <stdbool.h>

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

/* Loads path: a .gguf file, or a llama2.c checkpoint with tokenizer_path naming its
 * tokenizer.bin (borrowed; ignored for GGUF, may be NULL). On success *out owns the
 * model; free it with ts_model_free(). On failure err says what was wrong. */
ts_status ts_model_load(const char *path, const char *tokenizer_path, ts_model **out,
                        ts_error *err);

/* Accepts NULL. */
void ts_model_free(ts_model *model);

/* Borrowed views, valid while the model lives. */
const ts_model_config *ts_model_get_config(const ts_model *model);
const ts_tokenizer *ts_model_get_tokenizer(const ts_model *model);
/* The GGUF tokenizer.chat_template (Jinja text), or NULL when the file has none. */
const char *ts_model_get_chat_template(const ts_model *model);

/* Writes the model with its vocabulary as a GGUF v3 file with F32 tensors. */
ts_status ts_model_save_gguf(const ts_model *model, const char *path, ts_error *err);

#endif /* TESSERA_MODEL_H */
