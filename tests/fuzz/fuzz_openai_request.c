/* fuzz_openai_request.c: libFuzzer target: JSON request bodies through the OpenAI parser
 * and validator (chat, completions, /tokenize, /detokenize), and parsed chat messages
 * through every chat template, as the server chains them.
 *
 * Input: byte 0 picks the route (bits 0-1), the chat template (bits 2-4) and, for the
 * chat route, the body's shape (bits 5-6: chat, Responses, Messages, chat); the rest is
 * the body, in a buffer of exactly its size (no NUL after it), as the server holds it.
 * Checked: a refusal carries a message, a type and a 4xx/5xx status; an accepted request
 * has every field inside its documented range and every string valid UTF-8; rendering a
 * parsed chat succeeds and yields valid UTF-8, and without tools, tool calls or results it
 * contains every message's content;
 * the Jinja template variables hold every message and add_generation_prompt. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "server/api.h"
#include "server/chat_family.h"
#include "server/openai.h"
#include "server/utf8.h"
#include "template/chat_template.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void check_refusal(ts_status st, const oai_error *e, const char *what)
{
    FUZZ_CHECK(st != TS_OK, "%s: not a refusal", what);
    FUZZ_CHECK(e->message[0] != '\0', "%s refused a body without a message", what);
    FUZZ_CHECK(e->type[0] != '\0', "%s refused a body without an error type", what);
    FUZZ_CHECK(e->http_status >= 400 && e->http_status <= 599, "%s refused with HTTP %d", what,
               e->http_status);
}

static void check_str(const char *s, const char *what)
{
    if (s)
        FUZZ_CHECK(utf8_valid(s, strlen(s)), "accepted %s is not valid UTF-8", what);
}

static bool in(double v, double lo, double hi)
{
    return isfinite(v) && v >= lo && v <= hi;
}

static void render_chat(const oai_request *r, chat_template_kind kind)
{
    chat_rendering out = {0};
    ts_error err = {0};
    ts_status st = chat_family_render(kind, r, &out, &err);
    FUZZ_CHECK(st == TS_OK, "rendering a parsed chat with %s failed: %s",
               chat_template_name(kind), err.msg);
    FUZZ_CHECK(utf8_valid(out.text, strlen(out.text)), "the %s rendering is not valid UTF-8",
               chat_template_name(kind));
    /* tools, calls and results rewrite the chat (tags, JSON quoting): no content check */
    bool tool = r->tools.defs != NULL;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(r->chat_vars, "messages"))
        tool |= cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) > 0;
    for (size_t i = 0; i < r->n_messages; i++)
        tool |= !strcmp(r->messages[i].role, "tool");
    for (size_t i = 0; i < r->n_messages && !tool; i++) {
        size_t core_len;
        const char *core =
            fuzz_chat_core(r->messages[i].content, chat_template_trims(kind), &core_len);
        FUZZ_CHECK(memmem(out.text, strlen(out.text), core, core_len) != NULL,
                   "the %s rendering lost the content of message %zu", chat_template_name(kind),
                   i);
    }
    chat_rendering_free(&out);
}

