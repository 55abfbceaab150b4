/* hf_convert.c: a Hugging Face Llama directory written as GGUF (hf_convert.h): the
 * config, the tensors streamed from mapped shards, the vocabulary from hf_vocab.c. */
#include <cjson/cJSON.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "model/hf_convert.h"
#include "model/model.h"
#include "model/model_gguf.h"
#include "model/safetensors.h"

enum { HF_MAX_SHARDS = 256 };

ts_status model_hf__read_json(cJSON **out, const char *dir, const char *name, ts_error *err);

bool model_hf_is_dir(const char *dir)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/config.json", dir);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The integer at key (fallback when absent); false when present but not a whole number in
 * 1..2^30. */
static bool get_int(const cJSON *o, const char *key, int fallback, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = fallback;
        return fallback > 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > (1 << 30) ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *out = (int)v->valuedouble;
    return true;
}

static float get_float(const cJSON *o, const char *key, float fallback)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (float)v->valuedouble : fallback;
}

/* rope_scaling {"rope_type": "llama3", ...} into p, checked; absent keys take the values
 * Llama 3.1 ships with (factor 8, low 1, high 4, original context 8192). */
static ts_status parse_llama3(model_hf_llama3 *p, const cJSON *rs, ts_error *err)
{
    p->factor = get_float(rs, "factor", 8.0f);
    p->low_freq_factor = get_float(rs, "low_freq_factor", 1.0f);
    p->high_freq_factor = get_float(rs, "high_freq_factor", 4.0f);
    p->original_context = get_float(rs, "original_max_position_embeddings", 8192.0f);
    if (!(p->factor >= 1.0f && p->factor <= 1e6f) || !(p->low_freq_factor > 0.0f) ||
        !(p->high_freq_factor > p->low_freq_factor) || !(p->high_freq_factor <= 1e6f) ||
        !(p->original_context >= 1.0f && p->original_context <= 1e9f))
        return ts_error_set(err, TS_ERR_FORMAT, "config.json: rope_scaling llama3 wants factor "
                            ">= 1, 0 < low_freq_factor < high_freq_factor and "
                            "original_max_position_embeddings >= 1");
    return TS_OK;
}

void model_hf_llama3_factors(float *out, int head_dim, float theta, const model_hf_llama3 *p)
{
    const double pi = 3.14159265358979323846;
    double low_wavelen = p->original_context / p->low_freq_factor;
    double high_wavelen = p->original_context / p->high_freq_factor;
    for (int i = 0; i < head_dim / 2; i++) {
        double wavelen = 2.0 * pi * pow((double)theta, (double)(2 * i) / head_dim);
        if (wavelen < high_wavelen) {
            out[i] = 1.0f; /* fast pairs keep their frequency */
        } else if (wavelen > low_wavelen) {
            out[i] = p->factor; /* slow pairs are slowed by the whole factor */
        } else { /* between: the frequency blends the two linearly in context / wavelen */
            double smooth = (p->original_context / wavelen - p->low_freq_factor) /
                            (p->high_freq_factor - p->low_freq_factor);
            out[i] = (float)(1.0 / ((1.0 - smooth) / p->factor + smooth));
        }
    }
}

ts_status model_hf_read_config(ts_model_config *c, const char *dir, ts_error *err)
{
    model_hf_llama3 unused;
    return model_hf_read_config_rope(c, &unused, dir, err);
}

