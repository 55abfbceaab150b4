/* test_server_ui.c: the chat page embedded from web/: every file's bytes equal the source
 * file, GET / and its assets come with the right Content-Type and the strict security
 * headers, HEAD works, other methods get 405, unknown paths 404, --no-ui (no_ui) turns it
 * all off, and the page stays open when the server has API keys (the API does not). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/strbuf.h"
#include "engine_util.h"
#include "server_util.h"
#include "server/ui.h"
#include "tessera/server.h"
#include "util.h"

static void serve_start(sv_served *s, bool no_ui, const char *keys_path)
{
    ts_server_options so;
    ts_server_options_default(&so);
    so.no_ui = no_ui;
    so.api_keys_path = keys_path;
    sv_start(s, NULL, &so);
}

/* One answer: status, body and the raw header block (strbuf_free both). */
typedef struct answer {
    long status;
    strbuf body, headers;
} answer;

static answer request(const sv_served *s, const char *method, const char *path)
{
    char url[160];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    answer a = {0};
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a.headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK)
        fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    curl_easy_cleanup(c);
    strbuf_add(&a.body, "", 0);
    strbuf_add(&a.headers, "", 0);
    assert_false(a.body.failed || a.headers.failed);
    return a;
}

static void answer_free(answer *a)
{
    strbuf_free(&a->body);
    strbuf_free(&a->headers);
}

static void expect_header(const answer *a, const char *line)
{
    if (!strstr(a->headers.s, line))
        fail_msg("no header '%s' in:\n%s", line, a->headers.s);
}

/* The embedded table holds exactly web/'s files, byte for byte, with their types. */
static void test_assets_match_files(void **state)
{
    (void)state;
    static const struct {
        const char *name, *type;
    } files[] = {
        {"index.html", "text/html; charset=utf-8"},
        {"app.js", "text/javascript; charset=utf-8"},
        {"style.css", "text/css; charset=utf-8"},
    };
    assert_int_equal(ui_n_assets, 3);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512], url[64];
        snprintf(path, sizeof path, "%s/web/%s", TS_SOURCE_DIR, files[i].name);
        snprintf(url, sizeof url, "/%s", files[i].name);
        size_t n = 0;
        char *bytes = tu_read_file(path, &n);
        assert_non_null(bytes);
        const ui_asset *a = ui_find(url);
        assert_non_null(a);
        assert_string_equal(a->content_type, files[i].type);
        assert_int_equal(a->len, n);
        assert_memory_equal(a->data, bytes, n);
        free(bytes);
    }
    assert_ptr_equal(ui_find("/"), ui_find("/index.html"));
    assert_null(ui_find("/index.htm"));
    assert_null(ui_find("/web/app.js"));
    assert_null(ui_find(""));
}

static void test_serves_page(void **state)
{
    (void)state;
    sv_served s;
    serve_start(&s, false, NULL);
    const ui_asset *index = ui_find("/");
    answer a = request(&s, "GET", "/");
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body.len, index->len);
    assert_memory_equal(a.body.s, index->data, index->len);
    expect_header(&a, "Content-Type: text/html; charset=utf-8\r\n");
    expect_header(&a, "Content-Security-Policy: default-src 'none'; script-src 'self'; "
                      "style-src 'self'; connect-src 'self';");
    expect_header(&a, "X-Content-Type-Options: nosniff\r\n");
    expect_header(&a, "X-Frame-Options: DENY\r\n");
    answer_free(&a);

    a = request(&s, "GET", "/app.js?v=1"); /* a query string does not change the file */
    assert_int_equal(a.status, 200);
    expect_header(&a, "Content-Type: text/javascript; charset=utf-8\r\n");
    assert_int_equal(a.body.len, ui_find("/app.js")->len);
    answer_free(&a);

    a = request(&s, "HEAD", "/style.css");
    assert_int_equal(a.status, 200);
    expect_header(&a, "Content-Type: text/css; charset=utf-8\r\n");
    assert_int_equal(a.body.len, 0);
    answer_free(&a);

    a = request(&s, "POST", "/");
    assert_int_equal(a.status, 405);
    assert_non_null(strstr(a.body.s, "method_not_allowed"));
    answer_free(&a);

    a = request(&s, "GET", "/missing.js");
    assert_int_equal(a.status, 404);
    answer_free(&a);
    sv_stop(&s);
}

static void test_no_ui(void **state)
{
    (void)state;
    sv_served s;
    serve_start(&s, true, NULL);
    const char *paths[] = {"/", "/index.html", "/app.js", "/style.css"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        answer a = request(&s, "GET", paths[i]);
        assert_int_equal(a.status, 404);
        assert_non_null(strstr(a.body.s, "not_found"));
        answer_free(&a);
    }
    answer a = request(&s, "GET", "/health"); /* the API is unchanged */
    assert_int_equal(a.status, 200);
    answer_free(&a);
    sv_stop(&s);
}

/* With keys the page loads without one (it asks for the key); the API still refuses. */
static void test_page_open_with_keys(void **state)
{
    (void)state;
    char keys[512];
    snprintf(keys, sizeof keys, "%s", tu_tmp_path("ui_keys.json"));
    FILE *f = fopen(keys, "w");
    assert_non_null(f);
    fputs("{\"sk-ui-test\": {\"tier\": \"normal\", \"name\": \"ui\"}}", f);
    assert_int_equal(fclose(f), 0);
    sv_served s;
    serve_start(&s, false, keys);
    answer a = request(&s, "GET", "/");
    assert_int_equal(a.status, 200);
    answer_free(&a);
    a = request(&s, "GET", "/v1/models");
    assert_int_equal(a.status, 401);
    answer_free(&a);
    sv_stop(&s);
    unlink(keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_assets_match_files),
        cmocka_unit_test(test_serves_page),
        cmocka_unit_test(test_no_ui),
        cmocka_unit_test(test_page_open_with_keys),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = cmocka_run_group_tests_name("server_ui", tests, eu_setup_stories,
                                             eu_teardown_stories);
    curl_global_cleanup();
    return failed;
}
