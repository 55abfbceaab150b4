/* test_model_gguf.c: Llama config, weights and vocabulary from GGUF, checked against the
 * llama2.c checkpoint of the same model; malformed models; the GGUF writer round trip;
 * RoPE factors and scaling as the reference forward pass sees them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/forward_ref.h"
#include "model/model_gguf.h"
#include "tokenizer/vocab.h"
#include "util.h"

static gguf_file *open_shared(const char *rel)
{
    gguf_file *f = NULL;
    ts_error err = {0};
    if (gguf_open(tu_shared(rel), &f, &err) != TS_OK)
        fail_msg("%s", err.msg);
    return f;
}

static const char *STORIES = "models/stories260K/stories260K.gguf";

static void test_config_of_stories260k(void **state)
{
    (void)state;
    gguf_file *f = open_shared(STORIES);
    ts_model_config c;
    ts_error err = {0};
    assert_int_equal(model_gguf_read_config(&c, f, "fallback", &err), TS_OK);
    assert_string_equal(c.arch, "llama");
    assert_string_equal(c.name, "fallback"); /* general.name "llama" only repeats the architecture */
    assert_int_equal(c.dim, 64);
    assert_int_equal(c.hidden_dim, 172);
    assert_int_equal(c.n_layers, 5);
    assert_int_equal(c.n_heads, 8);
    assert_int_equal(c.n_kv_heads, 4);
    assert_int_equal(c.head_dim, 8);
    assert_int_equal(c.vocab_size, 512);
    assert_int_equal(c.context_len, 2048);
    assert_float_equal(c.rms_eps, 1e-5f, 1e-9f);
    assert_float_equal(c.rope_freq_base, 10000.0f, 0.0f);
    assert_false(c.tied_output);
    assert_false(c.rope_neox);
    gguf_close(f);
}

/* The llama2.c checkpoint holds the same weights: header, then embedding, rms_att, wq, wk,
 * wv, wo, rms_ffn, w1, w2, w3, rms_final (shared classifier). */
static void test_weights_match_llama2c_checkpoint(void **state)
{
    (void)state;
    gguf_file *f = open_shared(STORIES);
    ts_model_config c;
    model_weights w = {0};
    ts_error err = {0};
    assert_int_equal(model_gguf_read_config(&c, f, NULL, &err), TS_OK);
    if (model_gguf_read_weights(&w, &c, f, &err) != TS_OK)
        fail_msg("%s", err.msg);

    size_t len = 0;
    char *bin = tu_read_file(tu_shared("models/stories260K/stories260K.bin"), &len);
    assert_non_null(bin);
    const float *p = (const float *)(bin + 28);
    size_t dim = 64, L = 5, ffn = 172, kv = 32, vocab = 512;
    /* the matrices are the file's own F32 bytes, mapped, not copies */
    const gguf_tensor *embd = gguf_find_tensor(f, "token_embd.weight");
    assert_ptr_equal(w.tok_embd.data, embd->data);
    assert_int_equal(w.tok_embd.type, QT_F32);
    assert_int_equal(w.tok_embd.N, vocab);
    assert_int_equal(w.tok_embd.K, dim);
    assert_int_equal(w.tok_embd.row_bytes, dim * 4);
    assert_ptr_equal(w.layers[4].w2.data, gguf_find_tensor(f, "blk.4.ffn_down.weight")->data);
    assert_memory_equal(w.tok_embd.data, p, vocab * dim * 4);
    assert_memory_equal(w.output.data, p, vocab * dim * 4); /* output.weight == embedding */
    p += vocab * dim;
    assert_memory_equal(w.rms_att, p, L * dim * 4);
    p += L * dim;
    for (size_t l = 0; l < L; l++) /* wq */
        assert_memory_equal(w.layers[l].wq.data, p + l * dim * dim, dim * dim * 4);
    p += L * dim * dim;
    for (size_t l = 0; l < L; l++) /* wk */
        assert_memory_equal(w.layers[l].wk.data, p + l * kv * dim, kv * dim * 4);
    p += L * kv * dim;
    for (size_t l = 0; l < L; l++) /* wv */
        assert_memory_equal(w.layers[l].wv.data, p + l * kv * dim, kv * dim * 4);
    p += L * kv * dim;
    for (size_t l = 0; l < L; l++) /* wo */
        assert_memory_equal(w.layers[l].wo.data, p + l * dim * dim, dim * dim * 4);
    p += L * dim * dim;
    assert_memory_equal(w.rms_ffn, p, L * dim * 4);
    p += L * dim;
    for (size_t l = 0; l < L; l++) /* w1 */
        assert_memory_equal(w.layers[l].w1.data, p + l * ffn * dim, ffn * dim * 4);
    p += L * ffn * dim;
    for (size_t l = 0; l < L; l++) /* w2 */
        assert_memory_equal(w.layers[l].w2.data, p + l * dim * ffn, dim * ffn * 4);
    p += L * dim * ffn;
    for (size_t l = 0; l < L; l++) /* w3 */
        assert_memory_equal(w.layers[l].w3.data, p + l * ffn * dim, ffn * dim * 4);
    p += L * ffn * dim;
    assert_memory_equal(w.rms_final, p, dim * 4);
    free(bin);
    model_weights_free(&w);
    gguf_close(f);
}

