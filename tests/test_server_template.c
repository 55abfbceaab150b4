/* test_server_template.c: chat templates through a real in-process server on stories260K:
 * POST /apply-template with --chat-template-file gives every expected rendering of
 * ../shared/chat-templates byte for byte (tool-call arguments sent as the OpenAI JSON
 * string), a template that raises gives 400 with its message (on /v1/chat/completions
 * too), a forced family wins over the file, a file outside the subset is refused naming
 * the construct, and a model's own unsupported template falls back to its family with a
 * log line. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "engine_util.h"
#include "model/model.h"
#include "server/utf8.h"
#include "server_util.h"
#include "template_cases.h"
#include "util.h"

static ts_engine *engine;

typedef struct served {
    sv_served sv; /* the server only: the engine is the file's one */
    strbuf log;
} served;

/* The server calls its log from any HTTP thread (server.h asks for a thread-safe one). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_log(void *user, const char *line)
{
    pthread_mutex_lock(&log_mu);
    strbuf_addf(user, "%s\n", line);
    pthread_mutex_unlock(&log_mu);
}

/* A server for the shared engine with a template file and/or a forced family (NULL: none);
 * false (err set) when the server refuses them. */
static bool serve(served *s, const char *file, const char *family, ts_error *err)
{
    ts_server_options so;
    ts_server_options_default(&so);
    so.chat_template_file = file;
    so.chat_template = family;
    so.template_time = TEMPLATE_CASES_EPOCH;
    so.log = on_log;
    so.log_user = &s->log;
    s->log = (strbuf){0};
    return sv_serve(&s->sv, engine, &so, err);
}

static void unserve(served *s)
{
    sv_stop(&s->sv);
    strbuf_free(&s->log);
}

/* POSTs body to route; the status, and the parsed answer in *out. */
static long post(const served *s, const char *route, const char *body, cJSON **out)
{
    sv_answer a;
    sv_post(s->sv.url, route, body, &a);
    if (!a.json)
        fail_msg("POST %s: %ld, not JSON: %s", route, a.status, a.body.s);
    *out = a.json;
    a.json = NULL; /* the caller's now */
    sv_answer_free(&a);
    return a.status;
}

static const char *str_at(const cJSON *j, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, a);
    if (b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The case's body with every tool call's arguments turned into a JSON string, as OpenAI
 * clients send them (malloc'd). */
static char *openai_body(const char *body)
{
    cJSON *j = cJSON_Parse(body), *m;
    assert_non_null(j);
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "messages"))
    {
        cJSON *call;
        cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"))
        {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            char *args = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(fn, "arguments"));
            cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", cJSON_CreateString(args));
            free(args);
        }
    }
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

static void test_every_shared_template_through_apply_template(void **state)
{
    (void)state;
    const char *dir = tu_shared("chat-templates");
    DIR *d = opendir(dir);
    if (!d) {
        skip();
        return;
    }
    int checked = 0, errors = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (n < 7 || strcmp(de->d_name + n - 6, ".jinja"))
            continue;
        char path[1024], want_path[1100];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        served s;
        ts_error err = {0};
        if (!serve(&s, path, NULL, &err))
            fail_msg("%s: %s", de->d_name, err.msg);
        for (size_t c = 0; c < N_TEMPLATE_CASES; c++) {
            size_t len;
            snprintf(want_path, sizeof want_path, "%s/expected/%.*s.%s.txt", dir, (int)(n - 6),
                     de->d_name, template_cases[c].name);
            char *want = tu_read_file(want_path, &len);
            bool is_error = !want;
            if (is_error) {
                snprintf(want_path, sizeof want_path, "%s/expected/%.*s.%s.error", dir,
                         (int)(n - 6), de->d_name, template_cases[c].name);
                want = tu_read_file(want_path, &len);
                assert_non_null(want);
                char *msg = strstr(want, ": ");
                assert_non_null(msg);
                memmove(want, msg + 2, strlen(msg + 2) + 1);
                want[strcspn(want, "\n")] = '\0';
            }
            char *body = openai_body(template_cases[c].body);
            cJSON *ans;
            long status = post(&s, "/apply-template", body, &ans);
            if (is_error) {
                assert_int_equal(status, 400);
                assert_string_equal(str_at(ans, "error", "message"), want);
                errors++;
            } else {
                if (status != 200 || strcmp(str_at(ans, "prompt", NULL), want))
                    fail_msg("%s %s: %ld\n%s\n--- want ---\n%s", de->d_name, template_cases[c].name,
                             status, str_at(ans, "prompt", NULL), want);
            }
            checked++;
            cJSON_Delete(ans);
            free(body);
            free(want);
        }
        unserve(&s);
    }
    closedir(d);
    assert_int_equal(checked, 54);
    assert_int_equal(errors, 2);
}

static void test_raise_is_a_400_on_chat_completions(void **state)
{
    (void)state;
    served s;
    ts_error err = {0};
    if (!serve(&s, tu_shared("chat-templates/google-gemma-2-2b-it.jinja"), NULL, &err))
        fail_msg("%s", err.msg);
    cJSON *ans;
    long status = post(&s, "/v1/chat/completions",
                       "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
                       " {\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4}",
                       &ans);
    assert_int_equal(status, 400);
    assert_string_equal(str_at(ans, "error", "message"), "System role not supported");
    cJSON_Delete(ans);
    /* Without the system message the same template renders and the model answers. */
    status = post(&s, "/v1/chat/completions",
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 4}",
                  &ans);
    assert_int_equal(status, 200);
    cJSON_Delete(ans);
    unserve(&s);
}

