/* encoder.h: the encoder families (BERT, nomic-bert; ts_model_config.encoder): their
 * tensors beyond the decoder's layer table, read from GGUF as llama.cpp names them, and
 * their forward pass. An encoder computes each sequence whole in one step, every row
 * attending to every other row of its sequence, and only pools: no K/V is written.
 *
 * The matrices live in the usual model_layer slots, so packing and the GEMMs treat them
 * as any model's: wq/wk/wv (or the fused attn_qkv in wq), wo; the feed-forward's first
 * matrix in w1 (BERT's ffn_up, nomic-bert's ffn_gate), nomic-bert's ffn_up in w3 (BERT:
 * empty), ffn_down in w2. The model has no output matrix (empty, N == 0). The encoder's
 * own tensors are model.h's model_encoder, freed with the rest of model_weights. */
#ifndef TESSERA_MODEL_ENCODER_H
#define TESSERA_MODEL_ENCODER_H

#include "model/forward_batch.h"
#include "model/model.h"


/* Fills w (zeroed on entry; free it with model_weights_free() whatever the result) with an
 * encoder config c's weights from f (borrowed, must outlive w): the layer matrices point
 * into f's bytes, the embeddings' extra rows, biases and LayerNorms are converted to f32
 * into w->enc. A missing or misshapen tensor, or one the pass would not read, is an error
 * naming it. */
ts_status encoder_read_weights(model_weights *w, const ts_model_config *c, const gguf_file *f,
                               ts_error *err);

/* The batch through the encoder (forward_batch's contract for an encoder model): every
 * sequence of b must be whole (pos0 0, all of its tokens), else TS_ERR_INVALID_ARG; the
 * pooled rows land in s->pooled as fwd_state.pooled says (the sum for mean pooling, the
 * first row for CLS, the last for last-token; for rank pooling the classification head's
 * cfg.cls_out scores of the first row, the rest of the row zero). The pool is not
 * touched. */
ts_status forward_encoder(fwd_state *s, const ts_model *m, const simd_kernels *k,
                          const fwd_batch *b, ts_error *err);

#endif /* TESSERA_MODEL_ENCODER_H */
