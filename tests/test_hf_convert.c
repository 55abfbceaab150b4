/* test_hf_convert.c: a Hugging Face Llama directory converted to GGUF (model/hf_convert.c,
 * model/safetensors.c): the logits of the converted model equal a forward pass written
 * here in Hugging Face's own conventions (RoPE on half-split pairs) that reads the
 * safetensors directly; its tokenizer gives the ids of tokenizer.json's BPE; F16 and BF16
 * outputs; Llama 3's rope_scaling as rope_freqs.weight, its logits against the same pass
 * with transformers' llama3 frequencies; bad directories and files refused by name. Uses TinyStories-656K from
 * ../shared (F32 safetensors, tied embeddings, BPE with byte fallback). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "gguf/gguf.h"
#include "model/hf_convert.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "tessera/tokenizer.h"
#include "util.h"

#define HF_DIR "models/tinystories-656k"

static const safetensors_tensor *need(const safetensors_file *f, const char *name)
{
    const safetensors_tensor *t = safetensors_find(f, name);
    if (!t)
        fail_msg("no %s", name);
    return t;
}

/* out[n] = W (n x k, row-major as PyTorch stores nn.Linear) . x[k] */
static void linear(float *out, const safetensors_tensor *w, const float *x, int n, int k)
{
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < k; j++)
            s += (double)safetensors_get(w, (uint64_t)i * k + j) * x[j];
        out[i] = (float)s;
    }
}

static void rmsnorm(float *out, const float *x, const safetensors_tensor *w, int d, float eps)
{
    double ss = 0;
    for (int i = 0; i < d; i++)
        ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / d) + eps);
    for (int i = 0; i < d; i++)
        out[i] = x[i] * r * safetensors_get(w, (uint64_t)i);
}

/* transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, where pair i of a
 * head is (i, i + hd/2), turning by pos * inv_freq[i] (theta^(-2i/hd) when inv_freq is
 * NULL). */
static void rope_half(float *v, int heads, int hd, int pos, float theta, const float *inv_freq)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < hd / 2; i++) {
            float f = (float)pos * (inv_freq ? inv_freq[i]
                                             : powf(theta, -2.0f * (float)i / (float)hd));
            float c = cosf(f), s = sinf(f), *a = v + h * hd + i, *b = a + hd / 2;
            float x0 = *a, x1 = *b;
            *a = x0 * c - x1 * s;
            *b = x1 * c + x0 * s;
        }
}