static void test_vocab_of_spm_and_bpe_files(void **state)
{
    (void)state;
    ts_error err = {0};
    tokenizer_vocab v;
    gguf_file *f = open_shared(STORIES);
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    assert_int_equal(v.kind, VOCAB_KIND_SPM);
    assert_int_equal(v.n_tokens, 512);
    assert_string_equal(v.tokens[1].text, "<s>");
    assert_int_equal(v.tokens[1].type, VOCAB_TOKEN_CONTROL);
    assert_int_equal(v.bos_id, 1);
    assert_int_equal(v.eos_id, 2);
    assert_int_equal(v.unk_id, 0);
    assert_int_equal(v.pad_id, -1); /* stored as 0xFFFFFFFF */
    assert_int_equal(v.eot_id, -1);
    assert_true(v.add_bos);
    assert_true(v.add_space_prefix);
    assert_int_equal(v.n_merges, 0);
    vocab_clear(&v);
    gguf_close(f);

    f = open_shared("vocab/ggml-vocab-gpt-2.gguf");
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    assert_int_equal(v.kind, VOCAB_KIND_BPE);
    assert_int_equal(v.n_tokens, 50257);
    assert_int_equal(v.n_merges, 50000);
    assert_string_equal(v.merges[0], "\xc4\xa0 t");
    assert_string_equal(v.pre, "gpt-2");
    assert_int_equal(v.bos_id, 50256);
    assert_false(v.add_bos);
    vocab_clear(&v);
    /* A vocabulary-only file has no llama config to give. */
    ts_model_config c;
    assert_int_equal(model_gguf_read_config(&c, f, NULL, &err), TS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "'gpt2'"));
    gguf_close(f);
}

/* Parses the writer's bytes; the file keeps the bytes alive through *bytes. */
static gguf_file *finish(gguf_writer *w, uint8_t **bytes)
{
    size_t len;
    gguf_file *f = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_finish(w, bytes, &len, &err), TS_OK);
    gguf_writer_free(w);
    assert_int_equal(gguf_open_buffer(*bytes, len, &f, &err), TS_OK);
    return f;
}

/* A writer holding a minimal llama config; skip names one key to leave out. */
static gguf_writer *config_writer(const char *arch, const char *skip)
{
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    static const char *const keys[] = {"llama.context_length", "llama.embedding_length",
                                       "llama.block_count", "llama.feed_forward_length",
                                       "llama.attention.head_count"};
    static const uint32_t vals[] = {64, 8, 1, 16, 2};
    gguf_writer_add_str(w, "general.architecture", arch);
    for (int i = 0; i < 5; i++)
        if (!skip || strcmp(skip, keys[i]))
            gguf_writer_add_u32(w, keys[i], vals[i]);
    return w;
}

static ts_status config_of(gguf_writer *w, ts_model_config *c, ts_error *err)
{
    uint8_t *bytes;
    gguf_file *f = finish(w, &bytes);
    ts_status st = model_gguf_read_config(c, f, "fallback", err);
    gguf_close(f);
    free(bytes);
    return st;
}

static void expect_config_error(gguf_writer *w, ts_status want, const char *needle)
{
    ts_model_config c;
    ts_error err = {0};
    assert_int_equal(config_of(w, &c, &err), want);
    if (!strstr(err.msg, needle))
        fail_msg("error '%s' does not mention '%s'", err.msg, needle);
}

