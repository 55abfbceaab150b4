/* deviation.c: how a streamed completion departs from OpenAI's chunk format, checked chunk by
 * chunk so a peer's quirks are named and counted instead of ending the measurement. */
#include <stdio.h>
#include <string.h>

#include "loadgen/loadgen.h"

static const char *const dev_names[LOADGEN_DEV_COUNT] = {
    [LOADGEN_DEV_INVALID_UTF8] = "invalid_utf8_in_delta",
    [LOADGEN_DEV_SPLIT_UTF8] = "utf8_split_across_deltas",
    [LOADGEN_DEV_REPLACEMENT] = "replacement_char_in_delta",
    [LOADGEN_DEV_INVALID_JSON] = "invalid_json_event",
    [LOADGEN_DEV_ERROR_EVENT] = "error_event",
    [LOADGEN_DEV_MISSING_DONE] = "missing_done",
    [LOADGEN_DEV_MISSING_USAGE] = "missing_usage",
    [LOADGEN_DEV_MISSING_FINISH] = "missing_finish_reason",
    [LOADGEN_DEV_MISSING_FIELDS] = "missing_fields",
    [LOADGEN_DEV_EXTRA_FIELDS] = "extra_fields",
    [LOADGEN_DEV_SSE_FIELD] = "non_data_sse_field",
    [LOADGEN_DEV_AFTER_DONE] = "data_after_done",
    [LOADGEN_DEV_UNTERMINATED] = "unterminated_event",
    [LOADGEN_DEV_CONTENT_TYPE] = "content_type",
};

const char *loadgen_dev_name(loadgen_dev d)
{
    return (unsigned)d < LOADGEN_DEV_COUNT ? dev_names[d] : "unknown";
}

/* The fields of OpenAI's streamed chunks (completions and chat), NULL-terminated. Fields
 * OpenAI added later (service_tier, obfuscation) count as its own. */
static const char *const top_fields[] = {"id", "object", "created", "model", "choices", "usage",
                                         "system_fingerprint", "service_tier", "obfuscation",
                                         NULL};
static const char *const choice_fields[] = {"index", "text", "delta", "logprobs",
                                            "finish_reason", NULL};
static const char *const delta_fields[] = {"role", "content", "refusal", "tool_calls",
                                           "function_call", NULL};
static const char *const usage_fields[] = {"prompt_tokens", "completion_tokens", "total_tokens",
                                           "prompt_tokens_details", "completion_tokens_details",
                                           NULL};

static bool known(const char *const *names, const char *key)
{
    for (; *names; names++)
        if (!strcmp(*names, key))
            return true;
    return false;
}

/* Peer bytes kept for the report become printable ASCII, so the JSON stays valid UTF-8. */
static void scrub(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7E)
            *s = '?';
}

static void flag(loadgen_check *c, loadgen_dev d)
{
    c->dev |= 1u << d;
}

/* Flags the first member of object o not in names, recorded as where + its key. */
static void extra_of(loadgen_check *c, const cJSON *o, const char *const *names, const char *where)
{
    const cJSON *m;
    if (!cJSON_IsObject(o))
        return;
    cJSON_ArrayForEach(m, o) {
        if (m->string && known(names, m->string))
            continue;
        if (!(c->dev & (1u << LOADGEN_DEV_EXTRA_FIELDS))) {
            snprintf(c->extra, sizeof c->extra, "%s%s", where, m->string ? m->string : "?");
            scrub(c->extra);
        }
        flag(c, LOADGEN_DEV_EXTRA_FIELDS);
        return;
    }
}

void loadgen_check_init(loadgen_check *c, bool chat)
{
    memset(c, 0, sizeof *c);
    c->chat = chat;
}

/* Bytes a sequence led by b takes (1..4), or 0 for a byte no sequence starts with. */
static size_t lead_len(unsigned char b)
{
    return b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
}

/* Whether b may be byte k (>= 1) of the sequence led by lead (Unicode's table 3-7:
 * no overlongs, surrogates or code points past U+10FFFF). */
static bool continues(unsigned char lead, size_t k, unsigned char b)
{
    if (k == 1) {
        unsigned char lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
        unsigned char hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
        return b >= lo && b <= hi;
    }
    return b >= 0x80 && b <= 0xBF;
}

