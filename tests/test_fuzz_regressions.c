/* test_fuzz_regressions.c: every input the fuzz targets (tests/fuzz/) found a bug with,
 * fed through the same code path, must now get a clean error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/gguf.h"
#include "model/model_gguf.h"
#include "util.h"

/* ---- fuzz_gguf: a 4 KB model whose metadata promises 805 GB of weights ------------------
 * The tiny-llama seed (dim 8, ffn 16, 1 layer, 2 heads, 1 KV head, 8 tokens) with
 * embedding_length 8192, block_count 1000, feed_forward_length 400000 and 64 heads: the
 * loader used to calloc every weight array from the config before looking at the tensors
 * (ASan: allocator out of memory for 0xbb80000000 bytes). */

typedef struct tiny_meta {
    uint32_t dim, ffn, layers, heads, kv_heads;
} tiny_meta;

static float weights[256];

static void add_f32(gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1)
{
    uint64_t ne[2] = {ne0, ne1};
    assert_int_equal(gguf_writer_add_tensor(w, name, GGUF_TENSOR_F32, ne1 > 1 ? 2 : 1, ne,
                                            weights, ne0 * ne1 * sizeof(float)),
                     TS_OK);
}

/* The tiny model's tensors under the metadata of meta; *len bytes, caller frees. */
static uint8_t *tiny_model(const tiny_meta *meta, size_t *len)
{
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    gguf_writer_add_str(w, "general.architecture", "llama");
    gguf_writer_add_u32(w, "llama.context_length", 16);
    gguf_writer_add_u32(w, "llama.embedding_length", meta->dim);
    gguf_writer_add_u32(w, "llama.block_count", meta->layers);
    gguf_writer_add_u32(w, "llama.feed_forward_length", meta->ffn);
    gguf_writer_add_u32(w, "llama.attention.head_count", meta->heads);
    gguf_writer_add_u32(w, "llama.attention.head_count_kv", meta->kv_heads);
    gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
    const char *tokens[8] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "c", "<0x0A>"};
    int32_t types[8] = {2, 3, 3, 1, 1, 1, 1, 6};
    gguf_writer_add_str_array(w, "tokenizer.ggml.tokens", tokens, NULL, 8);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 8);
    add_f32(w, "token_embd.weight", 8, 8);
    add_f32(w, "output_norm.weight", 8, 1);
    add_f32(w, "blk.0.attn_norm.weight", 8, 1);
    add_f32(w, "blk.0.ffn_norm.weight", 8, 1);
    add_f32(w, "blk.0.attn_q.weight", 8, 8);
    add_f32(w, "blk.0.attn_k.weight", 8, 4);
    add_f32(w, "blk.0.attn_v.weight", 8, 4);
    add_f32(w, "blk.0.attn_output.weight", 8, 8);
    add_f32(w, "blk.0.ffn_gate.weight", 8, 16);
    add_f32(w, "blk.0.ffn_up.weight", 8, 16);
    add_f32(w, "blk.0.ffn_down.weight", 16, 8);
    uint8_t *bytes = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_finish(w, &bytes, len, &err), TS_OK);
    gguf_writer_free(w);
    return bytes;
}

static const tiny_meta honest = {8, 16, 1, 2, 1};
static const tiny_meta inflated = {8192, 400000, 1000, 64, 64};

static void test_gguf_honest_tiny_model_loads(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *bytes = tiny_model(&honest, &len);
    gguf_file *f = NULL;
    ts_model *m = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_open_buffer(bytes, len, &f, &err), TS_OK);
    assert_int_equal(model_gguf_load_parsed(f, "tiny", &m, &err), TS_OK);
    assert_int_equal(ts_model_get_config(m)->vocab_size, 8);
    assert_int_equal(ts_model_get_config(m)->n_layers, 1);
    ts_model_free(m);
    gguf_close(f);
    free(bytes);
}

static void test_gguf_weights_beyond_the_tensors_are_refused_before_allocating(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *bytes = tiny_model(&inflated, &len);
    gguf_file *f = NULL;
    ts_model *m = (ts_model *)&m; /* must be reset */
    ts_error err = {0};
    assert_int_equal(gguf_open_buffer(bytes, len, &f, &err), TS_OK);
    assert_int_equal(model_gguf_load_parsed(f, "inflated", &m, &err), TS_ERR_FORMAT);
    assert_null(m);
    assert_int_equal(err.status, TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "the config needs"));
    assert_non_null(strstr(err.msg, "hold 664")); /* the tensors' elements */
    gguf_close(f);

    /* The same bytes from a path, through the public loader. */
    const char *path = tu_tmp_path("fuzz-inflated.gguf");
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(ts_model_load(path, NULL, &m, &err), TS_ERR_FORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "the config needs"));
    remove(path);
    free(bytes);
}

int main(void)
{
    for (size_t i = 0; i < sizeof weights / sizeof *weights; i++)
        weights[i] = (float)((int)(i % 7) - 3) / 16.0f;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_honest_tiny_model_loads),
        cmocka_unit_test(test_gguf_weights_beyond_the_tensors_are_refused_before_allocating),
    };
    return cmocka_run_group_tests_name("fuzz_regressions", tests, NULL, NULL);
}
