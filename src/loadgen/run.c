/* run.c: the closed-loop load run: one thread, one libcurl multi handle, C transfers in
 * flight, every byte timestamped as its write callback sees it. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/strbuf.h"
#include "loadgen/loadgen.h"
#include "loadgen/run_internal.h"

enum { MAX_BODY = 8 << 20, MAX_EVENT = 1 << 20 };

void loadgen_config_default(loadgen_config *cfg)
{
    static const int one = 1;
    memset(cfg, 0, sizeof *cfg);
    cfg->url = "http://127.0.0.1:8080";
    cfg->levels = &one;
    cfg->n_levels = 1;
    cfg->requests = 16;
    cfg->prompt_len = 64;
    cfg->max_tokens = 64;
    cfg->ignore_eos = true;
    cfg->timeout_s = 300;
    cfg->deadline_s = 900;
    cfg->seed = 1;
    cfg->batch = 1;
}

const char *loadgen_error_name(int code, char *buf, size_t cap)
{
    switch (code) {
    case LOADGEN_ERR_TRANSPORT: return "transport";
    case LOADGEN_ERR_TIMEOUT: return "timeout";
    case LOADGEN_ERR_BAD_RESPONSE: return "bad_response";
    case LOADGEN_ERR_STREAM: return "stream_error";
    case LOADGEN_ERR_DEADLINE: return "deadline";
    case LOADGEN_ERR_TRUNCATED: return "truncated_stream";
    default: snprintf(buf, cap, "%d", code); return buf;
    }
}

double loadgen_uniform(uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

void loadgen_acc_gap(loadgen_acc *a, int cls, double ms)
{
    loadgen_gaps *g[2] = {&a->all, &a->cls[cls]};
    for (int i = 0; i < 2; i++) {
        if (g[i]->n == g[i]->cap) {
            size_t cap = g[i]->cap ? 2 * g[i]->cap : 1024;
            double *v = realloc(g[i]->v, cap * sizeof *v);
            if (!v) {
                a->nomem = true;
                return;
            }
            g[i]->v = v;
            g[i]->cap = cap;
        }
        g[i]->v[g[i]->n++] = ms;
    }
}

/* ---- One transfer ----------------------------------------------------------------- */

typedef struct transfer {
    CURL *easy;
    struct curl_slist *headers;
    char *body;          /* request body; owned */
    loadgen_request *req;     /* its record in the level; borrowed */
    loadgen_acc *acc;   /* where ITL gaps and notes go; borrowed */
    const loadgen_config *cfg; /* borrowed */
    int index, conc;     /* request number in the level, the level's concurrency */
    bool stream, chat;
    loadgen_sse sse;
    loadgen_check check; /* stream conformance */
    strbuf resp;         /* non-stream response body */
    strbuf raw;          /* headers and body as received, when cfg->save_dir is set */
    bool too_big, got_done, got_usage, stream_error;
    double t_last;       /* the last content chunk */
} transfer;

static void transfer_free(transfer *t)
{
    if (!t)
        return;
    if (t->easy)
        curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    free(t->body);
    strbuf_free(&t->resp);
    strbuf_free(&t->raw);
    loadgen_sse_free(&t->sse);
    free(t);
}

