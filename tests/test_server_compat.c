/* test_server_compat.c: drop-in details of the other APIs over HTTP: Anthropic's
 * stop_reason and stop_sequence (whole and streamed) and /v1/messages/count_tokens, the
 * Responses API's incomplete answers and usage, llama.cpp's /completion (and its
 * generation_settings), /tokenize (and its EOS where the vocabulary asks, against the
 * peer's ids in tests/tokenize/eos_ref.txt), /detokenize and /props, and vLLM's
 * prompt_logprobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "engine_util.h"
#include "gguf/gguf.h"
#include "model/model_gguf.h"
#include "ref_util.h"
#include "server_util.h"
#include "tokenizer/vocab.h"
#include "util.h"

#define USER_ONCE "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]"

static const cJSON *get(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    if (!cJSON_IsString(v))
        fail_msg("'%s' is not a string", key);
    return v->valuestring;
}

static int num(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("'%s' is not a number", key);
    return v->valueint;
}

/* POSTs body to path and wants status; the answer's JSON is parsed (NULL for a stream). */
static void post(const char *path, const char *body, long status, sv_answer *a)
{
    sv_post(sv_group.url, path, body, a);
    if (a->status != status)
        fail_msg("%s: status %ld, wanted %ld: %s", path, a->status, status, a->body.s);
}

/* The data of the first SSE event named name in a stream's text, parsed (caller
 * frees). */
static cJSON *sse_event(const char *sse, const char *name)
{
    char want[64];
    snprintf(want, sizeof want, "event: %s\ndata: ", name);
    const char *p = strstr(sse, want);
    if (!p)
        fail_msg("no %s event in: %s", name, sse);
    p += strlen(want);
    const char *end = strstr(p, "\n\n");
    assert_non_null(end);
    cJSON *j = cJSON_ParseWithLength(p, (size_t)(end - p));
    assert_non_null(j);
    return j;
}

/* The greedy answer's text of a Messages body of max_tokens 24 with extra fields (JSON
 * members with a leading comma, or ""); malloc'd. */
static char *messages_text(const char *extra, cJSON **whole)
{
    char body[1024];
    snprintf(body, sizeof body, "{\"max_tokens\":24,\"temperature\":0," USER_ONCE "%s}", extra);
    sv_answer a;
    post("/v1/messages", body, 200, &a);
    const cJSON *c = get(a.json, "content");
    assert_int_equal(cJSON_GetArraySize(c), 1);
    char *text = strdup(str(cJSON_GetArrayItem(c, 0), "text"));
    *whole = cJSON_Duplicate(a.json, true);
    sv_answer_free(&a);
    return text;
}

static void test_messages_stop_reasons(void **state)
{
    (void)state;
    cJSON *m;
    char *text = messages_text("", &m);
    /* no stop sequence: the limit or the model's end, and stop_sequence null */
    const char *why = str(m, "stop_reason");
    assert_true(!strcmp(why, "max_tokens") || !strcmp(why, "end_turn"));
    if (!strcmp(why, "max_tokens"))
        assert_int_equal(num(get(m, "usage"), "output_tokens"), 24);
    assert_true(cJSON_IsNull(get(m, "stop_sequence")));
    cJSON_Delete(m);
    size_t len = strlen(text);
    assert_true(len >= 8);

    /* a stop sequence from the middle of that text ends it there */
    size_t at = len / 2;
    char stop[4] = {text[at], text[at + 1], text[at + 2], 0};
    size_t first = (size_t)(strstr(text, stop) - text);
    cJSON *seqs = cJSON_CreateStringArray((const char *const[]){"\x01never", stop}, 2);
    char *seqs_json = cJSON_PrintUnformatted(seqs);
    cJSON_Delete(seqs);
    char extra[256];
    snprintf(extra, sizeof extra, ",\"stop_sequences\":%s", seqs_json);
    char *cut = messages_text(extra, &m);
    assert_string_equal(str(m, "stop_reason"), "stop_sequence");
    assert_string_equal(str(m, "stop_sequence"), stop);
    assert_int_equal(strlen(cut), first);
    assert_memory_equal(cut, text, first);
    cJSON_Delete(m);
    free(cut);

    /* streamed: message_start has no reason yet; message_delta carries both */
    char body[1024];
    snprintf(body, sizeof body,
             "{\"max_tokens\":24,\"temperature\":0,\"stream\":true," USER_ONCE
             ",\"stop_sequences\":%s}",
             seqs_json);
    sv_answer a;
    post("/v1/messages", body, 200, &a);
    cJSON *start = sse_event(a.body.s, "message_start");
    assert_true(cJSON_IsNull(get(get(start, "message"), "stop_reason")));
    const cJSON *su = get(get(start, "message"), "usage");
    int input_tokens = num(su, "input_tokens");
    assert_true(input_tokens > 0); /* the prompt's length, known at the start */
    assert_int_equal(num(su, "output_tokens"), 0);
    assert_true(cJSON_IsNull(get(get(start, "message"), "stop_sequence")));
    cJSON_Delete(start);
    cJSON *d = sse_event(a.body.s, "message_delta");
    assert_int_equal(num(get(d, "usage"), "input_tokens"), input_tokens);
    assert_string_equal(str(get(d, "delta"), "stop_reason"), "stop_sequence");
    assert_string_equal(str(get(d, "delta"), "stop_sequence"), stop);
    cJSON_Delete(d);
    sv_answer_free(&a);

    /* streamed, cut by max_tokens: no stop sequence */
    post("/v1/messages",
         "{\"max_tokens\":2,\"temperature\":0,\"stream\":true," USER_ONCE
         ",\"stop_sequences\":[\"\\u0001never\"]}",
         200, &a);
    d = sse_event(a.body.s, "message_delta");
    assert_string_equal(str(get(d, "delta"), "stop_reason"), "max_tokens");
    assert_true(cJSON_IsNull(get(get(d, "delta"), "stop_sequence")));
    assert_int_equal(num(get(d, "usage"), "output_tokens"), 2);
    cJSON_Delete(d);
    sv_answer_free(&a);
    free(seqs_json);
    free(text);
}

