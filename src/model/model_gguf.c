/* model_gguf.c: a model's config from a parsed GGUF file (its family's row of model_arch.c,
 * then the file's ARCH.* keys), and its weights mapped in their own types (norms and
 * biases converted to f32). */
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/encoder.h"
#include "model/model_arch.h"
#include "model/model_gguf.h"
#include "model/model_tensors.h"

/* An optional positive int key: *out keeps its default when the key is absent. */
static ts_status get_int(const gguf_file *f, const char *key, bool required, int *out,
                         ts_error *err)
{
    int64_t v;
    ts_status st = gguf_get_i64(f, key, &v, err);
    if (st == TS_ERR_NOT_FOUND && !required)
        return TS_OK;
    if (st != TS_OK)
        return st;
    if (v <= 0 || v > INT_MAX)
        return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s': %lld is out of range", key,
                            (long long)v);
    *out = (int)v;
    return TS_OK;
}

static ts_status get_float(const gguf_file *f, const char *key, float *out, ts_error *err)
{
    double v;
    ts_status st = gguf_get_f64(f, key, &v, err);
    if (st == TS_ERR_NOT_FOUND)
        return TS_OK;
    if (st == TS_OK)
        *out = (float)v;
    return st;
}

/* The metadata key ARCH.suffix of c's family in buf (cap bytes). */
static const char *arch_key(char *buf, size_t cap, const ts_model_config *c, const char *suffix)
{
    snprintf(buf, cap, "%s.%s", c->arch, suffix);
    return buf;
}

/* RoPE scaling, as llama.cpp reads it: ARCH.rope.scaling.type (linear when absent) and
 * ARCH.rope.scaling.factor (ARCH.rope.scale_linear in older files; 0 or absent is 1).
 * Linear scaling divides every frequency by the factor; "none" ignores the factor, as
 * llama.cpp does. Other types (yarn, longrope, ...) also change the attention or mix
 * frequencies by context length: refused by name rather than run wrongly. */
static ts_status read_rope_scaling(ts_model_config *c, const gguf_file *f, ts_error *err)
{
    char key[96], old_key[96];
    gguf_str type = {"linear", 6};
    ts_status st = gguf_get_str(f, arch_key(key, sizeof key, c, "rope.scaling.type"), &type, err);
    if (st != TS_OK && st != TS_ERR_NOT_FOUND)
        return st;
    bool linear = gguf_str_eq(type, "linear");
    if (!linear && !gguf_str_eq(type, "none"))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "%s '%.*s' is not supported (none and linear are)", key,
                            (int)(type.len > 64 ? 64 : type.len), type.ptr);
    arch_key(key, sizeof key, c, "rope.scaling.factor");
    if (!gguf_find_kv(f, key) &&
        gguf_find_kv(f, arch_key(old_key, sizeof old_key, c, "rope.scale_linear")))
        memcpy(key, old_key, sizeof key);
    float factor = 0.0f;
    if ((st = get_float(f, key, &factor, err)) != TS_OK)
        return st;
    if (!(factor >= 0.0f) || !isfinite(factor))
        return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s': %g is out of range", key,
                            (double)factor);
    c->rope_scale = linear && factor != 0.0f ? factor : 1.0f;
    /* Phi-3.5 and Phi-4-mini's LongRoPE: factors chosen by context length and a scaled
     * attention, which the forward pass does not have */
    if (gguf_find_tensor(f, "rope_factors_long.weight") ||
        gguf_find_tensor(f, "rope_factors_short.weight"))
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "LongRoPE (rope_factors_long / rope_factors_short) is not supported");
    return TS_OK;
}

static void copy_str(char *dst, size_t cap, gguf_str s)
{
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = '\0';
}

/* A scalar value as a number, whatever its type; NaN for a string or an array. */
static double kv_number(const gguf_kv *kv)
{
    switch (kv->val.type) {
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64: return (double)kv->val.v.i64;
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64: return (double)kv->val.v.u64;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: return kv->val.v.f64;
    case GGUF_TYPE_BOOL: return kv->val.v.b;
    default: return NAN;
    }
}