ts_status model_hf_read_config_rope(ts_model_config *c, model_hf_llama3 *llama3, const char *dir,
                                    ts_error *err)
{
    memset(c, 0, sizeof *c);
    cJSON *j = NULL;
    ts_status st = model_hf__read_json(&j, dir, "config.json", err);
    if (st != TS_OK)
        return st;
    const cJSON *arch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "architectures"), 0);
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(j, "hidden_act");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
    const char *a = cJSON_IsString(arch) ? arch->valuestring : "(none)";
    if (strcmp(a, "LlamaForCausalLM")) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "config.json: architecture %s is not "
                          "converted (LlamaForCausalLM is)", a);
        goto done;
    }
    if (cJSON_IsString(act) && strcmp(act->valuestring, "silu")) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "config.json: hidden_act %s (silu only)",
                          act->valuestring);
        goto done;
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "attention_bias")) ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "mlp_bias"))) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "config.json: biases are not supported");
        goto done;
    }
    bool ok = get_int(j, "hidden_size", 0, &c->dim) &&
              get_int(j, "intermediate_size", 0, &c->hidden_dim) &&
              get_int(j, "num_hidden_layers", 0, &c->n_layers) &&
              get_int(j, "num_attention_heads", 0, &c->n_heads) &&
              get_int(j, "num_key_value_heads", c->n_heads, &c->n_kv_heads) &&
              get_int(j, "vocab_size", 0, &c->vocab_size) &&
              get_int(j, "max_position_embeddings", 2048, &c->context_len) &&
              get_int(j, "head_dim", c->dim / (c->n_heads ? c->n_heads : 1), &c->head_dim);
    if (!ok) {
        st = ts_error_set(err, TS_ERR_FORMAT, "config.json: a size is missing or not a "
                          "positive integer");
        goto done;
    }
    c->rope_scale = 1.0f;
    if (rs && !cJSON_IsNull(rs)) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!t)
            t = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *type = cJSON_IsString(t) ? t->valuestring : "?";
        if (!strcmp(type, "llama3")) {
            /* per-pair divisors in rope_freqs.weight, as llama.cpp's converter writes them */
            if ((st = parse_llama3(llama3, rs, err)) != TS_OK)
                goto done;
            c->rope_factors = true;
        } else if (!strcmp(type, "linear")) {
            c->rope_scale = get_float(rs, "factor", 1.0f);
        } else {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "config.json: rope_scaling type %s is "
                              "not converted (linear and llama3 are)", type);
            goto done;
        }
    }
    snprintf(c->arch, sizeof c->arch, "llama");
    const char *base = strrchr(dir, '/');
    base = base && base[1] ? base + 1 : dir;
    snprintf(c->name, sizeof c->name, "%s", base);
    c->rope_freq_base = get_float(j, "rope_theta", 10000.0f);
    c->rms_eps = get_float(j, "rms_norm_eps", 1e-6f);
    c->tied_output = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings"));
    st = model_config_validate(c, err);
done:
    cJSON_Delete(j);
    return st;
}

/* Every *.safetensors of dir, mapped. */
typedef struct shards {
    safetensors_file files[HF_MAX_SHARDS];
    int n;
} shards;

static void shards_close(shards *s)
{
    for (int i = 0; i < s->n; i++)
        safetensors_close(&s->files[i]);
    s->n = 0;
}