#define TOOLS                                                                                  \
    "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather of a city\","              \
    "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}]"
#define SYSTEM "\"system\":\"You tell short stories.\""

static int counted(const char *body)
{
    sv_answer a;
    post("/v1/messages/count_tokens", body, 200, &a);
    assert_int_equal(cJSON_GetArraySize(a.json), 1); /* {"input_tokens": n}, nothing else */
    int n = num(a.json, "input_tokens");
    sv_answer_free(&a);
    return n;
}

static void test_count_tokens(void **state)
{
    (void)state;
    /* the same prompt /v1/messages renders: its usage.input_tokens */
    int with_all = counted("{\"model\":\"stories\"," SYSTEM "," TOOLS "," USER_ONCE "}");
    sv_answer a;
    post("/v1/messages", "{\"max_tokens\":1," SYSTEM "," TOOLS "," USER_ONCE "}", 200, &a);
    assert_int_equal(num(get(a.json, "usage"), "input_tokens"), with_all);
    sv_answer_free(&a);
    int plain = counted("{" USER_ONCE "}");
    post("/v1/messages", "{\"max_tokens\":1," USER_ONCE "}", 200, &a);
    assert_int_equal(num(get(a.json, "usage"), "input_tokens"), plain);
    sv_answer_free(&a);
    int with_system = counted("{" SYSTEM "," USER_ONCE "}");
    assert_true(plain > 0);
    assert_true(with_system > plain);
    assert_true(with_all >= with_system);
    /* max_tokens may be given: it changes nothing */
    assert_int_equal(counted("{\"max_tokens\":5," USER_ONCE "}"), plain);

    /* errors in Anthropic's shape, naming Anthropic's fields */
    post("/v1/messages/count_tokens", "{\"system\":\"x\"}", 400, &a);
    assert_string_equal(str(a.json, "type"), "error");
    assert_string_equal(str(get(a.json, "error"), "type"), "invalid_request_error");
    assert_non_null(strstr(str(get(a.json, "error"), "message"), "messages"));
    sv_answer_free(&a);
    post("/v1/messages/count_tokens",
         "{" USER_ONCE ",\"tools\":[{\"name\":\"f\",\"input_schema\":7}]}", 400, &a);
    assert_non_null(strstr(str(get(a.json, "error"), "message"), "tools[0].input_schema"));
    sv_answer_free(&a);
    post("/v1/messages/count_tokens", "{" USER_ONCE ",\"model\":\"nope\"}", 404, &a);
    assert_string_equal(str(get(a.json, "error"), "type"), "not_found_error");
    sv_answer_free(&a);
    post("/v1/messages/count_tokens", "{\"messages\":", 400, &a);
    assert_string_equal(str(a.json, "type"), "error");
    sv_answer_free(&a);
}

static void check_responses_usage(const cJSON *u, int output_tokens)
{
    assert_true(num(u, "input_tokens") > 0);
    assert_int_equal(num(u, "output_tokens"), output_tokens);
    assert_int_equal(num(u, "total_tokens"), num(u, "input_tokens") + output_tokens);
    assert_true(num(get(u, "input_tokens_details"), "cached_tokens") >= 0);
    assert_int_equal(num(get(u, "output_tokens_details"), "reasoning_tokens"), 0);
}