/* One parsed JSON chunk: content timestamps and usage. */
static void on_chunk(transfer *t, const cJSON *j, double now)
{
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
    const cJSON *text = t->chat ? cJSON_GetObjectItemCaseSensitive(
                                      cJSON_GetObjectItemCaseSensitive(c0, "delta"), "content")
                                : cJSON_GetObjectItemCaseSensitive(c0, "text");
    if (t->stream)
        loadgen_check_chunk(&t->check, j, cJSON_IsString(text) ? text->valuestring : NULL);
    if (cJSON_GetObjectItemCaseSensitive(j, "error")) {
        t->stream_error = true;
        return;
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
    if (t->cfg->embed) { /* a vector per document, and the tokens embedded */
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
        if (cJSON_IsNumber(pt) && cJSON_GetArraySize(data) == t->cfg->batch) {
            t->got_usage = true;
            t->req->prompt_tokens = (long)pt->valuedouble;
        }
        return;
    }
    if (cJSON_IsNumber(ct)) {
        t->got_usage = true;
        t->req->tokens = (long)ct->valuedouble;
        t->req->prompt_tokens = cJSON_IsNumber(pt) ? (long)pt->valuedouble : 0;
    }
    if (!cJSON_IsString(text) || !text->valuestring[0])
        return;
    if (t->req->t_first < 0)
        t->req->t_first = now;
    else
        loadgen_acc_gap(t->acc, t->req->cls, (now - t->t_last) * 1e3);
    t->t_last = now;
    t->req->chunks++;
}

static bool on_event(void *ctx, const char *data, size_t len)
{
    transfer *t = ctx;
    if (t->got_done)
        t->check.dev |= 1u << LOADGEN_DEV_AFTER_DONE;
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        t->got_done = true;
        return true;
    }
    cJSON *j = cJSON_ParseWithLength(data, len);
    if (!j) {
        t->check.dev |= 1u << LOADGEN_DEV_INVALID_JSON; /* skipped: the rest still counts */
        return true;
    }
    on_chunk(t, j, clock_now_s());
    cJSON_Delete(j);
    return true;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    transfer *t = ud;
    size_t n = size * nmemb;
    if (t->cfg->save_dir && t->raw.len + n <= MAX_BODY)
        strbuf_add(&t->raw, ptr, n); /* evidence only: a failed copy loses nothing else */
    long code = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
    if (t->stream && code == 200) {
        ts_status st = loadgen_sse_feed(&t->sse, ptr, n, on_event, t, NULL);
        if (st != TS_OK) {
            t->stream_error = true;
            return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
        }
        return n;
    }
    if (t->resp.len + n > MAX_BODY || !strbuf_add(&t->resp, ptr, n)) {
        t->too_big = true;
        return 0;
    }
    return n;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    transfer *t = ud;
    size_t n = size * nmemb;
    if (t->raw.len + n <= MAX_BODY)
        strbuf_add(&t->raw, ptr, n);
    return n;
}

/* {"model"?, "input": [batch documents]}: each document the prefix and its own words. */
static char *embed_body(const loadgen_config *cfg, const char *prefix, uint64_t seed)
{
    cJSON *root = cJSON_CreateObject(), *input = cJSON_AddArrayToObject(root, "input");
    char *out = NULL;
    if (!input || (cfg->model && !cJSON_AddStringToObject(root, "model", cfg->model)))
        goto done;
    for (int k = 0; k < cfg->batch; k++) {
        char *words = loadgen_words(cfg->prompt_len, seed * 4099u + (uint64_t)k);
        size_t len = words ? strlen(prefix) + strlen(words) + 2 : 0;
        char *doc = words ? malloc(len) : NULL;
        if (doc)
            snprintf(doc, len, "%s%s%s", prefix, *prefix && *words ? " " : "", words);
        cJSON *s = doc ? cJSON_CreateString(doc) : NULL;
        free(words);
        free(doc);
        if (!s || !cJSON_AddItemToArray(input, s)) {
            cJSON_Delete(s);
            goto done;
        }
    }
    out = cJSON_PrintUnformatted(root);
done:
    cJSON_Delete(root);
    return out;
}

/* The JSON body of request i of a level. */
static char *request_body(const loadgen_config *cfg, const char *prefix, uint64_t seed)
{
    if (cfg->embed)
        return embed_body(cfg, prefix, seed);
    char *words = loadgen_words(cfg->prompt_len, seed);
    cJSON *root = cJSON_CreateObject();
    char *out = NULL, *prompt = NULL;
    if (!words || !root)
        goto done;
    size_t plen = strlen(prefix) + strlen(words) + 2;
    if (!(prompt = malloc(plen)))
        goto done;
    snprintf(prompt, plen, "%s%s%s", prefix, *prefix && *words ? " " : "", words);
    if (cfg->model && !cJSON_AddStringToObject(root, "model", cfg->model))
        goto done;
    if (cfg->chat) {
        cJSON *msgs = cJSON_AddArrayToObject(root, "messages"), *m = cJSON_CreateObject();
        if (!m || !msgs || !cJSON_AddItemToArray(msgs, m)) {
            cJSON_Delete(m);
            goto done;
        }
        if (!cJSON_AddStringToObject(m, "role", "user") ||
            !cJSON_AddStringToObject(m, "content", prompt))
            goto done;
    } else if (!cJSON_AddStringToObject(root, "prompt", prompt)) {
        goto done;
    }
    if (!cJSON_AddNumberToObject(root, "max_tokens", cfg->max_tokens) ||
        !cJSON_AddNumberToObject(root, "temperature", cfg->temperature) ||
        !cJSON_AddNumberToObject(root, "seed", (double)(seed & 0xffffffffu)) ||
        (cfg->ignore_eos && !cJSON_AddBoolToObject(root, "ignore_eos", 1)))
        goto done;
    if (cfg->stream) {
        cJSON *so;
        if (!cJSON_AddBoolToObject(root, "stream", 1) ||
            !(so = cJSON_AddObjectToObject(root, "stream_options")) ||
            !cJSON_AddBoolToObject(so, "include_usage", 1))
            goto done;
    }
    out = cJSON_PrintUnformatted(root);
done:
    free(words);
    free(prompt);
    cJSON_Delete(root);
    return out;
}

