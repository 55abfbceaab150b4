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

#include "gguf/gguf.h"
#include "template/jinja.h"
#include "model/model_gguf.h"
#include "tiny_gguf.h"
#include "util.h"

/* ---- fuzz_gguf: a 4 KB model whose metadata promises 805 GB of weights ------------------
 * The tiny-llama seed (dim 8, ffn 16, 1 layer, 2 heads, 1 KV head, 8 tokens) with
 * embedding_length 8192, block_count 1000, feed_forward_length 400000 and 64 heads: the
 * loader used to calloc every weight array from the config before looking at the tensors
 * (ASan: allocator out of memory for 0xbb80000000 bytes). */

/* The tiny model's tensors under the metadata of meta; *len bytes, caller frees. */
static uint8_t *tiny_model(const tiny_meta *meta, size_t *len)
{
    gguf_writer *w = NULL;
    assert_int_equal(gguf_writer_create(0, &w, NULL), TS_OK);
    tiny_gguf_add_llama(w, meta);
    uint8_t *bytes = NULL;
    ts_error err = {0};
    assert_int_equal(gguf_writer_finish(w, &bytes, len, &err), TS_OK);
    gguf_writer_free(w);
    return bytes;
}

static const tiny_meta inflated = {8192, 400000, 1000, 64, 64};

static void test_gguf_honest_tiny_model_loads(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *bytes = tiny_model(&tiny_honest, &len);
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

/* ---- review: tensors stacked on one offset ---------------------------------------------
 * Each tensor was only checked to lie inside the file, and the loader bounded what it
 * allocates by the tensors' elements: a file whose tensors all point at the same bytes
 * held, to that check, as many weights as it listed tensors times their size (a ~10 MB
 * file could make the loader ask for tens of GB). The reader now refuses overlapping data. */

/* Points every tensor info of a file made by the writer at data offset 0, in place. */
static void stack_tensors(uint8_t *bytes, size_t len)
{
    gguf_file *f = NULL;
    assert_int_equal(gguf_open_buffer(bytes, len, &f, NULL), TS_OK);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        /* the info: name, n_dims (u32), ne (u64 each), type (u32), offset (u64) */
        size_t at = (size_t)((const uint8_t *)t->name.ptr - bytes) + (size_t)t->name.len + 4 +
                    8 * (size_t)t->n_dims + 4;
        uint64_t was;
        memcpy(&was, bytes + at, 8);
        assert_int_equal(was, t->offset);
        memset(bytes + at, 0, 8);
    }
    gguf_close(f);
}

static void test_gguf_tensors_sharing_bytes_are_refused(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *bytes = tiny_model(&tiny_honest, &len);
    stack_tensors(bytes, len);
    gguf_file *f = (gguf_file *)&f; /* must be reset */
    ts_error err = {0};
    assert_int_equal(gguf_open_buffer(bytes, len, &f, &err), TS_ERR_FORMAT);
    assert_null(f);
    assert_int_equal(err.status, TS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "overlaps tensor 'token_embd.weight'"));

    const char *path = tu_tmp_path("fuzz-stacked.gguf");
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(bytes, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    ts_model *m = NULL;
    memset(&err, 0, sizeof err);
    assert_int_equal(ts_model_load(path, NULL, &m, &err), TS_ERR_FORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "overlaps"));
    remove(path);
    free(bytes);
}

/* Renders the template src without variables and expects exactly want. */
static void expect_render(const char *src, const char *want)
{
    jinja_template *t = NULL;
    char *out = NULL;
    assert_int_equal(jinja_parse(&t, src, strlen(src), NULL, NULL), TS_OK);
    assert_int_equal(jinja_render(t, NULL, 0, NULL, &out, NULL), TS_OK);
    assert_string_equal(out, want);
    free(out);
    jinja_free(t);
}

/* ---- fuzz_jinja: select with no test name -----------------------------------------------
 * `range(3) | select` gave the test no arguments, and the filter offset the NULL argument
 * array by one (UBSan: applying zero offset to null pointer). It selects the truthy items. */
static void test_jinja_select_without_a_test(void **state)
{
    (void)state;
    expect_render("{{ range(3) | select | list }}{{ [0, 'a'] | reject | list }}", "[1, 2][0]");
}

/* ---- fuzz_jinja: sorting nothing ----------------------------------------------------------
 * `{} | dictsort` (and `[] | sort`) offset the NULL key array of an empty list by zero to
 * find its scratch halves (clang's UBSan: applying zero offset to null pointer; gcc's does
 * not flag it, so corpus/fuzz_jinja/empty-sort replays the input in every fuzz run). All
 * three give []. */
static void test_jinja_sort_of_nothing(void **state)
{
    (void)state;
    expect_render("{{ {} | dictsort | list }}{{ [] | sort }}{{ [] | sort(attribute='a') }}",
                  "[][][]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_honest_tiny_model_loads),
        cmocka_unit_test(test_gguf_weights_beyond_the_tensors_are_refused_before_allocating),
        cmocka_unit_test(test_gguf_tensors_sharing_bytes_are_refused),
        cmocka_unit_test(test_jinja_select_without_a_test),
        cmocka_unit_test(test_jinja_sort_of_nothing),
    };
    return cmocka_run_group_tests_name("fuzz_regressions", tests, NULL, NULL);
}