/* A mixture of experts: ARCH.expert_count experts, ARCH.expert_used_count a token, each
 * ARCH.expert_feed_forward_length wide (Qwen3's files), else feed_forward_length (as a
 * Mixtral file, a `llama` one, gives it); hidden_dim becomes that width. A family with a
 * shared expert (model_arch.shared_expert) takes its length from
 * ARCH.expert_shared_feed_forward_length, else feed_forward_length, and its routed
 * experts' from feed_forward_length / expert_used_count when their key is absent, as
 * llama.cpp does. Routing weights that the file scales or gates otherwise (sigmoid
 * routers, several shared experts) are refused. */
static ts_status read_experts(ts_model_config *c, const model_arch *a, const gguf_file *f,
                              ts_error *err)
{
    char key[96];
    ts_status st;
    if ((st = get_int(f, arch_key(key, sizeof key, c, "expert_count"), false, &c->n_experts,
                      err)) != TS_OK)
        return st;
    if (a->experts && c->n_experts == 0)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: a %s file needs its experts' count", key,
                            c->arch);
    if (c->n_experts == 0)
        return TS_OK;
    /* keys whose other values change the routing: (name, the value tessera runs: 0 is also
     * taken as absent) */
    const struct {
        const char *key;
        double ok;
    } routing[] = {{"expert_shared_count", a->shared_expert ? 1 : 0},
                   {"expert_weights_scale", 1},
                   {"expert_gating_func", 1}}; /* llama.cpp's 1: softmax */
    for (int i = 0; i < 3; i++) {
        const gguf_kv *kv = gguf_find_kv(f, arch_key(key, sizeof key, c, routing[i].key));
        double v = kv ? kv_number(kv) : 0.0;
        if (v != 0.0 && v != routing[i].ok)
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s %g is not supported (routing is "
                                "a softmax over the experts, as the %s family weighs them)",
                                key, v, c->arch);
    }
    if ((st = get_int(f, arch_key(key, sizeof key, c, "expert_used_count"), true,
                      &c->n_experts_used, err)) != TS_OK)
        return st;
    c->experts_unnormed = a->experts_unnormed;
    if (a->shared_expert) {
        c->shared_ffn_dim = c->hidden_dim;
        if (c->n_experts_used > 0)
            c->hidden_dim /= c->n_experts_used;
        if ((st = get_int(f, arch_key(key, sizeof key, c, "expert_shared_feed_forward_length"),
                          false, &c->shared_ffn_dim, err)) != TS_OK)
            return st;
    }
    return get_int(f, arch_key(key, sizeof key, c, "expert_feed_forward_length"), false,
                   &c->hidden_dim, err);
}

/* Sliding-window attention and Gemma's soft-caps and attention scale, per the family's
 * row: its defaults, then the file's keys. */
static ts_status read_family_attention(ts_model_config *c, const model_arch *a,
                                       const gguf_file *f, ts_error *err)
{
    char key[96];
    ts_status st;
    if (a->softcaps) {
        c->attn_softcap = a->attn_softcap;
        c->final_softcap = a->final_softcap;
        if ((st = get_float(f, arch_key(key, sizeof key, c, "attn_logit_softcapping"),
                            &c->attn_softcap, err)) != TS_OK ||
            (st = get_float(f, arch_key(key, sizeof key, c, "final_logit_softcapping"),
                            &c->final_softcap, err)) != TS_OK)
            return st;
        if (!(c->attn_softcap >= 0.0f) || !(c->final_softcap >= 0.0f))
            return ts_error_set(err, TS_ERR_FORMAT, "soft-caps %g and %g must not be negative",
                                (double)c->attn_softcap, (double)c->final_softcap);
    }
    if (a->swa_reads) {
        c->swa_window = a->swa_window;
        c->swa_pattern = a->swa_pattern;
        c->rope_freq_base_swa = a->rope_base_swa;
        c->rope_scale_swa = a->swa_rope_scaled ? 0.0f : 1.0f;
        arch_key(key, sizeof key, c, "attention.sliding_window_pattern");
        const gguf_kv *v = gguf_find_kv(f, key);
        if (v && v->val.type == GGUF_TYPE_ARRAY)
            return ts_error_set(err, TS_ERR_UNSUPPORTED,
                                "%s as a per-layer array is not supported", key);
        if ((st = get_int(f, arch_key(key, sizeof key, c, "attention.sliding_window"), false,
                          &c->swa_window, err)) != TS_OK ||
            (st = get_int(f, arch_key(key, sizeof key, c, "attention.sliding_window_pattern"),
                          false, &c->swa_pattern, err)) != TS_OK ||
            (st = get_float(f, arch_key(key, sizeof key, c, "rope.freq_base_swa"),
                            &c->rope_freq_base_swa, err)) != TS_OK)
            return st;
    }
    if (a->attn_scale_dim_layers && c->n_layers == a->attn_scale_dim_layers)
        c->attn_scale = 1.0f / sqrtf((float)(c->dim / c->n_heads));
    return TS_OK;
}

