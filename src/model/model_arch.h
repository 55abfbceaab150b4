/* model_arch.h: the model families tessera runs, as data. One row per GGUF
 * general.architecture says what that family's layers do beyond Llama's; the GGUF reader
 * copies the row into the model's config (ts_model_config), and the forward passes read
 * only the config, never a family's name. Adding a family is a row here, and a kernel
 * only for an operation no family had before. */
#ifndef TESSERA_MODEL_MODEL_ARCH_H
#define TESSERA_MODEL_MODEL_ARCH_H

#include <stdbool.h>

#include "tessera/model.h"

typedef struct model_arch {
    const char *name;     /* general.architecture, also the prefix of its metadata keys */
    bool rope_neox;       /* RoPE rotates (i, i + hd/2) pairs */
    bool qk_norm;         /* attn_q_norm / attn_k_norm (head_dim) in every layer */
    bool post_norms;      /* post_attention_norm / post_ffw_norm (dim) in every layer */
    bool ffn_fused;       /* ffn_up holds [gate; up] and there is no ffn_gate */
    bool experts;         /* the family's files are mixtures of experts (the others may be:
                           * a Mixtral file is a `llama` one with ARCH.expert_count) */
    bool experts_unnormed; /* the top experts' probabilities are not renormalised */
    bool shared_expert;   /* every layer has a sigmoid-gated shared expert (ffn_*_shexp)
                           * of ARCH.expert_shared_feed_forward_length, else
                           * feed_forward_length; the routed experts' length then defaults
                           * to feed_forward_length / expert_used_count (llama.cpp's rule) */
    bool embd_scaled;     /* embedding rows times sqrt(dim) */
    ts_ffn_act ffn_act;
    /* Gemma's soft-caps: read from ARCH.attn_logit_softcapping and
     * ARCH.final_logit_softcapping, these when a key is absent (0: none). */
    bool softcaps;
    float attn_softcap, final_softcap;
    /* Sliding-window attention, from ARCH.attention.sliding_window (else swa_window; 0:
     * the family has no windowed layers without the key) and
     * ARCH.attention.sliding_window_pattern (else swa_pattern). swa_reads: the family's
     * windows are real (Phi-3 files carry a window that llama.cpp ignores). */
    bool swa_reads;
    int swa_window, swa_pattern;
    /* Windowed layers' RoPE base when ARCH.rope.freq_base_swa is absent; 0: the global
     * base. Their linear RoPE scaling is none unless swa_rope_scaled (then the global
     * layers'), as llama.cpp scales them. */
    float rope_base_swa;
    bool swa_rope_scaled;
    /* Gemma's 27B models scale attention scores by 1/sqrt(dim / n_heads), the others by
     * 1/sqrt(head_dim): the layer count that names that size (0: never). */
    int attn_scale_dim_layers;
    /* An encoder (ts_model_config.encoder): its layers are src/model/encoder.c's;
     * pos_embd: learned positions rather than RoPE. */
    bool encoder, pos_embd;
} model_arch;

/* The row of general.architecture `name` (n bytes, not terminated), or NULL when tessera
 * does not run that family. */
const model_arch *model_arch_find(const char *name, size_t n);

/* "llama, qwen2, ...": the families of the table, for messages (a static string). */
const char *model_arch_names(void);

/* Why a known family tessera does not run is refused ("mixture-of-experts ..."), or NULL
 * for a name it has no word on. */
const char *model_arch_refusal(const char *name, size_t n);

#endif /* TESSERA_MODEL_MODEL_ARCH_H */