static void test_config_errors(void **state)
{
    (void)state;
    ts_model_config c;
    ts_error err = {0};
    gguf_writer *w = config_writer("llama", NULL);
    gguf_writer_add_u32(w, "llama.vocab_size", 32);
    assert_int_equal(config_of(w, &c, &err), TS_OK);
    assert_string_equal(c.name, "fallback");
    assert_int_equal(c.n_kv_heads, 2);
    assert_int_equal(c.head_dim, 4);
    assert_int_equal(c.vocab_size, 32);
    assert_true(c.tied_output); /* no output.weight */

    expect_config_error(config_writer("falcon", NULL), TS_ERR_UNSUPPORTED,
                        "architecture 'falcon' is not supported");
    expect_config_error(config_writer("llama", "llama.block_count"), TS_ERR_NOT_FOUND,
                        "'llama.block_count' is missing");
    w = config_writer("llama", "llama.attention.head_count");
    gguf_writer_add_str(w, "llama.attention.head_count", "8");
    expect_config_error(w, TS_ERR_FORMAT, "'llama.attention.head_count' has type string");
    w = config_writer("llama", "llama.embedding_length");
    gguf_writer_add_i32(w, "llama.embedding_length", -64);
    expect_config_error(w, TS_ERR_FORMAT, "'llama.embedding_length': -64 is out of range");
    w = config_writer("llama", NULL);
    gguf_writer_add_u32(w, "llama.rope.dimension_count", 2);
    expect_config_error(w, TS_ERR_UNSUPPORTED, "partial rotary");
    w = config_writer("llama", NULL);
    gguf_writer_add_str(w, "llama.rope.freq_base", "high");
    expect_config_error(w, TS_ERR_FORMAT, "llama.rope.freq_base");
    expect_config_error(config_writer("llama", NULL), TS_ERR_FORMAT, "vocabulary size");
}

static void test_vocab_errors(void **state)
{
    (void)state;
    static const char *const toks[2] = {"a", "b"};
    const float scores[3] = {0};
    struct {
        const char *model, *extra_key, *needle;
        ts_status want;
    } cases[] = {
        {"rwkv", NULL, "tokenizer model 'rwkv'", TS_ERR_UNSUPPORTED},
        {"t5", NULL, "needs tokenizer.ggml.scores", TS_ERR_FORMAT},
        {"bert", NULL, "needs an unknown token", TS_ERR_FORMAT},
        {"gpt2", NULL, "needs tokenizer.ggml.merges", TS_ERR_FORMAT},
        {"llama", "tokenizer.ggml.scores", "has 3 entries for 2 tokens", TS_ERR_FORMAT},
        {"llama", "tokenizer.ggml.bos_token_id", "token id 7 is not below", TS_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gguf_writer *w = NULL;
        assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
        gguf_writer_add_str(w, "tokenizer.ggml.model", cases[i].model);
        gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 2);
        if (cases[i].extra_key && strstr(cases[i].extra_key, "scores"))
            gguf_writer_add_array(w, cases[i].extra_key, GGUF_TYPE_FLOAT32, scores, 3);
        else if (cases[i].extra_key)
            gguf_writer_add_u32(w, cases[i].extra_key, 7);
        uint8_t *bytes;
        gguf_file *f = finish(w, &bytes);
        tokenizer_vocab v;
        ts_error err = {0};
        assert_int_equal(vocab_read_gguf(&v, f, &err), cases[i].want);
        if (!strstr(err.msg, cases[i].needle))
            fail_msg("error '%s' does not mention '%s'", err.msg, cases[i].needle);
        assert_null(v.tokens); /* left empty on failure */
        gguf_close(f);
        free(bytes);
    }
}

/* A SentencePiece vocabulary-only file of the first n of <unk>, <s>, </s>, a, b, with no
 * token id keys at all. */
static gguf_file *spm_vocab_file(int n, uint8_t **bytes)
{
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "b"};
    static const int32_t types[] = {2, 3, 3, 1, 1};
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)n);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n);
    return finish(w, bytes);
}

/* SentencePiece files without bos/eos/unk ids get llama.cpp's 1, 2 and 0, each only where
 * the vocabulary reaches it; so such a prompt starts with <s> and </s> ends generation. */