/* ARCH.pooling_type: how an embedding model pools its rows (absent: none), or rank: a
 * reranker. */
static ts_status read_pooling(ts_model_config *c, const gguf_file *f, ts_error *err)
{
    char key[96];
    int64_t v = 0;
    ts_status st = gguf_get_i64(f, arch_key(key, sizeof key, c, "pooling_type"), &v, err);
    if (st == TS_ERR_NOT_FOUND)
        return TS_OK;
    if (st != TS_OK)
        return st;
    if (v < TS_POOLING_NONE || v > TS_POOLING_RANK)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: %lld is not a pooling (0-4)", key,
                            (long long)v);
    c->pooling = (ts_pooling)v;
    return TS_OK;
}

ts_status model_gguf_read_config(ts_model_config *c, const gguf_file *f,
                                 const char *name_fallback, ts_error *err)
{
    memset(c, 0, sizeof *c);
    gguf_str s;
    ts_status st = gguf_get_str(f, "general.architecture", &s, err);
    if (st != TS_OK)
        return st;
    int shown = (int)(s.len > 64 ? 64 : s.len);
    const model_arch *a = model_arch_find(s.ptr, (size_t)s.len);
    if (!a) {
        const char *why = model_arch_refusal(s.ptr, (size_t)s.len);
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "architecture '%.*s' is not supported%s%s (tessera runs %s)", shown,
                            s.ptr, why ? ": " : "", why ? why : "", model_arch_names());
    }
    copy_str(c->arch, sizeof c->arch, s);
    /* general.name names the model unless it is missing or merely repeats the
     * architecture (llama.cpp's llama2.c converter writes "llama"); then the file's base
     * name is the more useful id. */
    if (gguf_get_str(f, "general.name", &s, NULL) == TS_OK && s.len > 0 && !gguf_str_eq(s, c->arch))
        copy_str(c->name, sizeof c->name, s);
    else if (name_fallback)
        snprintf(c->name, sizeof c->name, "%s", name_fallback);

    char key[96];
    float temp_scale = 0.0f;
    if ((st = get_float(f, arch_key(key, sizeof key, c, "attention.temperature_scale"),
                        &temp_scale, err)) != TS_OK)
        return st;
    if (temp_scale != 0.0f)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s (attention temperature) is not supported",
                            key);

    c->rope_freq_base = 10000.0f;
    c->rms_eps = 1e-5f;
    if ((st = get_int(f, arch_key(key, sizeof key, c, "context_length"), true, &c->context_len,
                      err)) != TS_OK ||
        (st = get_int(f, arch_key(key, sizeof key, c, "embedding_length"), true, &c->dim,
                      err)) != TS_OK ||
        (st = get_int(f, arch_key(key, sizeof key, c, "block_count"), true, &c->n_layers,
                      err)) != TS_OK ||
        (st = get_int(f, arch_key(key, sizeof key, c, "feed_forward_length"), true,
                      &c->hidden_dim, err)) != TS_OK ||
        (st = get_int(f, arch_key(key, sizeof key, c, "attention.head_count"), true,
                      &c->n_heads, err)) != TS_OK)
        return st;
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    int v_dim = 0;
    if ((st = get_int(f, arch_key(key, sizeof key, c, "attention.head_count_kv"), false,
                      &c->n_kv_heads, err)) != TS_OK ||
        (st = get_int(f, arch_key(key, sizeof key, c, "attention.key_length"), false,
                      &c->head_dim, err)) != TS_OK ||
        (st = get_int(f, arch_key(key, sizeof key, c, "attention.value_length"), false, &v_dim,
                      err)) != TS_OK ||
        (st = get_float(f, arch_key(key, sizeof key, c, "rope.freq_base"), &c->rope_freq_base,
                        err)) != TS_OK ||
        (st = get_float(f, arch_key(key, sizeof key, c, "attention.layer_norm_rms_epsilon"),
                        &c->rms_eps, err)) != TS_OK ||
        (st = read_rope_scaling(c, f, err)) != TS_OK)
        return st;
    if ((st = read_experts(c, a, f, err)) != TS_OK)
        return st;
    if (v_dim != 0 && v_dim != c->head_dim)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "value heads of %d differ from key heads of %d (not supported)",
                            v_dim, c->head_dim);
    int rot = c->head_dim;
    if ((st = get_int(f, arch_key(key, sizeof key, c, "rope.dimension_count"), false, &rot,
                      err)) != TS_OK)
        return st;
    if (rot != c->head_dim)
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "%s %d differs from the head dimension %d (partial rotary "
                            "embeddings are not supported)", key, rot, c->head_dim);

    /* Vocabulary size: the explicit key, else the token list, else the embedding rows. */
    const gguf_value *tokens;
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    if (gguf_find_kv(f, arch_key(key, sizeof key, c, "vocab_size"))) {
        if ((st = get_int(f, key, true, &c->vocab_size, err)) != TS_OK)
            return st;
    } else if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, NULL) ==
                   TS_OK && tokens->v.arr.n <= INT_MAX) {
        c->vocab_size = (int)tokens->v.arr.n;
    } else if (embd && embd->n_dims == 2 && embd->ne[1] <= INT_MAX) {
        c->vocab_size = (int)embd->ne[1];
    } else {
        return ts_error_set(err, TS_ERR_FORMAT,
                            "vocabulary size: no %s, token list or token_embd.weight", key);
    }
    /* llama.cpp's Llama converter stores Q and K for (2i, 2i+1) pairs; the other families
     * keep their checkpoints' (i, i + hd/2) order */
    c->rope_neox = a->rope_neox;
    c->rope_factors = gguf_find_tensor(f, "rope_freqs.weight") != NULL;
    c->tied_output = gguf_find_tensor(f, "output.weight") == NULL;
    c->qkv_fused = gguf_find_tensor(f, "blk.0.attn_qkv.weight") != NULL;
    c->ffn_fused = a->ffn_fused;
    c->qkv_bias = gguf_find_tensor(f, "blk.0.attn_qkv.bias") ||
                  gguf_find_tensor(f, "blk.0.attn_q.bias") ||
                  gguf_find_tensor(f, "blk.0.attn_k.bias") || gguf_find_tensor(f, "blk.0.attn_v.bias");
    c->qk_norm = a->qk_norm;
    c->post_norms = a->post_norms;
    c->encoder = a->encoder;
    c->pos_embd = a->pos_embd;
    if (c->encoder) { /* no output matrix; LayerNorm's epsilon under its own key */
        c->tied_output = false;
        if ((st = get_float(f, arch_key(key, sizeof key, c, "attention.layer_norm_epsilon"),
                            &c->rms_eps, err)) != TS_OK)
            return st;
    }
    c->embd_scaled = a->embd_scaled;
    c->ffn_act = a->ffn_act;
    if ((st = read_pooling(c, f, err)) != TS_OK)
        return st;
    /* ARCH.attention.causal: encoders attend both ways, decoders forwards; a file that
     * says otherwise would be run wrongly, so it is refused */
    bool causal = !c->encoder;
    st = gguf_get_bool(f, arch_key(key, sizeof key, c, "attention.causal"), &causal, err);
    if (st != TS_OK && st != TS_ERR_NOT_FOUND)
        return st;
    if (causal == c->encoder)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "%s = %s is not supported for a %s model",
                            key, causal ? "true" : "false", c->arch);
    if (c->encoder && c->pooling == TS_POOLING_RANK) { /* a reranker's scores per input */
        const gguf_tensor *out = gguf_find_tensor(f, "cls.output.weight");
        c->cls_out = 1;
        if (out && (out->n_dims > 2 || out->ne[1] < 1 || out->ne[1] > (uint64_t)c->dim))
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tensor 'cls.output.weight': 1 to %d rows of %d", c->dim, c->dim);
        if (out)
            c->cls_out = (int)out->ne[1];
    }
    return read_family_attention(c, a, f, err);
}