static void test_responses_incomplete(void **state)
{
    (void)state;
    sv_answer a;
    post("/v1/responses", "{\"input\":\"Once upon a time\",\"max_output_tokens\":2}", 200, &a);
    assert_string_equal(str(a.json, "status"), "incomplete");
    assert_string_equal(str(get(a.json, "incomplete_details"), "reason"), "max_output_tokens");
    const cJSON *item = cJSON_GetArrayItem(get(a.json, "output"), 0);
    assert_string_equal(str(item, "type"), "message");
    assert_string_equal(str(item, "status"), "incomplete");
    check_responses_usage(get(a.json, "usage"), 2);
    sv_answer_free(&a);

    post("/v1/responses",
         "{\"input\":\"Once upon a time\",\"max_output_tokens\":2,\"stream\":true}", 200, &a);
    cJSON *done = sse_event(a.body.s, "response.output_item.done");
    assert_string_equal(str(get(done, "item"), "status"), "incomplete");
    cJSON_Delete(done);
    cJSON *end = sse_event(a.body.s, "response.incomplete");
    const cJSON *r = get(end, "response");
    assert_string_equal(str(r, "status"), "incomplete");
    assert_string_equal(str(get(r, "incomplete_details"), "reason"), "max_output_tokens");
    assert_string_equal(str(cJSON_GetArrayItem(get(r, "output"), 0), "status"), "incomplete");
    check_responses_usage(get(r, "usage"), 2);
    cJSON_Delete(end);
    sv_answer_free(&a);

    /* a stop string ends it complete */
    post("/v1/responses", "{\"input\":\"Once upon a time\",\"max_output_tokens\":40,"
                          "\"temperature\":0,\"stop\":[\" \"]}",
         200, &a);
    assert_string_equal(str(a.json, "status"), "completed");
    assert_true(cJSON_IsNull(get(a.json, "incomplete_details")));
    assert_string_equal(str(cJSON_GetArrayItem(get(a.json, "output"), 0), "status"), "completed");
    sv_answer_free(&a);
}

/* ---- llama.cpp's own endpoints */

#define ONCE "\"prompt\":\"Once upon a time\",\"temperature\":0"

static void test_llama_completion(void **state)
{
    (void)state;
    sv_answer a, b;
    post("/completion", "{" ONCE ",\"n_predict\":8}", 200, &a);
    const char *content = str(a.json, "content");
    assert_true(cJSON_IsTrue(get(a.json, "stop")));
    assert_string_equal(str(a.json, "stop_type"), "limit");
    assert_string_equal(str(a.json, "stopping_word"), "");
    assert_string_equal(str(a.json, "model"), "stories");
    assert_int_equal(num(a.json, "tokens_predicted"), 8);
    assert_true(cJSON_IsFalse(get(a.json, "truncated")));
    assert_int_equal(num(get(a.json, "timings"), "predicted_n"), 8);
    assert_null(get(a.json, "completion_probabilities")); /* not asked for */
    /* the same text and prompt count as /v1/completions */
    post("/v1/completions", "{" ONCE ",\"max_tokens\":8}", 200, &b);
    const cJSON *c0 = cJSON_GetArrayItem(get(b.json, "choices"), 0);
    assert_string_equal(str(c0, "text"), content);
    assert_int_equal(num(a.json, "tokens_evaluated"), num(get(b.json, "usage"), "prompt_tokens"));
    sv_answer_free(&b);

    /* a stop word from the middle */
    size_t len = strlen(content);
    assert_true(len >= 8);
    char stop[4] = {content[len / 2], content[len / 2 + 1], content[len / 2 + 2], 0};
    size_t first = (size_t)(strstr(content, stop) - content);
    cJSON *body = cJSON_Parse("{" ONCE ",\"n_predict\":8}");
    cJSON_AddItemToObject(body, "stop", cJSON_CreateStringArray((const char *const[]){stop}, 1));
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(body);
    post("/completion", text, 200, &b);
    free(text);
    assert_string_equal(str(b.json, "stop_type"), "word");
    assert_string_equal(str(b.json, "stopping_word"), stop);
    assert_int_equal(strlen(str(b.json, "content")), first);
    sv_answer_free(&b);

    /* n_probs: each generated token with its alternatives */
    post("/completion", "{" ONCE ",\"n_predict\":4,\"n_probs\":2}", 200, &b);
    const cJSON *probs = get(b.json, "completion_probabilities");
    assert_int_equal(cJSON_GetArraySize(probs), 4);
    const cJSON *p0 = cJSON_GetArrayItem(probs, 0);
    assert_true(cJSON_IsNumber(get(p0, "logprob")) && get(p0, "logprob")->valuedouble <= 0);
    assert_true(cJSON_IsArray(get(p0, "bytes")));
    const cJSON *tops = get(p0, "top_logprobs");
    assert_int_equal(cJSON_GetArraySize(tops), 2);
    /* greedy: the token drawn is the most likely one */
    assert_string_equal(str(cJSON_GetArrayItem(tops, 0), "token"), str(p0, "token"));
    sv_answer_free(&b);

    /* streamed: "data:" lines of content, the last one the whole object; no [DONE] */
    post("/completion", "{" ONCE ",\"n_predict\":8,\"stream\":true}", 200, &b);
    assert_null(strstr(b.body.s, "[DONE]"));
    assert_null(strstr(b.body.s, "event:"));
    char joined[1024] = "";
    cJSON *last = NULL;
    for (const char *p = b.body.s; (p = strstr(p, "data: "));) {
        const char *end = strstr(p, "\n\n");
        assert_non_null(end);
        cJSON_Delete(last);
        last = cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6));
        assert_non_null(last);
        strncat(joined, str(last, "content"), sizeof joined - strlen(joined) - 1);
        p = end;
    }
    assert_non_null(last);
    assert_true(cJSON_IsTrue(get(last, "stop")));
    assert_string_equal(str(last, "stop_type"), "limit");
    assert_int_equal(num(last, "tokens_predicted"), 8);
    assert_string_equal(joined, content);
    cJSON_Delete(last);
    sv_answer_free(&b);
    sv_answer_free(&a);

    /* no n_predict: past /v1/completions' default of 16 (until the context is full), here
     * up to a stop word first seen after the 17th token */
    post("/completion", "{" ONCE ",\"ignore_eos\":true,\"n_predict\":17}", 200, &a);
    post("/completion", "{" ONCE ",\"ignore_eos\":true,\"n_predict\":48}", 200, &b);
    const char *c17 = str(a.json, "content"), *c48 = str(b.json, "content");
    size_t at = strlen(c17);
    assert_memory_equal(c17, c48, at);
    char word[5] = "";
    for (; !word[0] && at + 4 <= strlen(c48); at++) {
        memcpy(word, c48 + at, 4);
        if ((size_t)(strstr(c48, word) - c48) != at)
            word[0] = 0; /* seen earlier: try the next one */
    }
    assert_true(word[0]);
    cJSON *wb = cJSON_Parse("{" ONCE ",\"ignore_eos\":true}");
    cJSON_AddItemToObject(wb, "stop", cJSON_CreateStringArray((const char *const[]){word}, 1));
    char *wtext = cJSON_PrintUnformatted(wb);
    cJSON_Delete(wb);
    sv_answer_free(&a);
    post("/completion", wtext, 200, &a);
    free(wtext);
    assert_string_equal(str(a.json, "stop_type"), "word");
    assert_true(num(a.json, "tokens_predicted") >= 17);
    assert_int_equal(strlen(str(a.json, "content")), at - 1); /* the loop passed the word */
    assert_memory_equal(str(a.json, "content"), c48, at - 1);
    sv_answer_free(&a);
    sv_answer_free(&b);

    /* errors name llama.cpp's field */
    post("/completion", "{" ONCE ",\"n_predict\":\"many\"}", 400, &a);
    assert_string_equal(str(get(a.json, "error"), "param"), "n_predict");
    sv_answer_free(&a);
    post("/completion", "{" ONCE ",\"n_predict\":0}", 400, &a);
    assert_string_equal(str(get(a.json, "error"), "param"), "n_predict");
    sv_answer_free(&a);
    post("/completion", "{\"n_predict\":4}", 400, &a);
    assert_string_equal(str(get(a.json, "error"), "param"), "prompt");
    sv_answer_free(&a);
}