static transfer *transfer_start(const loadgen_runner *run, loadgen_request *req, loadgen_acc *acc,
                                int index, int conc, uint64_t seed, ts_error *err)
{
    const loadgen_config *cfg = run->cfg;
    transfer *t = calloc(1, sizeof *t);
    if (!t) {
        ts_error_set(err, TS_ERR_NOMEM, "loadgen: out of memory");
        return NULL;
    }
    t->req = req;
    t->acc = acc;
    t->cfg = cfg;
    t->index = index;
    t->conc = conc;
    t->stream = cfg->stream;
    t->chat = cfg->chat;
    loadgen_sse_init(&t->sse, MAX_EVENT);
    loadgen_check_init(&t->check, cfg->chat);
    char auth[600];
    const char *key = run->key[req->cls];
    if (!(t->body = request_body(cfg, run->prefix, seed)) || !(t->easy = curl_easy_init()) ||
        !(t->headers = curl_slist_append(NULL, "Content-Type: application/json")) ||
        (key && (snprintf(auth, sizeof auth, "Authorization: Bearer %s", key) >= (int)sizeof auth ||
                 !curl_slist_append(t->headers, auth))))
        goto fail;
    CURL *e = t->easy;
    long timeout_ms = (long)(cfg->timeout_s * 1e3);
    if (curl_easy_setopt(e, CURLOPT_URL, run->endpoint) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROXY, "") != CURLE_OK || /* never through a proxy */
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, t) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PRIVATE, t) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) != CURLE_OK ||
        (cfg->save_dir && (curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
                           curl_easy_setopt(e, CURLOPT_HEADERDATA, t) != CURLE_OK)))
        goto fail;
    req->t_send = clock_now_s();
    if (curl_multi_add_handle(run->multi, e) != CURLM_OK)
        goto fail;
    return t;
fail:
    ts_error_set(err, TS_ERR_NOMEM, "loadgen: cannot set up a request (out of memory?)");
    transfer_free(t);
    return NULL;
}

/* The end of a 200 stream: what the parser still held, and the stream-wide checks. */
static void stream_end(transfer *t, CURLcode rc)
{
    bool pending = false;
    if (rc == CURLE_OK && loadgen_sse_finish(&t->sse, &pending, on_event, t, NULL) != TS_OK)
        t->stream_error = true;
    loadgen_check *c = &t->check;
    if (pending)
        c->dev |= 1u << LOADGEN_DEV_UNTERMINATED;
    if (t->sse.other_fields > 0)
        c->dev |= 1u << LOADGEN_DEV_SSE_FIELD;
    if (!t->got_done)
        c->dev |= 1u << LOADGEN_DEV_MISSING_DONE;
    const char *ct = NULL;
    curl_easy_getinfo(t->easy, CURLINFO_CONTENT_TYPE, &ct);
    if (!ct || strncasecmp(ct, "text/event-stream", 17))
        c->dev |= 1u << LOADGEN_DEV_CONTENT_TYPE;
    loadgen_check_end(c);
    t->req->dev = c->dev;
    loadgen_acc *a = t->acc;
    if (c->error[0] && !a->error_sample[0])
        snprintf(a->error_sample, sizeof a->error_sample, "%s", c->error);
    if (c->extra[0]) {
        int k = 0;
        while (k < a->n_extra && strcmp(a->extra[k], c->extra))
            k++;
        if (k == a->n_extra && k < LOADGEN_MAX_NOTES)
            snprintf(a->extra[a->n_extra++], sizeof a->extra[0], "%s", c->extra);
    }
}

/* Writes the raw response of a failed or deviating request to save_dir as
 * c<conc>-r<index>-<why>.txt: 8 failed and 4 deviating (only) per level. */
static void save_raw(transfer *t)
{
    const loadgen_request *r = t->req;
    loadgen_acc *a = t->acc;
    char why[32], code[16], path[1024];
    if (!r->ok) {
        if (a->saved_failed >= 8)
            return;
        snprintf(why, sizeof why, "%s", loadgen_error_name(r->error, code, sizeof code));
        a->saved_failed++;
    } else {
        int d = 0;
        while (d < LOADGEN_DEV_COUNT && !(r->dev & (1u << d)))
            d++;
        if (d == LOADGEN_DEV_COUNT || a->saved_dev >= 4)
            return;
        snprintf(why, sizeof why, "%s", loadgen_dev_name((loadgen_dev)d));
        a->saved_dev++;
    }
    snprintf(path, sizeof path, "%s/c%d-r%d-%s.txt", t->cfg->save_dir, t->conc, t->index, why);
    FILE *f = fopen(path, "wb");
    if (!f)
        return; /* evidence is best effort: the measurement stands without it */
    if (t->raw.len)
        fwrite(t->raw.s, 1, t->raw.len, f);
    fclose(f);
}