/* The experts of 3-D tensor `name`, ggml shape (k, n, n_experts), into every expert's
 * matrix `part`: each a slice of the file's bytes, (n, k). */
static ts_status map_experts(model_layer *ly, const ts_model_config *c, const gguf_file *f,
                             const char *name, int part, uint64_t k, uint64_t n, ts_error *err)
{
    const gguf_tensor *t = gguf_find_tensor(f, name);
    uint64_t e = (uint64_t)c->n_experts;
    if (!t)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] != k || t->ne[1] != n || t->ne[2] != e || t->ne[3] != 1)
        return ts_error_set(err, TS_ERR_FORMAT,
                            "tensor '%s' has shape (%llu, %llu, %llu, %llu), expected (%llu, "
                            "%llu, %llu)", name, (unsigned long long)t->ne[0],
                            (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                            (unsigned long long)t->ne[3], (unsigned long long)k,
                            (unsigned long long)n, (unsigned long long)e);
    const qtype_info *q = qtype_get(t->type);
    size_t row = qtype_row_bytes(t->type, (int64_t)k);
    if (!q || row == 0 || t->nbytes != (uint64_t)row * n * e)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s': type %u with rows of %llu is not "
                            "a whole number of blocks, or its bytes do not match",
                            name, t->type, (unsigned long long)k);
    if (q->block_elems == 1 && (uintptr_t)t->data % q->block_bytes != 0)
        return ts_error_set(err, TS_ERR_FORMAT, "tensor '%s': data not aligned", name);
    for (uint64_t i = 0; i < e; i++)
        ly->experts[i * MODEL_EXPERT_MATRICES + (uint64_t)part] = (simd_qmat){
            .type = t->type, .N = (int)n, .K = (int)k, .row_bytes = row,
            .data = t->data + i * n * row};
    return TS_OK;
}