/* The last "data:" line of a /completion stream, parsed (caller frees). */
static cJSON *last_data(const char *sse)
{
    const char *last = NULL;
    for (const char *p = sse; (p = strstr(p, "data: ")); p += 6)
        last = p;
    assert_non_null(last);
    const char *end = strstr(last, "\n\n");
    assert_non_null(end);
    cJSON *j = cJSON_ParseWithLength(last + 6, (size_t)(end - last - 6));
    assert_non_null(j);
    return j;
}

static double dnum(const cJSON *o, const char *key)
{
    const cJSON *v = get(o, key);
    if (!cJSON_IsNumber(v))
        fail_msg("'%s' is not a number", key);
    return v->valuedouble;
}

/* generation_settings: the settings the request ran with; prompt and tokens */
static void test_llama_generation_settings(void **state)
{
    (void)state;
    static const char body[] =
        "{\"prompt\":\"Once upon a time\",\"n_predict\":6,\"temperature\":0.5,"
        "\"top_k\":7,\"top_p\":0.875,\"min_p\":0.0625,\"seed\":42,\"stop\":[\"zzz\"],"
        "\"n_probs\":2,\"repeat_penalty\":1.25,\"repeat_last_n\":16,\"ignore_eos\":true,"
        "\"logit_bias\":{\"5\":-2.5}}";
    sv_answer a;
    post("/completion", body, 200, &a);
    const cJSON *gs = get(a.json, "generation_settings");
    assert_non_null(gs);
    assert_int_equal(num(gs, "n_predict"), 6);
    assert_int_equal(num(gs, "max_tokens"), 6);
    assert_true(dnum(gs, "temperature") == 0.5);
    assert_int_equal(num(gs, "top_k"), 7);
    assert_true(dnum(gs, "top_p") == 0.875);
    assert_true(dnum(gs, "min_p") == 0.0625);
    assert_int_equal(num(gs, "seed"), 42);
    assert_true(dnum(gs, "repeat_penalty") == 1.25);
    assert_int_equal(num(gs, "repeat_last_n"), 16);
    assert_int_equal(num(gs, "n_probs"), 2);
    assert_true(cJSON_IsTrue(get(gs, "ignore_eos")));
    assert_true(cJSON_IsFalse(get(gs, "stream")));
    const cJSON *stop = get(gs, "stop");
    assert_int_equal(cJSON_GetArraySize(stop), 1);
    assert_string_equal(cJSON_GetArrayItem(stop, 0)->valuestring, "zzz");
    const cJSON *bias = cJSON_GetArrayItem(get(gs, "logit_bias"), 0);
    assert_int_equal(num(bias, "token"), 5);
    assert_true(dnum(bias, "bias") == -2.5);
    assert_string_equal(str(gs, "constraint"), "none");
    assert_string_equal(str(gs, "grammar"), "");
    assert_null(get(gs, "dynatemp_range")); /* a setting tessera does not have: left out */
    assert_string_equal(str(a.json, "prompt"), "Once upon a time");
    assert_true(cJSON_IsArray(get(a.json, "tokens")));
    assert_int_equal(cJSON_GetArraySize(get(a.json, "tokens")), 0);
    sv_answer_free(&a);

    /* defaults: no seed (llama.cpp's "none"), until the context is full; a prompt of ids
     * is answered as its text */
    post("/completion", "{\"prompt\":\"Once upon a time\",\"grammar\":\"root ::= [a-z]+\"}",
         200, &a);
    gs = get(a.json, "generation_settings");
    assert_true(dnum(gs, "seed") == 4294967295.0);
    assert_int_equal(num(gs, "n_predict"), -1);
    assert_int_equal(cJSON_GetArraySize(get(gs, "stop")), 0);
    assert_string_equal(str(gs, "constraint"), "grammar");
    assert_null(get(gs, "grammar")); /* compiled: its text is not kept */
    sv_answer_free(&a);
    sv_answer ids;
    post("/tokenize", "{\"content\":\"Once upon a time\"}", 200, &ids);
    char *list = cJSON_PrintUnformatted(get(ids.json, "tokens"));
    char b2[512];
    snprintf(b2, sizeof b2, "{\"prompt\":%s,\"n_predict\":2}", list);
    free(list);
    sv_answer_free(&ids);
    post("/completion", b2, 200, &a);
    assert_non_null(strstr(str(a.json, "prompt"), "Once upon a time"));
    sv_answer_free(&a);

    /* streamed: the final chunk carries them, stream true */
    post("/completion", "{\"prompt\":\"Once upon a time\",\"n_predict\":3,\"top_k\":3,"
                        "\"stream\":true}",
         200, &a);
    cJSON *last = last_data(a.body.s);
    assert_true(cJSON_IsTrue(get(last, "stop")));
    gs = get(last, "generation_settings");
    assert_non_null(gs);
    assert_true(cJSON_IsTrue(get(gs, "stream")));
    assert_int_equal(num(gs, "top_k"), 3);
    assert_int_equal(num(gs, "n_predict"), 3);
    assert_string_equal(str(last, "prompt"), "Once upon a time");
    cJSON_Delete(last);
    sv_answer_free(&a);
}

