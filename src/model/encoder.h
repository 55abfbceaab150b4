/* encoder.h: the encoder families (BERT, nomic-bert; ts_model_config.encoder): their
 * tensors beyond the decoder's layer table, read from GGUF as llama.cpp names them, and
 * their forward pass. An encoder computes each sequence whole in one step, every row
 * attending to every other row of its sequence, and only pools: no K/V is written.
 *
 * The matrices live in the usual model_layer slots, so packing and the GEMMs treat them
 * as any model's: wq/wk/wv (or the fused attn_qkv in wq), wo; the feed-forward's first
 * matrix in w1 (BERT's ffn_up, nomic-bert's ffn_gate), nomic-bert's ffn_up in w3 (BERT:
 * empty), ffn_down in w2. The model has no output matrix (empty, N == 0). */
#ifndef TESSERA_MODEL_ENCODER_H
#define TESSERA_MODEL_ENCODER_H

#include "model/forward_batch.h"
#include "model/model.h"

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
} model_encoder;

/* Fills w (zeroed on entry; free it with model_weights_free() whatever the result) with an
 * encoder config c's weights from f (borrowed, must outlive w): the layer matrices point
 * into f's bytes, the embeddings' extra rows, biases and LayerNorms are converted to f32
 * into w->enc. A missing or misshapen tensor, or one the pass would not read, is an error
 * naming it. */
ts_status encoder_read_weights(model_weights *w, const ts_model_config *c, const gguf_file *f,
                               ts_error *err);

/* Frees what encoder_read_weights allocated; accepts NULL. */
void encoder_free(model_encoder *enc);

/* The batch through the encoder (forward_batch's contract for an encoder model): every
 * sequence of b must be whole (pos0 0, all of its tokens), else TS_ERR_INVALID_ARG; the
 * pooled rows land in s->pooled as fwd_state.pooled says (the sum for mean pooling, the
 * first row for CLS, the last for last-token; for rank pooling the classification head's
 * cfg.cls_out scores of the first row, the rest of the row zero). The pool is not
 * touched. */
ts_status forward_encoder(fwd_state *s, const ts_model *m, const simd_kernels *k,
                          const fwd_batch *b, ts_error *err);

#endif /* TESSERA_MODEL_ENCODER_H */
