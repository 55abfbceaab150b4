/* test_server_slots.c: llama.cpp's GET /slots over HTTP: one entry per engine sequence slot,
 * a busy one while a request runs and none after it, --no-slots, the API-key rule, and
 * /props' total_slots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <semaphore.h>
#include <unistd.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "engine_util.h"
#include "server_util.h"
#include "util.h"

enum { MAX_SEQS = 3 };

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int num(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("'%s' is not a number", key);
    return v->valueint;
}

static void serve(sv_served *s, bool no_slots, const char *keys_path)
{
    ts_engine_options eo;
    ts_engine_options_default(&eo);
    eo.max_seqs = MAX_SEQS;
    ts_server_options so;
    ts_server_options_default(&so);
    so.no_slots = no_slots;
    so.api_keys_path = keys_path;
    sv_start(s, &eo, &so);
}

/* GET /slots, wanting status; the parsed answer stays in a. */
static void get_slots(const sv_served *s, long status, sv_answer *a)
{
    sv_post(s->url, "/slots", NULL, a);
    if (a->status != status)
        fail_msg("/slots: status %ld, wanted %ld: %s", a->status, status, a->body.s);
}

/* Busy entries of a /slots answer of MAX_SEQS slots, each checked for its common fields. */
static int count_busy(const cJSON *slots, int n_ctx)
{
    assert_true(cJSON_IsArray(slots));
    assert_int_equal(cJSON_GetArraySize(slots), MAX_SEQS);
    int busy = 0;
    for (int i = 0; i < MAX_SEQS; i++) {
        const cJSON *e = cJSON_GetArrayItem(slots, i);
        assert_int_equal(num(e, "id"), i);
        assert_int_equal(num(e, "n_ctx"), n_ctx);
        const cJSON *p = get(e, "is_processing");
        assert_true(cJSON_IsBool(p));
        busy += cJSON_IsTrue(p);
        assert_true(cJSON_IsTrue(p) == (get(e, "id_task") != NULL));
    }
    return busy;
}

/* The request's notify: the call after g_hold_at (the first token of its second step)
 * holds the step thread until the test opens the gate, so its sequences stay busy, their
 * first step published, while /slots is read. */
static atomic_int g_notified;
static int g_hold_at;
static sem_t g_gate;

static void hold_second_step(void *user)
{
    (void)user;
    if (atomic_fetch_add(&g_notified, 1) == g_hold_at)
        sem_wait(&g_gate);
}

/* Submits a greedy request of ids (n of them) for 64 tokens and n_seqs completions and
 * returns once its second step is held. */
static ts_request *submit_held(ts_engine *e, const int32_t *ids, int n, int n_seqs)
{
    ts_request_params p = eu_greedy(ids, n, 64);
    p.ignore_eos = true;
    p.n = n_seqs;
    p.notify = hold_second_step;
    atomic_store(&g_notified, 0);
    g_hold_at = n_seqs;
    ts_request *req = eu_submit_params(e, &p);
    for (int i = 0; i < 10000 && atomic_load(&g_notified) <= n_seqs; i++)
        usleep(1000);
    assert_true(atomic_load(&g_notified) > n_seqs);
    return req;
}

/* Opens the gate, reads the request to its end and waits until the engine is idle. */
static void finish_held(ts_engine *e, ts_request *req, int n_seqs)
{
    sem_post(&g_gate);
    eu_result r;
    eu_collect(req, &r);
    assert_int_equal(r.n_done, n_seqs);
    for (int i = 0; i < n_seqs; i++)
        assert_int_equal(r.tokens[i], 64);
    eu_result_free(&r);
    ts_request_release(req);
    eu_wait_idle(e);
}