static void test_llama_tokenize_props(void **state)
{
    (void)state;
    sv_answer a, b;
    /* llama.cpp's "content": no BOS unless add_special */
    post("/tokenize", "{\"content\":\"Once upon a time\"}", 200, &a);
    post("/tokenize", "{\"prompt\":\"Once upon a time\",\"add_special\":false}", 200, &b);
    const cJSON *ids = get(a.json, "tokens");
    assert_true(cJSON_GetArraySize(ids) >= 2);
    assert_true(cJSON_Compare(ids, get(b.json, "tokens"), true));
    sv_answer_free(&b);
    post("/tokenize", "{\"content\":\"Once upon a time\",\"add_special\":true}", 200, &b);
    assert_int_equal(cJSON_GetArraySize(get(b.json, "tokens")), cJSON_GetArraySize(ids) + 1);
    sv_answer_free(&b);
    /* with_pieces: the same ids, each with its text */
    post("/tokenize", "{\"content\":\"Once upon a time\",\"with_pieces\":true}", 200, &b);
    const cJSON *pieces = get(b.json, "tokens");
    assert_int_equal(cJSON_GetArraySize(pieces), cJSON_GetArraySize(ids));
    for (int i = 0; i < cJSON_GetArraySize(ids); i++) {
        const cJSON *e = cJSON_GetArrayItem(pieces, i);
        assert_int_equal(num(e, "id"), cJSON_GetArrayItem(ids, i)->valueint);
        assert_true(cJSON_IsString(get(e, "piece")) || cJSON_IsArray(get(e, "piece")));
    }
    assert_non_null(strstr(str(cJSON_GetArrayItem(pieces, 1), "piece"), "upon"));
    sv_answer_free(&b);
    /* a character split over byte tokens: each piece its byte, as a number */
    post("/tokenize", "{\"content\":\"\xc3\xa1\",\"with_pieces\":true}", 200, &b);
    pieces = get(b.json, "tokens");
    int n_pieces = cJSON_GetArraySize(pieces);
    assert_true(n_pieces >= 2);
    const cJSON *p1 = get(cJSON_GetArrayItem(pieces, n_pieces - 2), "piece");
    const cJSON *p2 = get(cJSON_GetArrayItem(pieces, n_pieces - 1), "piece");
    assert_true(cJSON_IsArray(p1) && cJSON_IsArray(p2));
    assert_int_equal(cJSON_GetArraySize(p1), 1);
    assert_int_equal(cJSON_GetArrayItem(p1, 0)->valueint, 0xc3);
    assert_int_equal(cJSON_GetArrayItem(p2, 0)->valueint, 0xa1);
    sv_answer_free(&b);
    /* /detokenize answers llama.cpp's "content" */
    char body[512];
    char *list = cJSON_PrintUnformatted(ids);
    snprintf(body, sizeof body, "{\"tokens\":%s}", list);
    free(list);
    post("/detokenize", body, 200, &b);
    assert_non_null(strstr(str(b.json, "content"), "Once upon a time"));
    assert_string_equal(str(b.json, "content"), str(b.json, "prompt"));
    sv_answer_free(&b);
    sv_answer_free(&a);
    post("/tokenize", "{\"content\":7}", 400, &a);
    assert_string_equal(str(get(a.json, "error"), "param"), "content");
    sv_answer_free(&a);
    post("/tokenize", "{\"content\":\"x\",\"with_pieces\":1}", 400, &a);
    assert_string_equal(str(get(a.json, "error"), "param"), "with_pieces");
    sv_answer_free(&a);

    /* /props: the context, default sampling, template and build */
    post("/props", NULL, 200, &a);
    const cJSON *gs = get(a.json, "default_generation_settings");
    assert_int_equal(num(gs, "n_ctx"), ts_model_get_config(eu_model)->context_len);
    assert_int_equal(num(get(gs, "params"), "n_predict"), -1);
    assert_true(cJSON_IsNumber(get(get(gs, "params"), "temperature")));
    assert_true(strlen(str(a.json, "chat_template")) > 0);
    assert_string_equal(str(a.json, "model_alias"), "stories");
    assert_string_equal(str(a.json, "bos_token"), "<s>");
    assert_true(cJSON_IsFalse(get(get(a.json, "modalities"), "vision")));
    assert_non_null(strstr(str(a.json, "build_info"), "tessera"));
    sv_answer_free(&a);
    post("/props?model=nope", NULL, 404, &a);
    sv_answer_free(&a);
}

