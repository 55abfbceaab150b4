/* forward_ref.h: the reference forward pass. One sequence, one token at a time, a
 * contiguous KV cache, plain C written to be obviously right: the oracle every faster
 * path is tested against. Never optimise it. */
#ifndef TESSERA_MODEL_FORWARD_REF_H
#define TESSERA_MODEL_FORWARD_REF_H

#include <stdint.h>

#include "model/model.h"
#include "simd.h"

typedef struct ref_forward {
    const ts_model *model; /* borrowed */
    int max_pos;           /* positions the caches hold */
    float *x;              /* (dim) residual stream */
    float *xb;             /* (max(dim, nh*hd)) normalised input / attention output */
    float *qkv;            /* ((nh + 2*nkv) * hd) */
    float *att;            /* (max_pos) attention weights of one head */
    float *hb;             /* (2 * ffn) gate then up */
    float *key_cache;      /* (layer, max_pos, nkv*hd) */
    float *value_cache;    /* (layer, max_pos, nkv*hd) */
    float *logits;         /* (vocab) */
    float *wrow;           /* (max(dim, nh*hd, ffn)) one weight row decoded to f32 */
    float *router;         /* (n_experts) a mixture's router probabilities */
    float *expert_out;     /* (dim) one expert's output */
    simd_kv_type kv_type;  /* what each stored K/V row is rounded to, as a pool of that type
                            * keeps it: SIMD_KV_F32 (exact; what init sets), SIMD_KV_F16 or
                            * SIMD_KV_Q8_0 (per kv head's row). Set it before the first token. */
} ref_forward;

/* Most experts a token goes through that the reference pass takes. */
enum { MODEL_REF_MAX_USED = 64 };

/* Prepares caches for positions 0..max_pos-1 (max_pos <= the model's context). */
ts_status ref_forward_init(ref_forward *f, const ts_model *model, int max_pos, ts_error *err);

/* Frees the buffers; accepts a zeroed or half-initialised struct. */
void ref_forward_free(ref_forward *f);

/* Runs token at position pos (all earlier positions must have been run) and returns the
 * logits (vocab), valid until the next call. */
const float *ref_forward_token(ref_forward *f, int32_t token, int pos);

#endif /* TESSERA_MODEL_FORWARD_REF_H */