/* Hugging Face LlamaForCausalLM, causal, on tokens[0..n), logits (n, vocab) malloc'd. */
static float *hf_forward(const safetensors_file *f, const ts_model_config *c, const int32_t *tokens,
                         int n, const float *inv_freq)
{
    int d = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads, ffn = c->hidden_dim;
    int V = c->vocab_size, L = c->n_layers;
    float *x = calloc((size_t)n * d, sizeof *x), *xn = malloc(sizeof(float) * d);
    float *q = malloc(sizeof(float) * nh * hd), *att = malloc(sizeof(float) * nh * hd);
    float *ks = malloc(sizeof(float) * (size_t)L * n * nkv * hd);
    float *vs = malloc(sizeof(float) * (size_t)L * n * nkv * hd);
    float *g = malloc(sizeof(float) * ffn), *u = malloc(sizeof(float) * ffn);
    float *tmp = malloc(sizeof(float) * d), *sc = malloc(sizeof(float) * n);
    float *logits = malloc(sizeof(float) * (size_t)n * V);
    assert_true(x && xn && q && att && ks && vs && g && u && tmp && sc && logits);
    const safetensors_tensor *emb = safetensors_find(f, "model.embed_tokens.weight");
    if (!emb)
        emb = need(f, "lm_head.weight");
    char name[128];
#define W(fmt, ...) (snprintf(name, sizeof name, fmt, __VA_ARGS__), need(f, name))
    for (int p = 0; p < n; p++) {
        float *xp = x + (size_t)p * d;
        for (int i = 0; i < d; i++)
            xp[i] = safetensors_get(emb, (uint64_t)tokens[p] * d + i);
        for (int l = 0; l < L; l++) {
            float *kp = ks + ((size_t)l * n + p) * nkv * hd, *vp = vs + ((size_t)l * n + p) * nkv * hd;
            rmsnorm(xn, xp, W("model.layers.%d.input_layernorm.weight", l), d, c->rms_eps);
            linear(q, W("model.layers.%d.self_attn.q_proj.weight", l), xn, nh * hd, d);
            linear(kp, W("model.layers.%d.self_attn.k_proj.weight", l), xn, nkv * hd, d);
            linear(vp, W("model.layers.%d.self_attn.v_proj.weight", l), xn, nkv * hd, d);
            rope_half(q, nh, hd, p, c->rope_freq_base, inv_freq);
            rope_half(kp, nkv, hd, p, c->rope_freq_base, inv_freq);
            for (int h = 0; h < nh; h++) {
                int kh = h / (nh / nkv);
                float mx = -INFINITY, sum = 0;
                for (int t = 0; t <= p; t++) {
                    const float *k = ks + ((size_t)l * n + t) * nkv * hd + kh * hd;
                    double s = 0;
                    for (int i = 0; i < hd; i++)
                        s += (double)q[h * hd + i] * k[i];
                    sc[t] = (float)(s / sqrt(hd));
                    mx = sc[t] > mx ? sc[t] : mx;
                }
                for (int t = 0; t <= p; t++)
                    sum += (sc[t] = expf(sc[t] - mx));
                for (int i = 0; i < hd; i++) {
                    double s = 0;
                    for (int t = 0; t <= p; t++)
                        s += (double)sc[t] / sum * vs[((size_t)l * n + t) * nkv * hd + kh * hd + i];
                    att[h * hd + i] = (float)s;
                }
            }
            linear(tmp, W("model.layers.%d.self_attn.o_proj.weight", l), att, d, nh * hd);
            for (int i = 0; i < d; i++)
                xp[i] += tmp[i];
            rmsnorm(xn, xp, W("model.layers.%d.post_attention_layernorm.weight", l), d,
                    c->rms_eps);
            linear(g, W("model.layers.%d.mlp.gate_proj.weight", l), xn, ffn, d);
            linear(u, W("model.layers.%d.mlp.up_proj.weight", l), xn, ffn, d);
            for (int i = 0; i < ffn; i++)
                g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
            linear(tmp, W("model.layers.%d.mlp.down_proj.weight", l), g, d, ffn);
            for (int i = 0; i < d; i++)
                xp[i] += tmp[i];
        }
        rmsnorm(xn, xp, need(f, "model.norm.weight"), d, c->rms_eps);
        linear(logits + (size_t)p * V, need(f, "lm_head.weight"), xn, V, d);
    }
#undef W
    free(x), free(xn), free(q), free(att), free(ks), free(vs), free(g), free(u), free(tmp);
    free(sc);
    return logits;
}

static char *convert(const char *name, uint32_t type)
{
    char *dir = strdup(tu_shared(HF_DIR)), *out = strdup(tu_tmp_path(name));
    ts_error err = {0};
    if (model_hf_convert(dir, out, type, &err) != TS_OK)
        fail_msg("convert: %s", err.msg);
    free(dir);
    return out;
}

