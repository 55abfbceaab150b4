/* test_chat_template.c: family detection and the exact text each chat format renders. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "template/chat_template.h"

static const chat_message conv[] = {
    {"system", "Be brief.", NULL, NULL},
    {"user", "Hi", NULL, NULL},
    {"assistant", "Hello!", NULL, NULL},
    {"user", "Name a color.", NULL, NULL},
};
#define N_CONV (sizeof conv / sizeof conv[0])

/* Renders m and checks the text, and that the content spans hold exactly the non-empty
 * message texts: in order, apart, each one a message's whole text. */
static void expect_render(chat_template_kind kind, const chat_message *m, size_t n,
                          const char *want)
{
    chat_rendering r = {0};
    ts_error err = {0};
    assert_int_equal(chat_template_render(kind, m, n, NULL, &r, &err), TS_OK);
    assert_non_null(r.text);
    assert_string_equal(r.text, want);
    size_t non_empty = 0, end = 0;
    for (size_t i = 0; i < n; i++)
        non_empty += m[i].content[0] != '\0';
    assert_int_equal(r.n_content, non_empty);
    for (size_t k = 0; k < r.n_content; k++) {
        const ts_text_span *sp = &r.content[k];
        assert_true(sp->off >= end && sp->off + sp->len <= strlen(r.text));
        end = sp->off + sp->len;
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = strlen(m[i].content) == sp->len &&
                    memcmp(m[i].content, r.text + sp->off, sp->len) == 0;
        assert_true(found);
    }
    chat_rendering_free(&r);
    chat_rendering_free(&r); /* twice is harmless */
}

static void test_detect_by_markers(void **state)
{
    (void)state;
    assert_int_equal(chat_template_detect(NULL), CHAT_TEMPLATE_PLAIN);
    assert_int_equal(chat_template_detect(""), CHAT_TEMPLATE_PLAIN);
    assert_int_equal(chat_template_detect("{{ message['content'] }}"), CHAT_TEMPLATE_PLAIN);
    assert_int_equal(chat_template_detect("{{'<|im_start|>' + message['role']}}"),
                     CHAT_TEMPLATE_CHATML);
    assert_int_equal(chat_template_detect("'<|start_header_id|>' + message['role']"),
                     CHAT_TEMPLATE_LLAMA3);
    assert_int_equal(chat_template_detect("[INST] <<SYS>>\\n' + system"), CHAT_TEMPLATE_LLAMA2);
    assert_int_equal(chat_template_detect("{{ '[INST] ' + message['content'] + ' [/INST]' }}"),
                     CHAT_TEMPLATE_MISTRAL);
    assert_int_equal(chat_template_detect("'<|user|>' + '\\n' + content + '<|end|>'"),
                     CHAT_TEMPLATE_PHI3);
    assert_int_equal(chat_template_detect("'<|user|>\\n' + message['content'] + eos_token"),
                     CHAT_TEMPLATE_ZEPHYR);
    assert_int_equal(chat_template_detect("'<|user|>\\n' + message['content'] + '</s>'"),
                     CHAT_TEMPLATE_ZEPHYR);
    assert_int_equal(chat_template_detect("'<start_of_turn>' + role + '\\n'"),
                     CHAT_TEMPLATE_GEMMA);
}

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int k = 0; k < CHAT_TEMPLATE_COUNT; k++) {
        chat_template_kind got = CHAT_TEMPLATE_COUNT;
        assert_int_equal(chat_template_from_name(chat_template_name((chat_template_kind)k), &got,
                                                 NULL), TS_OK);
        assert_int_equal(got, k);
    }
    ts_error err = {0};
    chat_template_kind got;
    assert_int_equal(chat_template_from_name("jinja", &got, &err), TS_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "jinja"));
    assert_non_null(strstr(err.msg, "chatml"));
}

static void test_chatml(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_CHATML, conv, N_CONV,
                  "<|im_start|>system\nBe brief.<|im_end|>\n"
                  "<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n"
                  "<|im_start|>user\nName a color.<|im_end|>\n"
                  "<|im_start|>assistant\n");
}

static void test_llama3(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_LLAMA3, conv, N_CONV,
                  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_llama2(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_LLAMA2, conv, N_CONV,
                  "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
                  "<s>[INST] Name a color. [/INST]");
    expect_render(CHAT_TEMPLATE_LLAMA2, conv + 1, 1, "[INST] Hi [/INST]");
}

static void test_mistral(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_MISTRAL, conv, N_CONV,
                  "[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Name a color. [/INST]");
    /* A system message with no user message after it still reaches the model. */
    expect_render(CHAT_TEMPLATE_MISTRAL, conv, 1, "[INST] Be brief. [/INST]");
}

static void test_zephyr(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_ZEPHYR, conv, N_CONV,
                  "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello!</s>\n"
                  "<|user|>\nName a color.</s>\n<|assistant|>\n");
}

static void test_phi3(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_PHI3, conv, N_CONV,
                  "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n"
                  "<|user|>\nName a color.<|end|>\n<|assistant|>\n");
}