/* Scans s[0..n): -1 when a sequence is ill-formed, else the bytes of an incomplete but
 * possible sequence at the end (0 when all is whole). */
static int utf8_scan(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t len = lead_len(s[i]);
        if (!len)
            return -1;
        size_t k = 1;
        for (; k < len && i + k < n; k++)
            if (!continues(s[i], k, s[i + k]))
                return -1;
        if (k < len)
            return (int)(n - i);
        i += len;
    }
    return 0;
}

/* The delta's bytes after what the last delta left unfinished. */
static void check_text(loadgen_check *c, const char *text)
{
    size_t n = strlen(text);
    if (strstr(text, "\xEF\xBF\xBD"))
        flag(c, LOADGEN_DEV_REPLACEMENT);
    unsigned char joined[8];
    size_t head = n < 4 ? n : 4; /* enough to finish the carried sequence */
    int tail;
    if (c->n_carry > 0) {
        memcpy(joined, c->carry, c->n_carry);
        memcpy(joined + c->n_carry, text, head);
        int t = utf8_scan(joined, c->n_carry + head);
        /* The carried sequence must end inside these head bytes (or still be open). */
        if (t < 0) {
            flag(c, LOADGEN_DEV_INVALID_UTF8);
            c->n_carry = 0;
        } else if (t == (int)(c->n_carry + head) && head == n) {
            memcpy(c->carry, joined, (size_t)t); /* still open: more bytes to come */
            c->n_carry = (size_t)t;
            return;
        } else {
            size_t used = lead_len(c->carry[0]) - c->n_carry;
            flag(c, LOADGEN_DEV_SPLIT_UTF8);
            text += used;
            n -= used;
            c->n_carry = 0;
        }
    }
    tail = utf8_scan((const unsigned char *)text, n);
    if (tail < 0) {
        flag(c, LOADGEN_DEV_INVALID_UTF8);
    } else if (tail > 0) {
        memcpy(c->carry, text + n - (size_t)tail, (size_t)tail);
        c->n_carry = (size_t)tail;
    }
}

void loadgen_check_chunk(loadgen_check *c, const cJSON *j, const char *text)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (e) {
        if (!(c->dev & (1u << LOADGEN_DEV_ERROR_EVENT))) {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
            const char *msg = cJSON_IsString(m) ? m->valuestring
                              : cJSON_IsString(e) ? e->valuestring
                                                  : "(no message)";
            snprintf(c->error, sizeof c->error, "%s", msg);
            scrub(c->error);
        }
        flag(c, LOADGEN_DEV_ERROR_EVENT);
        return;
    }
    static const char *const required[] = {"id", "object", "created", "model", "choices"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!cJSON_GetObjectItemCaseSensitive(j, required[i]))
            flag(c, LOADGEN_DEV_MISSING_FIELDS);
    extra_of(c, j, top_fields, "");
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens")))
        c->usage_seen = true;
    extra_of(c, usage, usage_fields, "usage.");
    const cJSON *ch;
    cJSON_ArrayForEach(ch, cJSON_GetObjectItemCaseSensitive(j, "choices")) {
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
        if (cJSON_IsString(fr))
            c->finish_seen = true;
        if (!fr || !cJSON_GetObjectItemCaseSensitive(ch, "index") ||
            !cJSON_GetObjectItemCaseSensitive(ch, c->chat ? "delta" : "text"))
            flag(c, LOADGEN_DEV_MISSING_FIELDS);
        extra_of(c, ch, choice_fields, "choices[].");
        if (c->chat)
            extra_of(c, cJSON_GetObjectItemCaseSensitive(ch, "delta"), delta_fields,
                     "choices[].delta.");
    }
    if (text && text[0])
        check_text(c, text);
}

void loadgen_check_end(loadgen_check *c)
{
    if (c->n_carry > 0)
        flag(c, LOADGEN_DEV_INVALID_UTF8); /* a character the stream never finished */
    c->n_carry = 0;
    if (!c->finish_seen)
        flag(c, LOADGEN_DEV_MISSING_FINISH);
    if (!c->usage_seen)
        flag(c, LOADGEN_DEV_MISSING_USAGE);
}