static void test_logits_equal_hf_forward(void **state)
{
    (void)state;
    char *path = convert("ts656.gguf", GGUF_TENSOR_F32);
    ts_model *m = NULL;
    ts_error err = {0};
    assert_int_equal(ts_model_load(path, NULL, &m, &err), TS_OK);
    const ts_model_config *c = ts_model_get_config(m);
    assert_int_equal(c->dim, 128);
    assert_int_equal(c->n_layers, 2);
    assert_int_equal(c->n_heads, 8);
    assert_int_equal(c->n_kv_heads, 4);
    assert_int_equal(c->vocab_size, 2048);
    assert_int_equal(c->context_len, 512);
    assert_true(c->tied_output);
    assert_string_equal(c->name, "tinystories-656k");

    static const int32_t tokens[] = {1, 80, 147, 201, 282, 215, 286, 598, 629, 10, 1288, 67};
    int n = (int)(sizeof tokens / sizeof *tokens);
    safetensors_file f;
    char *st_path = strdup(tu_shared(HF_DIR "/model.safetensors"));
    assert_int_equal(safetensors_open(&f, st_path, &err), TS_OK);
    float *want = hf_forward(&f, c, tokens, n, NULL);
    float *got = tu_reference_logits(m, tokens, n);
    double worst = 0;
    for (size_t i = 0; i < (size_t)n * c->vocab_size; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs(want[i]));
        worst = e > worst ? e : worst;
    }
    if (worst > 1e-4)
        fail_msg("logits differ by %g (relative)", worst);

    /* F16 and BF16 outputs load and stay near (their rounding of the weights) */
    for (int k = 0; k < 2; k++) {
        char *p = convert(k ? "ts656-bf16.gguf" : "ts656-f16.gguf",
                          k ? GGUF_TENSOR_BF16 : GGUF_TENSOR_F16);
        ts_model *mh = NULL;
        assert_int_equal(ts_model_load(p, NULL, &mh, &err), TS_OK);
        float *lh = tu_reference_logits(mh, tokens, n);
        double dev = 0;
        for (size_t i = 0; i < (size_t)n * c->vocab_size; i++)
            dev = fmax(dev, fabs((double)lh[i] - want[i]));
        if (dev > (k ? 0.5 : 0.05) || dev == 0)
            fail_msg("%s logits deviate by %g", k ? "bf16" : "f16", dev);
        free(lh);
        ts_model_free(mh);
        free(p);
    }
    free(want);
    free(got);
    safetensors_close(&f);
    free(st_path);
    ts_model_free(m);
    free(path);
}

/* Expected ids from tokenizer.json's own rules: normalize (prepend '▁', spaces to '▁'),
 * split into characters, then apply the merge of lowest rank among adjacent pairs until
 * none applies (a 30-line Python rendering of the BPE model over the file's "vocab" and
 * "merges", run once to write these down), BOS first. */