static void test_spm_default_ids(void **state)
{
    (void)state;
    uint8_t *bytes;
    tokenizer_vocab v;
    ts_error err = {0};
    gguf_file *f = spm_vocab_file(5, &bytes);
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    assert_int_equal(v.bos_id, 1);
    assert_int_equal(v.eos_id, 2);
    assert_int_equal(v.unk_id, 0);
    assert_int_equal(v.pad_id, -1);
    assert_int_equal(v.eot_id, -1);
    ts_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_create(&v, &tok, &err), TS_OK);
    vocab_clear(&v);
    int32_t ids[8];
    size_t n = 0;
    assert_int_equal(ts_tokenize(tok, "ab", 2, true, ids, 8, &n), TS_OK);
    assert_true(n >= 1);
    assert_int_equal(ids[0], 1);
    assert_true(ts_token_is_eog(tok, 2));
    ts_tokenizer_free(tok);
    gguf_close(f);
    free(bytes);

    f = spm_vocab_file(2, &bytes); /* <unk> and <s> only: no EOS */
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    assert_int_equal(v.bos_id, 1);
    assert_int_equal(v.eos_id, -1);
    assert_int_equal(v.unk_id, 0);
    vocab_clear(&v);
    gguf_close(f);
    free(bytes);

    /* Byte-level BPE has no such defaults. */
    static const char *const toks[] = {"a", "b", "c"};
    static const char *const merges[] = {"a b"};
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 3);
    gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, NULL, 1);
    f = finish(w, &bytes);
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    assert_int_equal(v.bos_id, -1);
    assert_int_equal(v.eos_id, -1);
    assert_int_equal(v.unk_id, -1);
    vocab_clear(&v);
    gguf_close(f);
    free(bytes);
}

/* A vocabulary-only byte-level BPE file as a SmolLM2 or Llama 3 conversion writes one:
 * <|endoftext|> (EOS), <|im_start|> (BOS, as SmolLM2's is), a few letters and a merge.
 * add_bos is written as tokenizer.ggml.add_bos_token, or left out when -1. */
static gguf_file *bpe_vocab_file(const char *pre, int add_bos, uint8_t **bytes)
{
    static const char *const toks[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "u",
                                       "s", "e", "r", "us"};
    static const int32_t types[] = {3, 3, 3, 1, 1, 1, 1, 1};
    static const char *const merges[] = {"u s"};
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_str(w, "tokenizer.ggml.pre", pre);
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", toks, NULL, 8);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 8);
    gguf_writer_add_str_array(w, "tokenizer.ggml.merges", merges, NULL, 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 0);
    if (add_bos >= 0)
        gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    return finish(w, bytes);
}

/* The ids the server gives a completion prompt, with a vocabulary read from f. */
static int32_t *prompt_ids(gguf_file *f, const char *prompt, size_t *n, bool *adds_bos)
{
    tokenizer_vocab v;
    ts_tokenizer *tok = NULL;
    ts_error err = {0};
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    assert_int_equal(tokenizer_create(&v, &tok, &err), TS_OK);
    vocab_clear(&v);
    ts_tokenize_opts o = {.add_special = true, .parse_special = true};
    int32_t *ids = NULL;
    assert_int_equal(ts_tokenize_alloc(tok, prompt, strlen(prompt), &o, &ids, n), TS_OK);
    *adds_bos = ts_tokenizer_add_bos(tok);
    ts_tokenizer_free(tok);
    return ids;
}

/* Whether a prompt starts with BOS is the vocabulary's to say: tokenizer.ggml.add_bos_token
 * when present, else llama.cpp's default (for BPE, only Llama 3's pre-tokenizers). A
 * SmolLM2 chat prompt must not get its <|im_start|> twice. */