static ts_status shards_open(shards *s, const char *dir, ts_error *err)
{
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/*.safetensors", dir);
    glob_t g;
    s->n = 0;
    if (glob(pattern, 0, NULL, &g) != 0) {
        globfree(&g);
        return ts_error_set(err, TS_ERR_NOT_FOUND, "no .safetensors file in %s", dir);
    }
    ts_status st = TS_OK;
    for (size_t i = 0; i < g.gl_pathc && st == TS_OK; i++) {
        if (s->n == HF_MAX_SHARDS) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED, "%s: over %d shards", dir, HF_MAX_SHARDS);
            break;
        }
        if ((st = safetensors_open(&s->files[s->n], g.gl_pathv[i], err)) == TS_OK)
            s->n++;
    }
    globfree(&g);
    if (st != TS_OK)
        shards_close(s);
    return st;
}

static const safetensors_tensor *shards_find(const shards *s, const char *name)
{
    for (int i = 0; i < s->n; i++) {
        const safetensors_tensor *t = safetensors_find(&s->files[i], name);
        if (t)
            return t;
    }
    return NULL;
}

/* One output tensor: rows of src (rows x cols), in GGUF's order. */
typedef struct out_tensor {
    const safetensors_tensor *src;
    uint64_t rows, cols;
    int rope_heads;   /* > 0: Q or K of that many heads, rows reordered for RoPE */
    uint32_t type;    /* GGUF_TENSOR_F32, _F16 or _BF16 */
} out_tensor;

/* Hugging Face keeps a head's RoPE pairs as (i, i + hd/2); GGUF as (2i, 2i + 1). Row r
 * of the GGUF tensor is row rope_src_row(r) of the Hugging Face one. */
static uint64_t rope_src_row(uint64_t r, uint64_t head_dim)
{
    uint64_t h = r / head_dim, i = r % head_dim;
    return h * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}

static ts_status fill_rows(void *user, uint8_t *dst, uint64_t row0, uint64_t n_rows,
                           ts_error *err)
{
    (void)err;
    const out_tensor *o = user;
    uint64_t hd = o->rope_heads > 0 ? o->rows / (uint64_t)o->rope_heads : 0;
    for (uint64_t r = row0; r < row0 + n_rows; r++) {
        uint64_t src = hd ? rope_src_row(r, hd) : r;
        for (uint64_t k = 0; k < o->cols; k++) {
            float x = safetensors_get(o->src, src * o->cols + k);
            uint64_t at = (r - row0) * o->cols + k;
            if (o->type == GGUF_TENSOR_F32) {
                memcpy(dst + 4 * at, &x, 4);
            } else {
                uint16_t h;
                if (o->type == GGUF_TENSOR_F16) {
                    h = gguf_f32_to_f16(x);
                } else { /* BF16, rounded to nearest even; NaN stays NaN */
                    uint32_t b;
                    memcpy(&b, &x, 4);
                    h = isnan(x) ? (uint16_t)((b >> 16) | 0x40)
                                 : (uint16_t)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
                }
                memcpy(dst + 2 * at, &h, 2);
            }
        }
    }
    return TS_OK;
}

typedef struct converter {
    shards sh;
    out_tensor *outs; /* (cap) */
    int n_outs, cap;
    gguf_writer *g;
    float *rope_factors; /* (head_dim / 2) rope_freqs.weight for llama3 scaling, or NULL */
} converter;

/* Adds GGUF tensor name from the Hugging Face tensor hf of shape (rows, cols), or (rows)
 * when cols is 0. Norms (1-D) stay F32. */
static ts_status add(converter *cv, const char *name, const char *hf, uint64_t rows,
                     uint64_t cols, int rope_heads, uint32_t type, ts_error *err)
{
    const safetensors_tensor *t = shards_find(&cv->sh, hf);
    if (!t)
        return ts_error_set(err, TS_ERR_FORMAT, "the safetensors have no %s", hf);
    bool shape_ok = cols ? t->n_dims == 2 && t->shape[0] == rows && t->shape[1] == cols
                         : t->n_dims == 1 && t->shape[0] == rows;
    if (!shape_ok)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: shape does not match config.json", hf);
    out_tensor *o = &cv->outs[cv->n_outs++];
    *o = (out_tensor){t, cols ? rows : 1, cols ? cols : rows, rope_heads,
                      cols ? type : GGUF_TENSOR_F32};
    uint64_t ne[2] = {o->cols, o->rows};
    return gguf_writer_add_tensor_fill(cv->g, name, o->type, cols ? 2 : 1, ne, fill_rows, o);
}

ts_status model_hf_convert(const char *dir, const char *out_path, uint32_t out_type,
                           ts_error *err)
{
    ts_model_config c;
    model_hf_llama3 llama3;
    tokenizer_vocab v;
    memset(&v, 0, sizeof v);
    converter *cv = calloc(1, sizeof *cv);
    cJSON *tc = NULL;
    ts_status st;
    if (!cv)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory");
    if (out_type != GGUF_TENSOR_F32 && out_type != GGUF_TENSOR_F16 &&
        out_type != GGUF_TENSOR_BF16) {
        st = ts_error_set(err, TS_ERR_INVALID_ARG, "convert writes F32, F16 or BF16");
        goto done;
    }
    if ((st = model_hf_read_config_rope(&c, &llama3, dir, err)) != TS_OK ||
        (st = model_hf_read_vocab(&v, &c, dir, err)) != TS_OK ||
        (st = shards_open(&cv->sh, dir, err)) != TS_OK ||
        (st = gguf_writer_create(0, &cv->g, err)) != TS_OK)
        goto done;
    cv->cap = 3 + 9 * c.n_layers;
    if (!(cv->outs = calloc((size_t)cv->cap, sizeof *cv->outs))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* llama.cpp's llama_ftype: 0 all F32, 1 mostly F16, 32 mostly BF16 */
    model_gguf_add_config(cv->g, &c, out_type == GGUF_TENSOR_F32 ? 0
                                     : out_type == GGUF_TENSOR_F16 ? 1 : 32);
    if ((st = model_gguf_add_vocab(cv->g, &v, err)) != TS_OK)
        goto done;
    if (model_hf__read_json(&tc, dir, "tokenizer_config.json", err) == TS_OK) {
        const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(tc, "chat_template");
        if (cJSON_IsString(tmpl))
            gguf_writer_add_str(cv->g, "tokenizer.chat_template", tmpl->valuestring);
    }
    uint64_t dim = (uint64_t)c.dim, ffn = (uint64_t)c.hidden_dim, vocab = (uint64_t)c.vocab_size;
    uint64_t q = (uint64_t)c.n_heads * c.head_dim, kv = (uint64_t)c.n_kv_heads * c.head_dim;
    uint32_t t = out_type;
    if (c.rope_factors) { /* first, where llama.cpp's converter puts it */
        uint64_t half = (uint64_t)c.head_dim / 2;
        if (!(cv->rope_factors = malloc(half * sizeof(float)))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "out of memory");
            goto done;
        }
        model_hf_llama3_factors(cv->rope_factors, c.head_dim, c.rope_freq_base, &llama3);
        if ((st = gguf_writer_add_tensor(cv->g, "rope_freqs.weight", GGUF_TENSOR_F32, 1, &half,
                                         cv->rope_factors, half * sizeof(float))) != TS_OK)
            goto done;
    }
    /* A tied model's one matrix may be saved under either name (safetensors keeps one of
     * tensors that share memory). */
    const char *embd = c.tied_output && !shards_find(&cv->sh, "model.embed_tokens.weight")
                           ? "lm_head.weight"
                           : "model.embed_tokens.weight";
    st = add(cv, "token_embd.weight", embd, vocab, dim, 0, t, err);
    if (st == TS_OK)
        st = add(cv, "output_norm.weight", "model.norm.weight", dim, 0, 0, t, err);
    if (st == TS_OK && !c.tied_output)
        st = add(cv, "output.weight", "lm_head.weight", vocab, dim, 0, t, err);
    static const struct {
        const char *gguf, *hf;
        int rows, cols, rope; /* 0 dim, 1 ffn, 2 q, 3 kv; rope: 1 Q heads, 2 KV heads */
    } layer[] = {
        {"attn_norm", "input_layernorm", 0, -1, 0},
        {"attn_q", "self_attn.q_proj", 2, 0, 1},
        {"attn_k", "self_attn.k_proj", 3, 0, 2},
        {"attn_v", "self_attn.v_proj", 3, 0, 0},
        {"attn_output", "self_attn.o_proj", 0, 2, 0},
        {"ffn_norm", "post_attention_layernorm", 0, -1, 0},
        {"ffn_gate", "mlp.gate_proj", 1, 0, 0},
        {"ffn_up", "mlp.up_proj", 1, 0, 0},
        {"ffn_down", "mlp.down_proj", 0, 1, 0},
    };
    const uint64_t size[4] = {dim, ffn, q, kv};
    for (int l = 0; l < c.n_layers && st == TS_OK; l++)
        for (size_t k = 0; k < sizeof layer / sizeof *layer && st == TS_OK; k++) {
            char name[96], hf[160];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, layer[k].gguf);
            snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, layer[k].hf);
            int heads = layer[k].rope == 1 ? c.n_heads : layer[k].rope == 2 ? c.n_kv_heads : 0;
            st = add(cv, name, hf, size[layer[k].rows],
                     layer[k].cols < 0 ? 0 : size[layer[k].cols], heads, t, err);
        }
    if (st == TS_OK)
        st = gguf_writer_write_file(cv->g, out_path, err);
done:
    cJSON_Delete(tc);
    gguf_writer_free(cv->g);
    shards_close(&cv->sh);
    free(cv->outs);
    free(cv->rope_factors);
    free(cv);
    vocab_clear(&v);
    return st;
}