static void test_tokenizer_matches_tokenizer_json(void **state)
{
    (void)state;
    char *path = convert("ts656-tok.gguf", GGUF_TENSOR_F32);
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    assert_int_equal(ts_tokenizer_load_gguf(path, &tok, &err), TS_OK);
    static const struct {
        const char *text;
        int32_t ids[32];
        int n;
    } cases[] = {
        {"Once upon a time, there was a little girl named Lily.",
         {1, 80, 147, 201, 282, 215, 286, 598, 629, 10}, 10},
        {"The cat sat on the mat", {1, 80, 247, 411, 1214, 337, 175, 72}, 8},
        {"  two  spaces, \"quotes\" and 42 numbers!",
         {1, 80, 80, 80, 1209, 80, 415, 53, 1499, 160, 514, 2028, 233, 5, 100, 15, 13, 80, 66,
          359, 934, 71, 4},
         23},
        {"Tom's toy-box", {1, 80, 380, 228, 408, 9, 472}, 7},
        {"Hello\nworld", {1, 80, 1288, 67, 3, 410, 555}, 7},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        int32_t ids[64];
        size_t n = 0;
        assert_int_equal(ts_tokenize(tok, cases[k].text, strlen(cases[k].text), true, ids, 64,
                                     &n),
                         TS_OK);
        assert_int_equal((int)n, cases[k].n);
        assert_memory_equal(ids, cases[k].ids, n * sizeof *ids);
    }
    ts_tokenizer_free(tok);
    free(path);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A safetensors file of one header and data bytes. */
static void write_st(const char *path, const char *header, size_t data_len)
{
    size_t h = strlen(header);
    uint8_t *buf = calloc(1, 8 + h + data_len);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    write_file(path, buf, 8 + h + data_len);
    free(buf);
}

static void test_refusals(void **state)
{
    (void)state;
    safetensors_file f;
    ts_error err = {0};
    const char *p = tu_tmp_path("x.safetensors");
    static const struct {
        const char *header;
        size_t data;
        ts_status st;
        const char *says;
    } bad[] = {
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 16]}}", 8,
         TS_ERR_FORMAT, "do not fit"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 16]}}", 16,
         TS_ERR_FORMAT, "do not fit"},
        {"{\"a\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4,
         TS_ERR_UNSUPPORTED, "dtype I8"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
         TS_ERR_FORMAT, "5 dimensions"},
        {"{\"a\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 4,
         TS_ERR_FORMAT, "bad shape"},
        {"[1, 2]", 0, TS_ERR_FORMAT, "not a JSON object"},
        {"{\"a\": 1}", 0, TS_ERR_FORMAT, "malformed"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_st(p, bad[i].header, bad[i].data);
        assert_int_equal(safetensors_open(&f, p, &err), bad[i].st);
        if (!strstr(err.msg, bad[i].says))
            fail_msg("'%s' says '%s'", bad[i].header, err.msg);
        assert_null(f.map);
    }
    uint8_t huge[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}'};
    write_file(p, huge, sizeof huge);
    assert_int_equal(safetensors_open(&f, p, &err), TS_ERR_FORMAT);
    write_file(p, huge, 5);
    assert_int_equal(safetensors_open(&f, p, &err), TS_ERR_FORMAT);
    write_st(p, "{\"__metadata__\": {\"format\": \"pt\"}, \"b\": {\"dtype\": \"BF16\", "
                "\"shape\": [2], \"data_offsets\": [0, 4]}}", 4);
    assert_int_equal(safetensors_open(&f, p, &err), TS_OK);
    assert_int_equal(f.n_tensors, 1);
    assert_non_null(safetensors_find(&f, "b"));
    safetensors_close(&f);

    /* directories: no config, another architecture, YaRN, a byte-level tokenizer */
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("hfdir"));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    remove(path);
    assert_false(model_hf_is_dir(dir));
    ts_model_config c;
    assert_int_equal(model_hf_read_config(&c, dir, &err), TS_ERR_NOT_FOUND);
    const char *base = "\"hidden_size\": 64, \"intermediate_size\": 128, \"num_hidden_layers\": 1,"
                       " \"num_attention_heads\": 4, \"vocab_size\": 16";
    char json[1024];
    snprintf(json, sizeof json, "{\"architectures\": [\"MistralForCausalLM\"], %s}", base);
    write_file(path, json, strlen(json));
    assert_true(model_hf_is_dir(dir));
    assert_int_equal(model_hf_read_config(&c, dir, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "MistralForCausalLM"));
    snprintf(json, sizeof json, "{\"architectures\": [\"LlamaForCausalLM\"], %s, "
             "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}", base);
    write_file(path, json, strlen(json));
    assert_int_equal(model_hf_read_config(&c, dir, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "yarn"));
    snprintf(json, sizeof json, "{\"architectures\": [\"LlamaForCausalLM\"], %s, "
             "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 4}}", base);
    write_file(path, json, strlen(json));
    assert_int_equal(model_hf_read_config(&c, dir, &err), TS_OK);
    assert_float_equal(c.rope_scale, 4.0f, 0);
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.head_dim, 16);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    /* byte-level pre-tokenizers are named by their expression */
    static const struct {
        const char *pre, *name;
    } pres[] = {
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
         "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*\"}}, {\"type\": \"ByteLevel\", "
         "\"use_regex\": false}]}",
         "llama-bpe"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
         "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*\"}}, {\"type\": \"ByteLevel\", "
         "\"use_regex\": false}]}",
         "qwen2"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
         "\"individual_digits\": true}, {\"type\": \"ByteLevel\", \"use_regex\": true}]}",
         "smollm"},
        {"{\"type\": \"ByteLevel\", \"add_prefix_space\": false}", "gpt2"},
        {"{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"\\\\w+\"}}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}",
         NULL},
    };
    tokenizer_vocab v;
    for (size_t i = 0; i < sizeof pres / sizeof *pres; i++) {
        snprintf(json, sizeof json, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, "
                 "\"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}, \"pre_tokenizer\": %s}",
                 pres[i].pre);
        write_file(path, json, strlen(json));
        memset(&v, 0, sizeof v);
        ts_status st = model_hf_read_vocab(&v, &c, dir, &err);
        if (!pres[i].name) {
            assert_int_equal(st, TS_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.msg, "byte-level pre-tokenizer other than"));
            continue;
        }
        if (st != TS_OK)
            fail_msg("%s: %s", pres[i].name, err.msg);
        assert_int_equal(v.kind, VOCAB_KIND_BPE);
        assert_string_equal(v.pre, pres[i].name);
        assert_int_equal(v.n_merges, 1);
        assert_string_equal(v.merges[0], "a b");
        assert_string_equal(v.tokens[15].text, "<unused_15>"); /* padded to the config's 16 */
        vocab_clear(&v);
    }
    memset(&v, 0, sizeof v);
    const char *unigram = "{\"model\": {\"type\": \"Unigram\"}}";
    write_file(path, unigram, strlen(unigram));
    assert_int_equal(model_hf_read_vocab(&v, &c, dir, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "Unigram"));
}