static void check_request(const oai_request *r, oai_kind kind)
{
    FUZZ_CHECK(r->kind == kind, "the request's kind changed");
    check_str(r->model, "model");
    check_str(r->user, "user");
    if (kind == OAI_CHAT) {
        const cJSON *vm = cJSON_GetObjectItemCaseSensitive(r->chat_vars, "messages");
        FUZZ_CHECK(cJSON_GetArraySize(vm) == (int)r->n_messages,
                   "the template variables hold %d messages, the request %zu",
                   cJSON_GetArraySize(vm), r->n_messages);
        FUZZ_CHECK(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(r->chat_vars,
                                                                  "add_generation_prompt")),
                   "no add_generation_prompt among the template variables");
        FUZZ_CHECK(r->n_messages >= 1 && r->n_messages <= OAI_MAX_MESSAGES && r->messages,
                   "accepted %zu messages", r->n_messages);
        for (size_t i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            FUZZ_CHECK(role && (!strcmp(role, "system") || !strcmp(role, "user") ||
                                !strcmp(role, "assistant") || !strcmp(role, "tool")),
                       "message %zu has an unknown role", i);
            FUZZ_CHECK(r->messages[i].content != NULL, "message %zu has no content", i);
            check_str(r->messages[i].content, "content");
        }
    } else {
        FUZZ_CHECK((r->prompt != NULL) != (r->prompt_tokens != NULL),
                   "a completion needs exactly one of a text or a token prompt");
        check_str(r->prompt, "prompt");
        if (r->prompt_tokens)
            FUZZ_CHECK(r->n_prompt_tokens >= 1 && r->n_prompt_tokens <= OAI_MAX_PROMPT_TOKENS,
                       "accepted %zu prompt tokens", r->n_prompt_tokens);
        for (size_t i = 0; i < r->n_prompt_tokens; i++)
            FUZZ_CHECK(r->prompt_tokens[i] >= 0, "accepted token id %d", (int)r->prompt_tokens[i]);
    }
    FUZZ_CHECK(r->max_tokens >= 0, "max_tokens %d", r->max_tokens);
    const ts_sampling_params *p = &r->sampling;
    FUZZ_CHECK(in(p->temperature, 0, 2) && in(p->top_p, 0, 1) && p->top_p > 0 && p->top_k >= 0 &&
                   in(p->min_p, 0, 1) && in(p->presence_penalty, -2, 2) &&
                   in(p->frequency_penalty, -2, 2) && in(p->repetition_penalty, 0, 10) &&
                   p->repetition_penalty > 0,
               "a sampling parameter outside its range was accepted");
    FUZZ_CHECK(r->n >= 1 && r->n <= OAI_MAX_N, "n %d", r->n);
    FUZZ_CHECK(p->top_logprobs >= 0 && p->top_logprobs <= OAI_MAX_TOP_LOGPROBS,
               "top_logprobs %d", p->top_logprobs);
    FUZZ_CHECK(p->top_logprobs == 0 || p->logprobs, "top_logprobs without logprobs");
    FUZZ_CHECK(p->n_logit_bias >= 0 && p->n_logit_bias <= TS_SAMPLING_MAX_LOGIT_BIAS,
               "%d logit_bias entries", p->n_logit_bias);
    for (int i = 0; i < p->n_logit_bias; i++)
        FUZZ_CHECK(p->logit_bias[i].token >= 0 && in(p->logit_bias[i].bias, -100, 100),
                   "logit_bias entry %d out of range", i);
    size_t n_ign = strnlen(r->ignored, sizeof r->ignored);
    FUZZ_CHECK(n_ign < sizeof r->ignored, "the ignored-field list is not terminated");
    for (size_t i = 0; i < n_ign; i++) /* it goes into a response header */
        FUZZ_CHECK(r->ignored[i] >= 0x20 && r->ignored[i] < 0x7f,
                   "the ignored-field list holds byte 0x%02x", (unsigned char)r->ignored[i]);
    FUZZ_CHECK(r->n_stop >= 0 && r->n_stop <= OAI_MAX_STOP, "%d stop strings", r->n_stop);
    for (int i = 0; i < r->n_stop; i++) {
        size_t n = r->stop[i] ? strlen(r->stop[i]) : 0;
        FUZZ_CHECK(n >= 1 && n <= OAI_MAX_STOP_LEN, "stop string %d of %zu bytes", i, n);
        check_str(r->stop[i], "stop");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int route = data[0] & 3;
    chat_template_kind kind = (chat_template_kind)((data[0] >> 2) % CHAT_TEMPLATE_COUNT);
    size_t len = size - 1;
    char *body = malloc(len ? len : 1); /* exactly the body: ASan sees any read past it */
    FUZZ_CHECK(body != NULL, "out of memory");
    memcpy(body, data + 1, len);
    oai_error e;
    memset(&e, 0, sizeof e);
    ts_status st;
    if (route <= 1) {
        oai_kind k = route == 0 ? OAI_CHAT : OAI_COMPLETION;
        api_kind api = route == 0 && ((data[0] >> 5) & 3) == 1   ? API_RESPONSES
                       : route == 0 && ((data[0] >> 5) & 3) == 2 ? API_MESSAGES
                                                                  : API_CHAT;
        oai_request r;
        st = api == API_CHAT ? oai_parse_request(k, body, len, &r, &e)
                             : api_parse_request(api, body, len, &r, &e);
        if (st != TS_OK) {
            check_refusal(st, &e, "oai_parse_request");
        } else {
            check_request(&r, k);
            if (k == OAI_CHAT)
                render_chat(&r, kind);
        }
        oai_request_clear(&r);
    } else if (route == 2) {
        oai_tokenize_request r;
        st = oai_parse_tokenize(body, len, &r, &e);
        if (st != TS_OK) {
            check_refusal(st, &e, "oai_parse_tokenize");
        } else {
            FUZZ_CHECK(r.n_parts == 0 || r.parts != NULL, "/tokenize parts without storage");
            for (size_t i = 0; i < r.n_parts; i++)
                if (r.parts[i].text)
                    check_str(r.parts[i].text, "text");
                else
                    FUZZ_CHECK(r.parts[i].id >= 0, "/tokenize accepted a negative id");
            check_str(r.model, "model");
        }
        oai_tokenize_request_clear(&r);
    } else {
        oai_detokenize_request r;
        st = oai_parse_detokenize(body, len, &r, &e);
        if (st != TS_OK) {
            check_refusal(st, &e, "oai_parse_detokenize");
        } else {
            FUZZ_CHECK((r.n_tokens == 0) == (r.tokens == NULL), "token count and array disagree");
            for (size_t i = 0; i < r.n_tokens; i++)
                FUZZ_CHECK(r.tokens[i] >= 0, "accepted token id %d", (int)r.tokens[i]);
        }
        oai_detokenize_request_clear(&r);
    }
    free(body);
    return 0;
}