/* Layer l's shared expert (c->shared_ffn_dim): ffn_{gate,up,down}_shexp and the 1-D
 * ffn_gate_inp_shexp of its gate. */
static ts_status map_shared_expert(model_layer *ly, const ts_model_config *c,
                                   const gguf_file *f, int l, ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->shared_ffn_dim;
    char n[96];
    ts_status st;
    if ((st = tensors_map_matrix(&ly->shexp_gate_inp, f,
                                 tensors_layer_name(n, sizeof n, l, "ffn_gate_inp_shexp"), dim, 1,
                                 err)) != TS_OK ||
        (st = tensors_map_matrix(&ly->shexp_gate, f,
                                 tensors_layer_name(n, sizeof n, l, "ffn_gate_shexp"), dim, ffn,
                                 err)) != TS_OK ||
        (st = tensors_map_matrix(&ly->shexp_up, f,
                                 tensors_layer_name(n, sizeof n, l, "ffn_up_shexp"), dim, ffn,
                                 err)) != TS_OK)
        return st;
    return tensors_map_matrix(&ly->shexp_down, f,
                              tensors_layer_name(n, sizeof n, l, "ffn_down_shexp"), ffn, dim, err);
}

/* Layer l's mixture of experts: the router ffn_gate_inp and the 3-D ffn_{gate,up,down}_exps,
 * and the shared expert where the config has one; the dense w1 w3 w2 stay empty. */
static ts_status map_moe(model_layer *ly, const ts_model_config *c, const gguf_file *f, int l,
                         ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    char n[96];
    ts_status st;
    ly->w1 = ly->w3 = (simd_qmat){.type = QT_F32, .K = c->dim};
    ly->w2 = (simd_qmat){.type = QT_F32, .K = c->hidden_dim};
    if ((st = tensors_map_matrix(&ly->router, f, tensors_layer_name(n, sizeof n, l, "ffn_gate_inp"),
                                 dim, (uint64_t)c->n_experts, err)) != TS_OK ||
        (st = map_experts(ly, c, f, tensors_layer_name(n, sizeof n, l, "ffn_gate_exps"),
                          MODEL_EXPERT_GATE, dim, ffn, err)) != TS_OK ||
        (st = map_experts(ly, c, f, tensors_layer_name(n, sizeof n, l, "ffn_up_exps"),
                          MODEL_EXPERT_UP, dim, ffn, err)) != TS_OK ||
        (c->shared_ffn_dim > 0 && (st = map_shared_expert(ly, c, f, l, err)) != TS_OK))
        return st;
    return map_experts(ly, c, f, tensors_layer_name(n, sizeof n, l, "ffn_down_exps"),
                       MODEL_EXPERT_DOWN, ffn, dim, err);
}