/* Classifies a finished transfer into its record. */
static void transfer_finish(transfer *t, CURLcode rc)
{
    loadgen_request *r = t->req;
    r->t_done = clock_now_s();
    long code = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
    r->done = true;
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        r->error = LOADGEN_ERR_TIMEOUT;
    } else if (code != 200) {
        r->error = code >= 100 ? (int)code : LOADGEN_ERR_TRANSPORT;
    } else if (t->stream) {
        stream_end(t, rc);
        const loadgen_check *c = &t->check;
        bool ended = t->got_done || c->finish_seen || c->usage_seen;
        r->error = t->stream_error         ? LOADGEN_ERR_STREAM
                   : rc != CURLE_OK        ? LOADGEN_ERR_TRANSPORT
                   : !ended                ? LOADGEN_ERR_TRUNCATED
                                           : 1;
        if (r->error == 1 && !t->got_usage)
            r->tokens = r->chunks; /* missing_usage: one token per content chunk */
    } else if (rc != CURLE_OK) {
        r->error = t->too_big ? LOADGEN_ERR_BAD_RESPONSE : LOADGEN_ERR_TRANSPORT;
    } else {
        cJSON *j = cJSON_ParseWithLength(t->resp.s ? t->resp.s : "", t->resp.len);
        if (j)
            on_chunk(t, j, r->t_done);
        cJSON_Delete(j);
        r->error = t->got_usage && !t->stream_error ? 1 : LOADGEN_ERR_BAD_RESPONSE;
        r->t_first = r->t_done;
    }
    if (r->error == 1) {
        r->ok = true;
        r->error = 0;
    }
    if (t->cfg->save_dir && (!r->ok || r->dev))
        save_raw(t);
}

/* ---- One level ------------------------------------------------------------------ */

ts_status loadgen_run_level(loadgen_runner *run, int level, loadgen_request *reqs, loadgen_acc *acc,
                       ts_error *err)
{
    const loadgen_config *cfg = run->cfg;
    int conc = cfg->levels[level], n = cfg->requests;
    transfer **live = calloc((size_t)conc, sizeof *live);
    if (!live)
        return ts_error_set(err, TS_ERR_NOMEM, "loadgen: out of memory");
    ts_status st = TS_OK;
    int started = 0, done = 0, in_flight = 0;
    while (done < started || started < n) {
        while (in_flight < conc && started < n && clock_now_s() < run->deadline) {
            int slot = 0;
            while (live[slot])
                slot++;
            loadgen_request *r = &reqs[started];
            uint64_t seed = cfg->seed * 1000003u + (uint64_t)level * 7919u * 1000003u +
                            (uint64_t)started + 1;
            r->cls = run->mixed ? loadgen_mix_pick(cfg->mix, loadgen_uniform(seed)) : LOADGEN_CLASS_NORMAL;
            r->t_first = -1;
            if (!(live[slot] = transfer_start(run, r, acc, started, conc, seed, err))) {
                st = err ? err->status : TS_ERR_NOMEM;
                goto out;
            }
            started++;
            in_flight++;
        }
        if (clock_now_s() >= run->deadline) {
            run->deadline_hit = true;
            break;
        }
        int running = 0;
        curl_multi_perform(run->multi, &running);
        CURLMsg *msg;
        int left = 0;
        while ((msg = curl_multi_info_read(run->multi, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            transfer *t = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
            transfer_finish(t, msg->data.result);
            curl_multi_remove_handle(run->multi, t->easy);
            for (int s = 0; s < conc; s++)
                if (live[s] == t)
                    live[s] = NULL;
            transfer_free(t);
            in_flight--;
            done++;
        }
        if (done == n)
            break;
        double wait = run->deadline - clock_now_s();
        int wait_ms = wait <= 0 ? 0 : wait > 1.0 ? 1000 : (int)(wait * 1e3) + 1;
        if (in_flight > 0)
            curl_multi_poll(run->multi, NULL, 0, wait_ms, NULL);
    }
out:
    for (int s = 0; s < conc; s++) {
        if (!live[s])
            continue;
        live[s]->req->done = true;
        live[s]->req->error = LOADGEN_ERR_DEADLINE;
        live[s]->req->t_done = clock_now_s();
        curl_multi_remove_handle(run->multi, live[s]->easy);
        transfer_free(live[s]);
    }
    free(live);
    return st;
}