/* ---- vLLM's prompt_logprobs */

#define STORY "Once upon a time, there was a little girl"

/* Checks list against the prompt ids (n of them): null first, then each entry keyed by
 * its prompt token with a rank, up to k alternatives more; returns the entries' logprobs
 * of the prompt tokens in lps[1..]. */
static void check_plp(const cJSON *list, const cJSON *ids, int n, int k, double *lps)
{
    assert_int_equal(cJSON_GetArraySize(list), n);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(list, 0)));
    for (int i = 1; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        char key[16];
        snprintf(key, sizeof key, "%d", cJSON_GetArrayItem(ids, i)->valueint);
        const cJSON *own = get(e, key);
        if (!own)
            fail_msg("prompt token %d (%s) missing from its entry", i, key);
        int rank = num(own, "rank");
        assert_true(rank >= 1);
        assert_true(get(own, "logprob")->valuedouble <= 0);
        assert_true(cJSON_IsString(get(own, "decoded_token")));
        lps[i] = get(own, "logprob")->valuedouble;
        int size = cJSON_GetArraySize(e);
        assert_true(size == k || size == k + 1); /* the prompt's own token among them or not */
        assert_true(size == k + 1 || rank <= k);
        /* the alternatives are ranks 1..k, most likely first */
        double prev = 0;
        for (int r = 1; r <= k; r++) {
            const cJSON *c;
            bool found = false;
            cJSON_ArrayForEach(c, e) if (num(c, "rank") == r && (c != own || r == rank))
            {
                assert_true(r == 1 || get(c, "logprob")->valuedouble <= prev + 1e-6);
                prev = get(c, "logprob")->valuedouble;
                found = true;
                break;
            }
            assert_true(found);
        }
    }
}

/* ---- EOS after a text: the peer's ids for a SentencePiece and a byte-level BPE vocabulary
 * whose file asks for it (tests/tokenize/make_ref.py) */

enum { EOS_MAX_CASES = 16, EOS_MAX_IDS = 64 };

typedef struct eos_case {
    char text[256]; /* the text, or a mixed "content" array's JSON */
    size_t len;
    bool content;   /* text is a "content" array */
    int32_t ids[EOS_MAX_IDS], plain[EOS_MAX_IDS]; /* with add_special, without */
    size_t n_ids, n_plain;
} eos_case;