/* Layer l's feed-forward matrices: ffn_gate and ffn_up, or ffn_up holding both
 * (c->ffn_fused, in w1's place with w3 empty); then ffn_down. Or its experts. */
static ts_status map_ffn(model_layer *ly, const ts_model_config *c, const gguf_file *f, int l,
                         ts_error *err)
{
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    char n[96];
    ts_status st;
    if (c->n_experts > 0)
        return map_moe(ly, c, f, l, err);
    if (c->ffn_fused) {
        if ((st = tensors_map_matrix(&ly->w1, f, tensors_layer_name(n, sizeof n, l, "ffn_up"), dim,
                                     2 * ffn, err)) != TS_OK)
            return st;
        ly->w3 = (simd_qmat){.type = ly->w1.type, .K = c->dim};
    } else if ((st = tensors_map_matrix(&ly->w1, f, tensors_layer_name(n, sizeof n, l, "ffn_gate"),
                                        dim, ffn, err)) != TS_OK ||
               (st = tensors_map_matrix(&ly->w3, f, tensors_layer_name(n, sizeof n, l, "ffn_up"),
                                        dim, ffn, err)) != TS_OK) {
        return st;
    }
    return tensors_map_matrix(&ly->w2, f, tensors_layer_name(n, sizeof n, l, "ffn_down"), ffn, dim,
                              err);
}

/* Layer l's norms: attn_norm and ffn_norm, and the family's per-head Q/K norms and
 * post-norms. */
static ts_status load_layer_norms(model_weights *w, const ts_model_config *c,
                                  const gguf_file *f, int l, ts_error *err)
{
    size_t dim = (size_t)c->dim, hd = (size_t)c->head_dim;
    char n[96];
    ts_status st;
    if ((st = tensors_load_vector(w->rms_att + l * dim, f,
                                  tensors_layer_name(n, sizeof n, l, "attn_norm"), dim, err)) !=
            TS_OK ||
        (st = tensors_load_vector(w->rms_ffn + l * dim, f,
                                  tensors_layer_name(n, sizeof n, l, "ffn_norm"), dim, err)) !=
            TS_OK)
        return st;
    if (c->qk_norm && ((st = tensors_load_vector(w->q_norm + l * hd, f,
                                                 tensors_layer_name(n, sizeof n, l, "attn_q_norm"),
                                                 hd, err)) != TS_OK ||
                       (st = tensors_load_vector(w->k_norm + l * hd, f,
                                                 tensors_layer_name(n, sizeof n, l, "attn_k_norm"),
                                                 hd, err)) != TS_OK))
        return st;
    if (c->post_norms &&
        ((st = tensors_load_vector(w->rms_post_att + l * dim, f,
                                   tensors_layer_name(n, sizeof n, l, "post_attention_norm"), dim,
                                   err)) != TS_OK ||
         (st = tensors_load_vector(w->rms_post_ffn + l * dim, f,
                                   tensors_layer_name(n, sizeof n, l, "post_ffw_norm"), dim,
                                   err)) != TS_OK))
        return st;
    return TS_OK;
}

/* Whether c's forward pass reads a tensor called name: a tensor it would not read (an
 * output bias, an expert, a family feature the table does not know) means the file is
 * not the model tessera would run, so the loader refuses it by name. */