static void test_vocab_decides_bos(void **state)
{
    (void)state;
    static const struct {
        const char *pre;
        int add_bos_key; /* -1: absent */
        bool want_bos;
    } cases[] = {
        {"smollm", 0, false},   {"smollm", -1, false},   {"smollm", 1, true},
        {"llama-bpe", -1, true}, {"llama3", -1, true},   {"falcon3", -1, true},
        {"llama-bpe", 0, false}, {"gpt-2", -1, false},   {"qwen2", -1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *bytes;
        gguf_file *f = bpe_vocab_file(cases[i].pre, cases[i].add_bos_key, &bytes);
        size_t n = 0;
        bool adds_bos;
        int32_t *ids = prompt_ids(f, "<|im_start|>user", &n, &adds_bos);
        if (adds_bos != cases[i].want_bos)
            fail_msg("pre %s, add_bos_token %d: adds BOS %d", cases[i].pre,
                     cases[i].add_bos_key, adds_bos);
        const int32_t once[] = {1, 7, 5, 6}; /* <|im_start|> us e r */
        const int32_t twice[] = {1, 1, 7, 5, 6};
        const int32_t *want = cases[i].want_bos ? twice : once;
        assert_int_equal(n, cases[i].want_bos ? 5 : 4);
        assert_memory_equal(ids, want, n * sizeof *ids);
        free(ids);
        gguf_close(f);
        free(bytes);
    }
}

/* `tessera convert` writes add_bos_token as the vocabulary means it: a Llama 3 file
 * without the key is written with true, not with tessera's zeroed default. */
static void test_write_keeps_the_effective_add_bos(void **state)
{
    (void)state;
    uint8_t *bytes, *out;
    size_t len;
    tokenizer_vocab v;
    ts_error err = {0};
    gguf_file *f = bpe_vocab_file("llama-bpe", -1, &bytes);
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);
    gguf_close(f);
    free(bytes);
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    assert_int_equal(model_gguf_add_vocab(w, &v, &err), TS_OK);
    vocab_clear(&v);
    assert_int_equal(gguf_writer_finish(w, &out, &len, &err), TS_OK);
    gguf_writer_free(w);
    assert_int_equal(gguf_open_buffer(out, len, &f, &err), TS_OK);
    bool add_bos = false;
    assert_int_equal(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos, &err), TS_OK);
    assert_true(add_bos);
    gguf_close(f);
    free(out);
}

/* A one-layer model: dim 8, ffn 16, 2 heads, vocab 32, all zeros. skip leaves one tensor
 * out, odd gives that tensor a wrong shape (odd_type 0) or the type odd_type. n_factors
 * RoPE factors (head_dim/2 = 2 fit) go into rope_freqs.weight when not 0. */
static gguf_file *tiny_model(const char *skip, const char *odd, uint32_t odd_type,
                             const float *factors, uint64_t n_factors, uint8_t **bytes)
{
    static const float zeros[32 * 8];
    static const struct {
        const char *name;
        uint64_t ne0, ne1;
    } tensors[] = {
        {"token_embd.weight", 8, 32}, {"output_norm.weight", 8, 1},
        {"blk.0.attn_norm.weight", 8, 1}, {"blk.0.attn_q.weight", 8, 8},
        {"blk.0.attn_k.weight", 8, 8}, {"blk.0.attn_v.weight", 8, 8},
        {"blk.0.attn_output.weight", 8, 8}, {"blk.0.ffn_norm.weight", 8, 1},
        {"blk.0.ffn_gate.weight", 8, 16}, {"blk.0.ffn_up.weight", 8, 16},
        {"blk.0.ffn_down.weight", 16, 8},
    };
    gguf_writer *w = config_writer("llama", NULL);
    gguf_writer_add_u32(w, "llama.vocab_size", 32);
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        if (skip && !strcmp(skip, tensors[i].name))
            continue;
        bool is_odd = odd && !strcmp(odd, tensors[i].name);
        uint64_t ne[2] = {tensors[i].ne0, tensors[i].ne1};
        uint32_t type = GGUF_TENSOR_F32, elem = 4;
        if (is_odd && odd_type == 0)
            ne[1] += 1;
        else if (is_odd)
            type = odd_type, elem = odd_type == GGUF_TENSOR_F16 ? 2 : 4;
        assert_int_equal(gguf_writer_add_tensor(w, tensors[i].name, type, ne[1] > 1 ? 2 : 1, ne,
                                                zeros, ne[0] * ne[1] * elem), TS_OK);
    }
    if (n_factors)
        assert_int_equal(gguf_writer_add_tensor(w, "rope_freqs.weight", GGUF_TENSOR_F32, 1,
                                                &n_factors, factors, n_factors * 4), TS_OK);
    return finish(w, bytes);
}