/* The cases of eos_ref.txt under "vocab name"; returns their count. */
static int eos_ref_load(const char *name, eos_case *cases)
{
    char *file = ref_read(TS_SOURCE_DIR "/tests/tokenize/eos_ref.txt", NULL), *cursor = file;
    int n = 0;
    bool in = false;
    for (char *line; (line = ref_next_line(&cursor)) != NULL;) {
        if (!strncmp(line, "vocab ", 6)) {
            in = !strcmp(line + 6, name);
        } else if (in && (!strncmp(line, "text", 4) || !strncmp(line, "content ", 8))) {
            assert_true(n < EOS_MAX_CASES);
            eos_case *c = &cases[n++];
            c->content = line[0] == 'c';
            const char *hex = c->content ? line + 8 : line[4] == ' ' ? line + 5 : "";
            c->len = ref_unhex(hex, c->text, sizeof c->text - 1);
            c->text[c->len] = '\0';
        } else if (in) {
            assert_true(n > 0);
            eos_case *c = &cases[n - 1];
            ref_id_line(line, c->ids, &c->n_ids, c->plain, &c->n_plain, EOS_MAX_IDS);
        }
    }
    free(file);
    return n;
}

/* `tessera tokenize` on vocabulary-only GGUF path prints "ids\n" for c's text, with the
 * special tokens unless no_bos. */
static void expect_cli_ids(const char *path, const eos_case *c, bool no_bos)
{
    char cmd[1024], want[1024] = "";
    snprintf(cmd, sizeof cmd, "%s/tessera tokenize %s-m %s -p '%.*s' 2>/dev/null", TS_BUILD_DIR,
             no_bos ? "--no-bos " : "", path, (int)c->len, c->text);
    const int32_t *ids = no_bos ? c->plain : c->ids;
    size_t n = no_bos ? c->n_plain : c->n_ids;
    for (size_t i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? " " : "",
                 (int)ids[i]);
    strcat(want, "\n");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[1024] = "";
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    assert_int_equal(WEXITSTATUS(pclose(p)), 0);
    assert_string_equal(out, want);
}

/* A vocabulary (from the GGUF at path) whose file asks for EOS: /tokenize with add_special
 * ends each text with it, BOS first where the vocabulary says so, and without add_special
 * neither, all as the peer answers (name: the reference's section); so does `tessera
 * tokenize` on a vocabulary-only file. */
static void check_eos_vocab(const char *path, const char *name)
{
    static eos_case cases[EOS_MAX_CASES];
    int n_cases = eos_ref_load(name, cases);
    assert_true(n_cases >= 8);
    gguf_file *f = NULL;
    tokenizer_vocab v;
    ts_error err = {0};
    if (gguf_open(path, &f, &err) != TS_OK || vocab_read_gguf(&v, f, &err) != TS_OK)
        fail_msg("vocabulary %s: %s", path, err.msg);
    gguf_close(f);
    v.add_eos = true;
    sv_served s;
    ts_model *model = NULL;
    sv_start_encoder(&s, &model, &v);
    int contents = 0;
    for (int k = 0; k < n_cases; k++) {
        const eos_case *c = &cases[k];
        if (c->content) { /* strings and ids mixed: BOS and EOS around the first part only */
            for (int special = 0; special < 2; special++) {
                char body[512], what[600];
                snprintf(body, sizeof body, "{\"content\":%.*s,\"add_special\":%s}", (int)c->len,
                         c->text, special ? "true" : "false");
                size_t n = 0;
                int32_t *ids = sv_tokenize_body(s.url, body, &n);
                snprintf(what, sizeof what, "/tokenize %s", body);
                ref_expect_ids(what, ids, n, special ? c->ids : c->plain,
                               special ? c->n_ids : c->n_plain);
                free(ids);
            }
            contents++;
            continue;
        }
        assert_true(c->n_ids > c->n_plain); /* the peer added EOS at least */
        sv_expect_tokenize_forms(s.url, c->text, c->len, c->ids, c->n_ids, c->plain,
                                 c->n_plain);
    }
    assert_true(contents >= 4);
    /* an id the vocabulary lacks is refused (the peer passes it through) */
    sv_answer bad;
    sv_post(s.url, "/tokenize", "{\"content\":[\"x\",99999]}", &bad);
    assert_int_equal(bad.status, 400);
    assert_non_null(strstr(bad.body.s, "outside the vocabulary"));
    sv_answer_free(&bad);
    sv_stop(&s);
    ts_model_free(model);

    char file[512];
    snprintf(file, sizeof file, "%s", tu_tmp_path("eos-vocab.gguf"));
    gguf_writer *g = NULL;
    assert_int_equal(gguf_writer_create(32, &g, &err), TS_OK);
    assert_int_equal(model_gguf_add_vocab(g, &v, &err), TS_OK);
    assert_int_equal(gguf_writer_write_file(g, file, &err), TS_OK);
    gguf_writer_free(g);
    static const int cli_cases[] = {0, 2, 7}; /* "", "Hello world", "<s> ... </s> ..." */
    for (size_t i = 0; i < sizeof cli_cases / sizeof cli_cases[0]; i++) {
        expect_cli_ids(file, &cases[cli_cases[i]], false);
        expect_cli_ids(file, &cases[cli_cases[i]], true);
    }
    remove(file);
    vocab_clear(&v);
}