/* transformers' _compute_llama3_parameters, in frequency space: inv_freq (hd/2) of a
 * Llama 3 rope_scaling. Written from the Hugging Face code's steps (divide the slow band,
 * blend the middle one), not from the divisor form the converter uses. */
static void llama3_inv_freq(float *out, int hd, double theta, double factor, double low,
                            double high, double old_ctx)
{
    for (int i = 0; i < hd / 2; i++) {
        double inv = 1.0 / pow(theta, (double)(2 * i) / hd), wavelen = 2 * 3.14159265358979323846 / inv;
        double llama = wavelen > old_ctx / low ? inv / factor : inv;
        double smooth = (old_ctx / wavelen - low) / (high - low);
        bool medium = !(wavelen < old_ctx / high) && !(wavelen > old_ctx / low);
        out[i] = (float)(medium ? (1 - smooth) * llama / factor + smooth * llama : llama);
    }
}

/* TinyStories-656K with rope_scaling llama3 in its config.json: the converted GGUF holds
 * rope_freqs.weight with the divisors of transformers' frequencies, the loaded model turns
 * its pairs by those frequencies, and its logits equal the Hugging Face forward pass with
 * them (and differ from the unscaled pass, so ignoring the tensor would fail). */
static void test_llama3_rope_scaling(void **state)
{
    (void)state;
    char dir[4096], path[4200], src[4200];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("hf-llama3"));
    mkdir(dir, 0755);
    static const char *const links[] = {"model.safetensors", "tokenizer.json",
                                        "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        snprintf(src, sizeof src, "%s", tu_shared(HF_DIR));
        snprintf(src + strlen(src), sizeof src - strlen(src), "/%s", links[i]);
        remove(path);
        assert_int_equal(symlink(src, path), 0);
    }
    char *cfg_text = tu_read_file(tu_shared(HF_DIR "/config.json"), NULL);
    cJSON *cfg = cJSON_Parse(cfg_text);
    assert_non_null(cfg);
    /* original context 64: wavelengths under 16 keep their frequency, over 64 are divided
     * by 8, and the pairs between (19.9 and 62.8 at head_dim 16) are blended */
    cJSON_ReplaceItemInObject(cfg, "rope_scaling",
                              cJSON_Parse("{\"rope_type\": \"llama3\", \"factor\": 8.0, "
                                          "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                                          "\"original_max_position_embeddings\": 64}"));
    char *text = cJSON_Print(cfg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, text, strlen(text));
    free(text);
    free(cfg_text);

    char *out = strdup(tu_tmp_path("ts656-llama3.gguf"));
    ts_error err = {0};
    if (model_hf_convert(dir, out, GGUF_TENSOR_F32, &err) != TS_OK)
        fail_msg("convert: %s", err.msg);
    ts_model *m = NULL;
    assert_int_equal(ts_model_load(out, NULL, &m, &err), TS_OK);
    const ts_model_config *c = &m->cfg;
    assert_true(c->rope_factors);
    assert_float_equal(c->rope_scale, 1.0f, 0);
    int hd = c->head_dim, bands[3] = {0};
    assert_int_equal(hd, 16);
    float inv[8], plain;
    llama3_inv_freq(inv, hd, c->rope_freq_base, 8.0, 1.0, 4.0, 64.0);
    for (int i = 0; i < hd / 2; i++) {
        plain = 1.0f / powf(c->rope_freq_base, (float)(2 * i) / (float)hd);
        double want_factor = (double)plain / inv[i];
        if (fabs(m->w.rope_factors[i] - want_factor) > 1e-5 * want_factor)
            fail_msg("pair %d: factor %g, want %g", i, (double)m->w.rope_factors[i], want_factor);
        if (fabs(m->w.rope_freq[i] - inv[i]) > 1e-5 * inv[i])
            fail_msg("pair %d: frequency %g, want %g", i, (double)m->w.rope_freq[i], (double)inv[i]);
        bands[want_factor < 1.0001 ? 0 : want_factor > 7.9999 ? 2 : 1]++;
    }
    assert_int_equal(bands[0], 1);
    assert_int_equal(bands[1], 2);
    assert_int_equal(bands[2], 5);

    static const int32_t tokens[] = {1, 80, 147, 201, 282, 215, 286, 598, 629, 10, 1288, 67};
    int n = (int)(sizeof tokens / sizeof *tokens);
    safetensors_file f;
    char *st_path = strdup(tu_shared(HF_DIR "/model.safetensors"));
    assert_int_equal(safetensors_open(&f, st_path, &err), TS_OK);
    float *want = hf_forward(&f, c, tokens, n, inv), *unscaled = hf_forward(&f, c, tokens, n, NULL);
    float *got = tu_reference_logits(m, tokens, n);
    double worst = 0, moved = 0;
    for (size_t i = 0; i < (size_t)n * c->vocab_size; i++) {
        worst = fmax(worst, fabs((double)got[i] - want[i]) / (1.0 + fabs(want[i])));
        moved = fmax(moved, fabs((double)unscaled[i] - want[i]));
    }
    if (worst > 1e-4 || moved < 1e-2)
        fail_msg("logits: %g from the llama3 pass (relative), the unscaled pass %g away",
                 worst, moved);
    free(want);
    free(unscaled);
    free(got);
    safetensors_close(&f);
    free(st_path);
    ts_model_free(m);

    /* bad llama3 numbers, and scaling types that are not converted, are refused by name */
    ts_model_config cc;
    cJSON_ReplaceItemInObject(cfg, "rope_scaling",
                              cJSON_Parse("{\"rope_type\": \"llama3\", \"factor\": 8, "
                                          "\"low_freq_factor\": 4, \"high_freq_factor\": 1}"));
    text = cJSON_Print(cfg);
    write_file(path, text, strlen(text));
    free(text);
    assert_int_equal(model_hf_read_config(&cc, dir, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "low_freq_factor < high_freq_factor"));
    static const char *const refused[] = {"yarn", "dynamic", "longrope"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char rs[128];
        snprintf(rs, sizeof rs, "{\"rope_type\": \"%s\", \"factor\": 4}", refused[i]);
        cJSON_ReplaceItemInObject(cfg, "rope_scaling", cJSON_Parse(rs));
        text = cJSON_Print(cfg);
        write_file(path, text, strlen(text));
        free(text);
        assert_int_equal(model_hf_read_config(&cc, dir, &err), TS_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, refused[i]));
        assert_non_null(strstr(err.msg, "linear and llama3 are"));
    }
    cJSON_Delete(cfg);
    free(out);
}