/* Loads the weights of tiny_model(skip, odd, odd_type, factors, n_factors). */
static ts_status weights_of_rope(const char *skip, const char *odd, uint32_t odd_type,
                                 const float *factors, uint64_t n_factors, ts_error *err)
{
    uint8_t *bytes;
    gguf_file *f = tiny_model(skip, odd, odd_type, factors, n_factors, &bytes);
    ts_model_config c;
    model_weights w = {0};
    assert_int_equal(model_gguf_read_config(&c, f, NULL, err), TS_OK);
    ts_status st = model_gguf_read_weights(&w, &c, f, err);
    model_weights_free(&w);
    gguf_close(f);
    free(bytes);
    return st;
}

static ts_status weights_of(const char *skip, const char *odd, uint32_t odd_type, ts_error *err)
{
    return weights_of_rope(skip, odd, odd_type, NULL, 0, err);
}

static void test_weight_errors_name_the_tensor(void **state)
{
    (void)state;
    ts_error err = {0};
    assert_int_equal(weights_of(NULL, NULL, 0, &err), TS_OK);
    assert_int_equal(weights_of(NULL, "blk.0.attn_k.weight", GGUF_TENSOR_F16, &err), TS_OK);
    assert_int_equal(weights_of("blk.0.ffn_up.weight", NULL, 0, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "tensor 'blk.0.ffn_up.weight' is missing"));
    assert_int_equal(weights_of(NULL, "blk.0.attn_v.weight", 0, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'blk.0.attn_v.weight' has shape (8, 9, 1, 1), expected (8, 8)"));
    /* tensors of types tessera does not compute on are refused by gguf_open (test_gguf) */
}

/* rope_freqs.weight must hold head_dim/2 positive factors. */
static void test_rope_factor_errors(void **state)
{
    (void)state;
    ts_error err = {0};
    const float ones[3] = {1.0f, 1.0f, 1.0f};
    assert_int_equal(weights_of_rope(NULL, NULL, 0, ones, 2, &err), TS_OK);
    assert_int_equal(weights_of_rope(NULL, NULL, 0, ones, 3, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'rope_freqs.weight' has shape (3, 1, 1, 1), expected (2, 1)"));
    assert_int_equal(weights_of_rope(NULL, NULL, 0, ones, 1, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'rope_freqs.weight' has shape (1, 1, 1, 1)"));
    const float bad[3][2] = {{1.0f, 0.0f}, {1.0f, -2.0f}, {1.0f, NAN}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(weights_of_rope(NULL, NULL, 0, bad[i], 2, &err), TS_ERR_FORMAT);
        assert_non_null(strstr(err.msg, "'rope_freqs.weight': factor 1 is"));
    }
}

/* llama.rope.scaling.*: linear divides every frequency by its factor (as does a factor
 * without a type, and the older rope.scale_linear), none ignores it, and any other type is
 * refused by name. */
static void test_rope_scaling_keys(void **state)
{
    (void)state;
    static const struct {
        const char *type;    /* NULL: no llama.rope.scaling.type */
        const char *key;     /* the factor's key, NULL for none */
        float factor, want;
    } ok[] = {
        {NULL, NULL, 0.0f, 1.0f},
        {"linear", "llama.rope.scaling.factor", 4.0f, 4.0f},
        {NULL, "llama.rope.scaling.factor", 2.0f, 2.0f},
        {NULL, "llama.rope.scale_linear", 3.0f, 3.0f},
        {"none", "llama.rope.scaling.factor", 4.0f, 1.0f},
        {"linear", "llama.rope.scaling.factor", 0.0f, 1.0f}, /* 0 is none, as in llama.cpp */
        {"linear", NULL, 0.0f, 1.0f},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        gguf_writer *w = config_writer("llama", NULL);
        gguf_writer_add_u32(w, "llama.vocab_size", 32);
        if (ok[i].type)
            gguf_writer_add_str(w, "llama.rope.scaling.type", ok[i].type);
        if (ok[i].key)
            gguf_writer_add_f32(w, ok[i].key, ok[i].factor);
        ts_model_config c;
        ts_error err = {0};
        assert_int_equal(config_of(w, &c, &err), TS_OK);
        if (c.rope_scale != ok[i].want)
            fail_msg("case %zu: rope_scale %g, want %g", i, (double)c.rope_scale,
                     (double)ok[i].want);
        assert_false(c.rope_factors);
        assert_int_equal(model_config_validate(&c, &err), TS_OK);
    }
    static const char *const refused[] = {"yarn", "longrope", "llama3", ""};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        gguf_writer *w = config_writer("llama", NULL);
        gguf_writer_add_u32(w, "llama.vocab_size", 32);
        gguf_writer_add_str(w, "llama.rope.scaling.type", refused[i]);
        gguf_writer_add_f32(w, "llama.rope.scaling.factor", 4.0f);
        char needle[64];
        snprintf(needle, sizeof needle, "llama.rope.scaling.type '%s' is not supported",
                 refused[i]);
        expect_config_error(w, TS_ERR_UNSUPPORTED, needle);
    }
    gguf_writer *w = config_writer("llama", NULL);
    gguf_writer_add_u32(w, "llama.rope.scaling.type", 2);
    expect_config_error(w, TS_ERR_FORMAT, "'llama.rope.scaling.type' has type uint32");
    w = config_writer("llama", NULL);
    gguf_writer_add_f32(w, "llama.rope.scaling.factor", -2.0f);
    expect_config_error(w, TS_ERR_FORMAT, "'llama.rope.scaling.factor': -2 is out of range");
    w = config_writer("llama", NULL);
    gguf_writer_add_f32(w, "llama.rope.scale_linear", INFINITY);
    expect_config_error(w, TS_ERR_FORMAT, "'llama.rope.scale_linear': inf is out of range");
}

/* The reference forward pass's logits of m at each of n positions of a fixed prompt
 * (n, vocab). */
static float *prompt_logits(const ts_model *m, int n)
{
    int32_t tokens[64];
    assert_true(n <= 64);
    for (int p = 0; p < n; p++)
        tokens[p] = 1 + p * 37 % (m->cfg.vocab_size - 1);
    return tu_reference_logits(m, tokens, n);
}

/* Factors of 1 change nothing, bit for bit; factors of 2 are linear scaling by 2, bit for
 * bit; either changes every position after 0. */
static void test_rope_factors_and_linear_scaling_logits(void **state)
{
    (void)state;
    enum { N = 20 };
    static const float ones[4] = {1.0f, 1.0f, 1.0f, 1.0f}, twos[4] = {2.0f, 2.0f, 2.0f, 2.0f};
    ts_model *original = NULL;
    ts_error err = {0};
    assert_int_equal(ts_model_load(tu_shared(STORIES), NULL, &original, &err), TS_OK);
    ts_model *plain = tu_stories_with_rope(NULL, 1.0f);
    ts_model *with_ones = tu_stories_with_rope(ones, 1.0f);
    ts_model *with_twos = tu_stories_with_rope(twos, 1.0f);
    ts_model *linear = tu_stories_with_rope(NULL, 2.0f);
    assert_false(plain->cfg.rope_factors);
    assert_true(with_ones->cfg.rope_factors);
    assert_memory_equal(with_ones->w.rope_factors, ones, sizeof ones);
    assert_true(linear->cfg.rope_scale == 2.0f);
    assert_false(linear->cfg.rope_factors);
    /* the unscaled table is llama2.c's expression exactly */
    for (int i = 0; i < 4; i++)
        assert_true(plain->w.rope_freq[i] == 1.0f / powf(10000.0f, (float)(2 * i) / 8.0f));
    size_t n = (size_t)N * plain->cfg.vocab_size;
    float *want = prompt_logits(original, N), *got = prompt_logits(plain, N);
    assert_memory_equal(want, got, n * sizeof(float));
    free(got);
    got = prompt_logits(with_ones, N);
    assert_memory_equal(want, got, n * sizeof(float));
    free(got);
    float *twos_logits = prompt_logits(with_twos, N);
    got = prompt_logits(linear, N);
    assert_memory_equal(twos_logits, got, n * sizeof(float));
    size_t vocab = (size_t)plain->cfg.vocab_size;
    assert_memory_equal(want, got, vocab * sizeof(float)); /* position 0 turns by nothing */
    for (int p = 1; p < N; p++)
        if (memcmp(want + p * vocab, got + p * vocab, vocab * sizeof(float)) == 0)
            fail_msg("position %d: linear scaling left the logits as they were", p);
    free(got);
    free(twos_logits);
    free(want);
    ts_model_free(original);
    ts_model_free(plain);
    ts_model_free(with_ones);
    ts_model_free(with_twos);
    ts_model_free(linear);
}

static void test_write_round_trip(void **state)
{
    (void)state;
    gguf_file *f = open_shared(STORIES);
    ts_model_config c, c2;
    model_weights w = {0}, w2 = {0};
    tokenizer_vocab v, v2;
    ts_error err = {0};
    gguf_file *src = f;
    assert_int_equal(model_gguf_read_config(&c, f, "stories", &err), TS_OK);
    assert_int_equal(model_gguf_read_weights(&w, &c, f, &err), TS_OK);
    assert_int_equal(vocab_read_gguf(&v, f, &err), TS_OK);

    const char *path = tu_tmp_path("stories-copy.gguf");
    assert_int_equal(model_gguf_write(path, &c, &w, &v, "{{ messages }}", &err), TS_OK);
    assert_int_equal(gguf_open(path, &f, &err), TS_OK);
    assert_int_equal(model_gguf_read_config(&c2, f, NULL, &err), TS_OK);
    assert_memory_equal(&c, &c2, sizeof c);
    assert_int_equal(model_gguf_read_weights(&w2, &c2, f, &err), TS_OK);
    size_t dim = 64, L = 5;
    tu_assert_same_matrix(&w.tok_embd, &w2.tok_embd);
    tu_assert_same_matrix(&w.output, &w2.output);
    assert_memory_equal(w.rms_final, w2.rms_final, dim * 4);
    assert_memory_equal(w.rms_att, w2.rms_att, L * dim * 4);
    assert_memory_equal(w.rms_ffn, w2.rms_ffn, L * dim * 4);
    for (size_t l = 0; l < L; l++) {
        const model_layer *a = &w.layers[l], *b = &w2.layers[l];
        tu_assert_same_matrix(&a->wq, &b->wq);
        tu_assert_same_matrix(&a->wk, &b->wk);
        tu_assert_same_matrix(&a->wv, &b->wv);
        tu_assert_same_matrix(&a->wo, &b->wo);
        tu_assert_same_matrix(&a->w1, &b->w1);
        tu_assert_same_matrix(&a->w3, &b->w3);
        tu_assert_same_matrix(&a->w2, &b->w2);
    }
    assert_int_equal(vocab_read_gguf(&v2, f, &err), TS_OK);
    tu_assert_same_vocab(&v, &v2);
    gguf_str tmpl;
    assert_int_equal(gguf_get_str(f, "tokenizer.chat_template", &tmpl, &err), TS_OK);
    assert_true(gguf_str_eq(tmpl, "{{ messages }}"));
    vocab_clear(&v2);
    model_weights_free(&w2);
    gguf_close(f);

    /* A tied model is written without output.weight and reads back tied. */
    c.tied_output = true;
    assert_int_equal(model_gguf_write(path, &c, &w, &v, NULL, &err), TS_OK);
    assert_int_equal(gguf_open(path, &f, &err), TS_OK);
    assert_null(gguf_find_tensor(f, "output.weight"));
    assert_null(gguf_find_kv(f, "tokenizer.chat_template"));
    assert_int_equal(model_gguf_read_config(&c2, f, NULL, &err), TS_OK);
    assert_true(c2.tied_output);
    gguf_close(f);
    vocab_clear(&v);
    model_weights_free(&w);
    gguf_close(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_of_stories260k),
        cmocka_unit_test(test_weights_match_llama2c_checkpoint),
        cmocka_unit_test(test_vocab_of_spm_and_bpe_files),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_vocab_errors),
        cmocka_unit_test(test_vocab_decides_bos),
        cmocka_unit_test(test_spm_default_ids),
        cmocka_unit_test(test_write_keeps_the_effective_add_bos),
        cmocka_unit_test(test_weight_errors_name_the_tensor),
        cmocka_unit_test(test_rope_factor_errors),
        cmocka_unit_test(test_rope_scaling_keys),
        cmocka_unit_test(test_rope_factors_and_linear_scaling_logits),
        cmocka_unit_test(test_write_round_trip),
    };
    return cmocka_run_group_tests_name("model_gguf", tests, NULL, NULL);
}