/* Writes text to name under tmp/; returns its path (tu_tmp_path's static buffer). */
static const char *write_template(const char *name, const char *text)
{
    const char *path = tu_tmp_path(name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* s renders one user message "Hi" as chatml on /apply-template. */
static void expect_chatml(const served *s)
{
    cJSON *ans;
    assert_int_equal(post(s, "/apply-template",
                          "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", &ans),
                     200);
    assert_string_equal(str_at(ans, "prompt", NULL),
                        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    cJSON_Delete(ans);
}

static void test_kwargs_reach_the_template_and_family_wins(void **state)
{
    (void)state;
    static const char kwargs[] =
        "{% if enable_thinking is defined and not enable_thinking %}no-think {% endif %}"
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
    const char *path = write_template("kwargs.jinja", kwargs);
    served s;
    ts_error err = {0};
    assert_true(serve(&s, path, NULL, &err));
    cJSON *ans;
    assert_int_equal(
        post(&s, "/apply-template",
             "{\"messages\": [{\"role\": \"developer\", \"content\": [{\"type\": \"text\","
             " \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}],"
             " \"chat_template_kwargs\": {\"enable_thinking\": false}}",
             &ans),
        200);
    assert_string_equal(str_at(ans, "prompt", NULL), "no-think [system]ab");
    cJSON_Delete(ans);
    assert_int_equal(
        post(&s, "/apply-template",
             "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c1\","
             " \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{oops\"}}]}]}",
             &ans),
        400);
    assert_non_null(strstr(str_at(ans, "error", "message"), "not valid JSON"));
    cJSON_Delete(ans);
    unserve(&s);
    /* A forced family renders instead of the file. */
    assert_true(serve(&s, path, "chatml", &err));
    expect_chatml(&s);
    unserve(&s);
}

static void test_unsupported_templates(void **state)
{
    (void)state;
    const char *path = write_template("bad.jinja", "{{ bos_token }}\n{% include 'x.jinja' %}");
    served s;
    ts_error err = {0};
    assert_false(serve(&s, path, NULL, &err));
    assert_non_null(strstr(err.msg, "line 2 col 4: unsupported statement 'include'"));
    /* The model's own template failing to load: the family renders, and the log says so. */
    ts_model *m = (ts_model *)ts_engine_get_model(engine);
    char *own = m->chat_template;
    m->chat_template = (char *)"<|im_start|>{{ messages | wordcount }}";
    bool ok = serve(&s, NULL, NULL, &err);
    m->chat_template = own;
    assert_true(ok);
    assert_non_null(strstr(s.log.s, "unsupported filter 'wordcount'"));
    assert_non_null(strstr(s.log.s, "chatml"));
    expect_chatml(&s);
    unserve(&s);
}

static int setup(void **state)
{
    if (eu_setup_stories(state))
        return -1;
    engine = eu_start(eu_model, NULL);
    return 0;
}

/* A template holding ill-formed UTF-8 used to come back from /apply-template as raw
 * bytes in the JSON: the answer is valid UTF-8, each bad byte U+FFFD. */
static void test_apply_template_answers_valid_utf8(void **state)
{
    (void)state;
    served s;
    ts_error err = {0};
    if (!serve(&s, write_template("bad_utf8.jinja", "A\xff\xc0\x80" "B{{ messages[0].content }}"),
               NULL, &err))
        fail_msg("%s", err.msg);
    sv_answer a;
    sv_post(s.sv.url, "/apply-template",
            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", &a);
    assert_int_equal(a.status, 200);
    assert_true(utf8_valid(a.body.s, a.body.len));
    assert_non_null(a.json);
    const char *prompt = str_at(a.json, "prompt", NULL);
    assert_true(strncmp(prompt, "A\xEF\xBF\xBD", 4) == 0);
    assert_non_null(strstr(prompt, "BHi"));
    sv_answer_free(&a);
    unserve(&s);
}

/* A 20,000-operator chain (about 120 KB) used to overflow the C stack when the server
 * tried the template at start-up: it is refused, naming where. */
static void test_operator_chain_refused_at_start(void **state)
{
    (void)state;
    strbuf src = {0};
    strbuf_add(&src, "{{ messages[0].content", 22);
    for (int i = 0; i < 20000; i++)
        strbuf_add(&src, "|upper", 6);
    strbuf_add(&src, " }}", 4); /* with the NUL */
    assert_false(src.failed);
    served s;
    ts_error err = {0};
    bool up = serve(&s, write_template("chain.jinja", src.s), NULL, &err);
    strbuf_free(&src);
    if (up)
        unserve(&s);
    assert_false(up);
    assert_non_null(strstr(err.msg, "nested more than 256 deep"));
    assert_non_null(strstr(err.msg, "line 1 col "));
}

static int teardown(void **state)
{
    ts_engine_destroy(engine);
    return eu_teardown_stories(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_shared_template_through_apply_template),
        cmocka_unit_test(test_raise_is_a_400_on_chat_completions),
        cmocka_unit_test(test_kwargs_reach_the_template_and_family_wins),
        cmocka_unit_test(test_unsupported_templates),
        cmocka_unit_test(test_apply_template_answers_valid_utf8),
        cmocka_unit_test(test_operator_chain_refused_at_start),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