static bool tensor_read(const ts_model_config *c, gguf_str name)
{
    static const char *const global[] = {"token_embd.weight", "output_norm.weight",
                                         "output.weight", "rope_freqs.weight"};
    for (int i = 0; i < 4; i++)
        if (gguf_str_eq(name, global[i]))
            return true;
    char buf[TENSORS_NAME_MAX];
    const char *suffix = tensors_layer_suffix(name, c->n_layers, buf);
    if (!suffix)
        return false;
    const char *always[] = {"attn_norm.weight", "ffn_norm.weight", "attn_output.weight"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(suffix, always[i]))
            return true;
    const char *moe[] = {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight",
                         "ffn_down_exps.weight"};
    for (int i = 0; c->n_experts > 0 && i < 4; i++)
        if (!strcmp(suffix, moe[i]))
            return true;
    const char *shexp[] = {"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
                           "ffn_up_shexp.weight", "ffn_down_shexp.weight"};
    for (int i = 0; c->shared_ffn_dim > 0 && i < 4; i++)
        if (!strcmp(suffix, shexp[i]))
            return true;
    if (c->n_experts == 0 && (!strcmp(suffix, "ffn_up.weight") || !strcmp(suffix, "ffn_down.weight")))
        return true;
    if (c->qkv_fused ? !strcmp(suffix, "attn_qkv.weight") || (c->qkv_bias && !strcmp(suffix, "attn_qkv.bias"))
                     : !strcmp(suffix, "attn_q.weight") || !strcmp(suffix, "attn_k.weight") ||
                           !strcmp(suffix, "attn_v.weight") ||
                           (c->qkv_bias && (!strcmp(suffix, "attn_q.bias") ||
                                            !strcmp(suffix, "attn_k.bias") ||
                                            !strcmp(suffix, "attn_v.bias"))))
        return true;
    if (!c->ffn_fused && c->n_experts == 0 && !strcmp(suffix, "ffn_gate.weight"))
        return true;
    if (c->qk_norm && (!strcmp(suffix, "attn_q_norm.weight") || !strcmp(suffix, "attn_k_norm.weight")))
        return true;
    return c->post_norms &&
           (!strcmp(suffix, "post_attention_norm.weight") || !strcmp(suffix, "post_ffw_norm.weight"));
}

ts_status model_gguf_read_weights(model_weights *w, const ts_model_config *c,
                                  const gguf_file *f, ts_error *err)
{

    /* ggml shapes are (in, out): ne[0] is the row length of our (out, in) matrices. */
    uint64_t dim = (uint64_t)c->dim, vocab = (uint64_t)c->vocab_size;
    ts_status st;
    if (c->encoder)
        return encoder_read_weights(w, c, f, err);
    if ((st = model_weights_alloc(w, c, false, err)) != TS_OK ||
        (st = tensors_map_matrix(&w->tok_embd, f, "token_embd.weight", dim, vocab, err)) != TS_OK ||
        (st = tensors_load_vector(w->rms_final, f, "output_norm.weight", dim, err)) != TS_OK)
        return st;
    if (c->tied_output)
        w->output = w->tok_embd;
    else if ((st = tensors_map_matrix(&w->output, f, "output.weight", dim, vocab, err)) != TS_OK)
        return st;
    if (c->rope_factors) {
        /* Llama 3.1's long-context scaling, worked out by the converter: one divisor of
         * each dimension pair's frequency (llama.cpp's freq_factors) */
        int half = c->head_dim / 2;
        if ((st = tensors_load_vector(w->rope_factors, f, "rope_freqs.weight", (uint64_t)half,
                                      err)) != TS_OK)
            return st;
        for (int i = 0; i < half; i++)
            if (!(w->rope_factors[i] > 0.0f) || !isfinite(w->rope_factors[i]))
                return ts_error_set(err, TS_ERR_FORMAT,
                                    "tensor 'rope_freqs.weight': factor %d is %g, not a "
                                    "positive number", i, (double)w->rope_factors[i]);
    }
    size_t qkv_rows = (size_t)model_qkv_rows(c);
    for (int l = 0; l < c->n_layers; l++) {
        model_layer *ly = &w->layers[l];
        if ((st = load_layer_norms(w, c, f, l, err)) != TS_OK ||
            (st = tensors_map_attention(ly, c, f, l, err)) != TS_OK ||
            (st = map_ffn(ly, c, f, l, err)) != TS_OK ||
            (c->qkv_bias &&
             (st = tensors_load_qkv_bias(w->qkv_bias + l * qkv_rows, c, f, l, err)) != TS_OK))
            return st;
    }
    /* every tensor it needs is there: now any it would not read */
    return tensors_refuse_unread(f, c, tensor_read, err);
}