/* GPT-2's vocabulary from llama.cpp's vocab GGUF written out as a tokenizer.json (vocab,
 * merges, ByteLevel) comes back as the same vocabulary: llama.cpp's test vectors for it
 * pass through the converted one. */
static void test_byte_level_round_trip(void **state)
{
    (void)state;
    gguf_file *f = NULL;
    tokenizer_vocab src, got;
    memset(&src, 0, sizeof src);
    memset(&got, 0, sizeof got);
    ts_error err = {0};
    assert_int_equal(gguf_open(tu_shared("vocab/ggml-vocab-gpt-2.gguf"), &f, &err), TS_OK);
    assert_int_equal(vocab_read_gguf(&src, f, &err), TS_OK);
    gguf_close(f);
    cJSON *tj = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(tj, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    cJSON *added = cJSON_AddArrayToObject(tj, "added_tokens");
    for (int i = 0; i < src.n_tokens; i++) {
        cJSON_AddNumberToObject(vocab, src.tokens[i].text, i);
        if (src.tokens[i].type == VOCAB_TOKEN_CONTROL) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", i);
            cJSON_AddStringToObject(a, "content", src.tokens[i].text);
            cJSON_AddBoolToObject(a, "special", true);
            cJSON_AddItemToArray(added, a);
        }
    }
    for (int i = 0; i < src.n_merges; i++)
        cJSON_AddItemToArray(merges, cJSON_CreateString(src.merges[i]));
    cJSON *pre = cJSON_AddObjectToObject(tj, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "use_regex", true);
    char *text = cJSON_PrintUnformatted(tj);
    cJSON_Delete(tj);
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s", tu_tmp_path("hf-gpt2"));
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, text, strlen(text));
    free(text);
    ts_model_config c = {.vocab_size = src.n_tokens};
    assert_int_equal(model_hf_read_vocab(&got, &c, dir, &err), TS_OK);
    assert_int_equal(got.kind, VOCAB_KIND_BPE);
    assert_string_equal(got.pre, "gpt2");
    assert_int_equal(got.n_merges, src.n_merges);
    for (int i = 0; i < src.n_tokens; i++) {
        assert_string_equal(got.tokens[i].text, src.tokens[i].text);
        assert_int_equal(got.tokens[i].type == VOCAB_TOKEN_CONTROL,
                         src.tokens[i].type == VOCAB_TOKEN_CONTROL);
    }
    ts_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_create(&got, &tok, &err), TS_OK);
    char *inp = tu_read_file(tu_shared("vocab/ggml-vocab-gpt-2.gguf.inp"), NULL);
    char *out = tu_read_file(tu_shared("vocab/ggml-vocab-gpt-2.gguf.out"), NULL);
    assert_true(inp && out);
    const char *sep = "\n__ggml_vocab_test__\n", *p = inp, *line = out;
    int n = 0;
    for (const char *e; (e = strstr(p, sep)) != NULL; p = e + strlen(sep), n++) {
        int32_t ids[1024];
        size_t k = 0;
        assert_int_equal(ts_tokenize(tok, p, (size_t)(e - p), false, ids, 1024, &k), TS_OK);
        char want[8192] = "", *w = want;
        for (size_t j = 0; j < k; j++)
            w += snprintf(w, sizeof want - (size_t)(w - want), " %d", ids[j]);
        size_t len = strcspn(line, "\n");
        if (strlen(want) != len || memcmp(want, line, len))
            fail_msg("vector %d: expected%.*s\n got%s", n, (int)len, line, want);
        line += len + 1;
    }
    assert_int_equal(n, 46);
    free(inp);
    free(out);
    ts_tokenizer_free(tok);
    vocab_clear(&got);
    vocab_clear(&src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_equal_hf_forward),
        cmocka_unit_test(test_tokenizer_matches_tokenizer_json),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_llama3_rope_scaling),
        cmocka_unit_test(test_byte_level_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