static void test_llama_tokenize_eos(void **state)
{
    (void)state;
    check_eos_vocab(tu_shared("models/stories260K/stories260K.gguf"), "spm");
    check_eos_vocab(TS_BUILD_DIR "/archref/models/qwen2-f32.gguf", "bpe");
}

static void test_prompt_logprobs(void **state)
{
    (void)state;
    sv_answer t, a, echo;
    post("/tokenize", "{\"prompt\":\"" STORY "\"}", 200, &t);
    const cJSON *ids = get(t.json, "tokens");
    int n = cJSON_GetArraySize(ids);
    double lps[64] = {0};
    assert_true(n > 2 && n < 64);

    post("/v1/completions", "{\"prompt\":\"" STORY "\",\"max_tokens\":2,\"prompt_logprobs\":2}",
         200, &a);
    assert_int_equal(num(get(a.json, "usage"), "prompt_tokens"), n);
    const cJSON *c0 = cJSON_GetArrayItem(get(a.json, "choices"), 0);
    check_plp(get(c0, "prompt_logprobs"), ids, n, 2, lps);
    assert_true(cJSON_IsNull(get(c0, "logprobs"))); /* the completion's were not asked for */
    /* the same scores echo gives */
    post("/v1/completions",
         "{\"prompt\":\"" STORY "\",\"max_tokens\":0,\"echo\":true,\"logprobs\":0}", 200, &echo);
    const cJSON *tl = get(get(cJSON_GetArrayItem(get(echo.json, "choices"), 0), "logprobs"),
                          "token_logprobs");
    assert_int_equal(cJSON_GetArraySize(tl), n);
    for (int i = 1; i < n; i++)
        assert_float_equal(cJSON_GetArrayItem(tl, i)->valuedouble, lps[i], 1e-4);
    sv_answer_free(&echo);
    sv_answer_free(&a);

    /* 0: the prompt's own token only; with logprobs asked for too, the same count */
    post("/v1/completions", "{\"prompt\":\"" STORY "\",\"max_tokens\":1,\"prompt_logprobs\":0}",
         200, &a);
    check_plp(get(cJSON_GetArrayItem(get(a.json, "choices"), 0), "prompt_logprobs"), ids, n, 0,
              lps);
    sv_answer_free(&a);
    post("/v1/completions",
         "{\"prompt\":\"" STORY "\",\"max_tokens\":1,\"prompt_logprobs\":1,\"logprobs\":1}", 200,
         &a);
    c0 = cJSON_GetArrayItem(get(a.json, "choices"), 0);
    check_plp(get(c0, "prompt_logprobs"), ids, n, 1, lps);
    assert_true(cJSON_IsObject(get(c0, "logprobs")));
    sv_answer_free(&a);
    sv_answer_free(&t);

    /* a chat: the rendered prompt's tokens, the list beside the choices */
    post("/v1/chat/completions",
         "{\"max_tokens\":1,\"prompt_logprobs\":3," USER_ONCE "}", 200, &a);
    const cJSON *list = get(a.json, "prompt_logprobs");
    assert_int_equal(cJSON_GetArraySize(list), num(get(a.json, "usage"), "prompt_tokens"));
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(list, 0)));
    int size = cJSON_GetArraySize(cJSON_GetArrayItem(list, 1));
    assert_true(size == 3 || size == 4);
    sv_answer_free(&a);

    /* bounded, and refused where it cannot be honoured */
    static const char *const bad[] = {
        "{\"prompt\":\"x\",\"prompt_logprobs\":21}",
        "{\"prompt\":\"x\",\"prompt_logprobs\":-1}",
        "{\"prompt\":\"x\",\"prompt_logprobs\":1.5}",
        "{\"prompt\":\"x\",\"prompt_logprobs\":\"5\"}",
        "{\"prompt\":\"x\",\"prompt_logprobs\":2,\"logprobs\":3}",
        "{\"prompt\":\"x\",\"prompt_logprobs\":2,\"stream\":true}",
        "{\"prompt\":\"x\",\"prompt_logprobs\":2,\"n\":2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        post("/v1/completions", bad[i], 400, &a);
        assert_string_equal(str(get(a.json, "error"), "param"), "prompt_logprobs");
        sv_answer_free(&a);
    }
    post("/v1/completions", "{\"prompt\":\"x\",\"prompt_logprobs\":21}", 400, &a);
    assert_non_null(strstr(str(get(a.json, "error"), "message"), "20"));
    sv_answer_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_stop_reasons),
        cmocka_unit_test(test_count_tokens),
        cmocka_unit_test(test_responses_incomplete),
        cmocka_unit_test(test_llama_completion),
        cmocka_unit_test(test_llama_generation_settings),
        cmocka_unit_test(test_llama_tokenize_props),
        cmocka_unit_test(test_llama_tokenize_eos),
        cmocka_unit_test(test_prompt_logprobs),
    };
    return cmocka_run_group_tests_name("server_compat", tests, sv_setup_group,
                                       sv_teardown_group);
}