static void test_gemma(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_GEMMA, conv, N_CONV,
                  "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                  "<start_of_turn>model\nHello!<end_of_turn>\n"
                  "<start_of_turn>user\nName a color.<end_of_turn>\n"
                  "<start_of_turn>model\n");
}

/* Renders m with kind and checks the text and the content spans against want_spans,
 * the message texts as the format keeps them (NULL-terminated). */
static void expect_spans(chat_template_kind kind, const chat_message *m, size_t n,
                         const char *want, const char *const *want_spans)
{
    chat_rendering r = {0};
    ts_error err = {0};
    assert_int_equal(chat_template_render(kind, m, n, NULL, &r, &err), TS_OK);
    assert_string_equal(r.text, want);
    size_t k = 0;
    for (; want_spans[k]; k++) {
        assert_true(k < r.n_content);
        assert_int_equal(r.content[k].len, strlen(want_spans[k]));
        assert_memory_equal(r.text + r.content[k].off, want_spans[k], r.content[k].len);
    }
    assert_int_equal(r.n_content, k);
    chat_rendering_free(&r);
}

/* Llama 3 and Gemma trim every message (Jinja's trim), Llama 2 strips a turn's whole text
 * (Python's strip(), so a user text after the system block keeps its start); ChatML and
 * the others keep the text as sent. */
static void test_trimming_formats(void **state)
{
    (void)state;
    const chat_message spaced[] = {
        {"system", " Be brief.\n", NULL, NULL},
        {"user", "  Hi \t", NULL, NULL},
        {"assistant", "\nHello! ", NULL, NULL},
        {"user", " Name a color.\n\n", NULL, NULL},
    };
    expect_spans(CHAT_TEMPLATE_LLAMA3, spaced, 4,
                 "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nName a color.<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n",
                 (const char *const[]){"Be brief.", "Hi", "Hello!", "Name a color.", NULL});
    expect_spans(CHAT_TEMPLATE_GEMMA, spaced, 4,
                 "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
                 "<start_of_turn>model\nHello!<end_of_turn>\n"
                 "<start_of_turn>user\nName a color.<end_of_turn>\n"
                 "<start_of_turn>model\n",
                 (const char *const[]){"Be brief.", "Hi", "Hello!", "Name a color.", NULL});
    expect_spans(CHAT_TEMPLATE_LLAMA2, spaced, 4,
                 "[INST] <<SYS>>\n Be brief.\n\n<</SYS>>\n\n  Hi [/INST] Hello! </s>"
                 "<s>[INST] Name a color. [/INST]",
                 (const char *const[]){" Be brief.\n", "  Hi", "Hello!", "Name a color.", NULL});
    expect_spans(CHAT_TEMPLATE_CHATML, spaced + 1, 1, "<|im_start|>user\n  Hi \t<|im_end|>\n"
                 "<|im_start|>assistant\n",
                 (const char *const[]){"  Hi \t", NULL});
    /* a message of whitespace only has no content left to mark */
    const chat_message blank[] = {{"user", " \n ", NULL, NULL}};
    expect_spans(CHAT_TEMPLATE_LLAMA3, blank, 1,
                 "<|start_header_id|>user<|end_header_id|>\n\n<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n",
                 (const char *const[]){NULL});
}

static void test_plain(void **state)
{
    (void)state;
    expect_render(CHAT_TEMPLATE_PLAIN, conv, N_CONV,
                  "System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Name a color.\n"
                  "Assistant:");
    expect_render(CHAT_TEMPLATE_PLAIN, NULL, 0, "Assistant:");
}

static void test_bad_role_and_kind(void **state)
{
    (void)state;
    const chat_message bad[] = {{"user", "a", NULL, NULL}, {"robot", "b", NULL, NULL}};
    chat_rendering out = {(char *)1, NULL, 7};
    ts_error err = {0};
    assert_int_equal(chat_template_render(CHAT_TEMPLATE_CHATML, bad, 2, NULL, &out, &err),
                     TS_ERR_INVALID_ARG);
    assert_null(out.text);
    assert_int_equal(out.n_content, 0);
    assert_non_null(strstr(err.msg, "messages[1].role"));
    const chat_message nocontent[] = {{"user", NULL, NULL, NULL}};
    assert_int_equal(chat_template_render(CHAT_TEMPLATE_PLAIN, nocontent, 1, NULL, &out, &err),
                     TS_ERR_INVALID_ARG);
    assert_int_equal(chat_template_render(CHAT_TEMPLATE_COUNT, conv, 1, NULL, &out, &err),
                     TS_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect_by_markers), cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_chatml),            cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_llama2),            cmocka_unit_test(test_mistral),
        cmocka_unit_test(test_zephyr),            cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_gemma),             cmocka_unit_test(test_plain),
        cmocka_unit_test(test_trimming_formats),
        cmocka_unit_test(test_bad_role_and_kind),
    };
    return cmocka_run_group_tests_name("chat_template", tests, NULL, NULL);
}