static void test_busy_then_idle(void **state)
{
    (void)state;
    sv_served s;
    serve(&s, false, NULL);
    assert_int_equal(sem_init(&g_gate, 0, 0), 0);
    int n_ctx = ts_model_get_config(eu_model)->context_len;
    sv_answer a;
    get_slots(&s, 200, &a);
    assert_int_equal(count_busy(a.json, n_ctx), 0);
    sv_answer_free(&a);

    int n = 0;
    int32_t *ids = eu_tokenize(eu_model, "Once upon a time", &n);
    ts_request *req = submit_held(s.engine, ids, n, 1);
    get_slots(&s, 200, &a);
    assert_int_equal(count_busy(a.json, n_ctx), 1);
    const cJSON *e = cJSON_GetArrayItem(a.json, 0); /* busy slots come first */
    assert_true(cJSON_IsTrue(get(e, "is_processing")));
    assert_int_equal(num(e, "n_prompt_tokens"), n);
    assert_int_equal(num(e, "n_prompt_tokens_processed"), n);
    assert_int_equal(num(e, "n_prompt_tokens_cache"), 0);
    const cJSON *next = cJSON_GetArrayItem(get(e, "next_token"), 0);
    assert_int_equal(num(next, "n_decoded"), 1); /* as the first token's step left it */
    assert_int_equal(num(next, "n_remain"), 63);
    assert_true(cJSON_IsTrue(get(next, "has_next_token")));
    sv_answer_free(&a);
    /* fail_on_no_slot: slots are free */
    sv_post(s.url, "/slots?fail_on_no_slot=1", NULL, &a);
    assert_int_equal(a.status, 200);
    sv_answer_free(&a);
    finish_held(s.engine, req, 1);
    get_slots(&s, 200, &a);
    assert_int_equal(count_busy(a.json, n_ctx), 0);
    sv_answer_free(&a);

    /* every slot busy: one request of MAX_SEQS completions; fail_on_no_slot refuses */
    req = submit_held(s.engine, ids, n, MAX_SEQS);
    get_slots(&s, 200, &a);
    assert_int_equal(count_busy(a.json, n_ctx), MAX_SEQS);
    for (int i = 0; i < MAX_SEQS; i++)
        assert_int_equal(num(cJSON_GetArrayItem(a.json, i), "n_prompt_tokens"), n);
    sv_answer_free(&a);
    sv_post(s.url, "/slots?fail_on_no_slot=1", NULL, &a);
    assert_int_equal(a.status, 503);
    sv_answer_free(&a);
    finish_held(s.engine, req, MAX_SEQS);
    get_slots(&s, 200, &a);
    assert_int_equal(count_busy(a.json, n_ctx), 0);
    sv_answer_free(&a);

    sv_post(s.url, "/slots?model=nope", NULL, &a); /* another model than those served */
    assert_int_equal(a.status, 404);
    sv_answer_free(&a);
    sv_post(s.url, "/slots?model=stories", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(count_busy(a.json, n_ctx), 0);
    sv_answer_free(&a);

    /* /props counts the slots */
    sv_post(s.url, "/props", NULL, &a);
    assert_int_equal(a.status, 200);
    assert_int_equal(num(a.json, "total_slots"), MAX_SEQS);
    sv_answer_free(&a);
    sem_destroy(&g_gate);
    free(ids);
    sv_stop(&s);
}

/* --no-slots: 501, as llama.cpp's server without --slots. */
static void test_no_slots(void **state)
{
    (void)state;
    sv_served s;
    serve(&s, true, NULL);
    sv_answer a;
    get_slots(&s, 501, &a);
    assert_non_null(strstr(a.body.s, "slots"));
    sv_answer_free(&a);
    sv_stop(&s);
}

/* GET path with a bearer key; the status. */
static long get_with_key(const sv_served *s, const char *path, const char *key)
{
    char url[160], auth[128];
    snprintf(url, sizeof url, "%s%s", s->url, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    strbuf body = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sv_on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    strbuf_free(&body);
    return status;
}

/* With API keys, /slots needs one, as /props does. */
static void test_slots_need_key(void **state)
{
    (void)state;
    char keys[512];
    snprintf(keys, sizeof keys, "%s", tu_tmp_path("slots_keys.json"));
    FILE *f = fopen(keys, "w");
    assert_non_null(f);
    fputs("{\"sk-slots-test\": {\"tier\": \"normal\", \"name\": \"slots\"}}", f);
    assert_int_equal(fclose(f), 0);
    sv_served s;
    serve(&s, false, keys);
    sv_answer a;
    get_slots(&s, 401, &a);
    sv_answer_free(&a);
    assert_int_equal(get_with_key(&s, "/slots", "sk-wrong"), 401);
    assert_int_equal(get_with_key(&s, "/slots", "sk-slots-test"), 200);
    assert_int_equal(get_with_key(&s, "/props", "sk-slots-test"), 200);
    sv_stop(&s);
    unlink(keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_then_idle),
        cmocka_unit_test(test_no_slots),
        cmocka_unit_test(test_slots_need_key),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = cmocka_run_group_tests_name("server_slots", tests, eu_setup_stories,
                                             eu_teardown_stories);
    curl_global_cleanup();
    return failed;
}
