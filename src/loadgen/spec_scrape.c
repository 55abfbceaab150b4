/* spec_scrape.c: the server's speculative-decoding counters around a level, read from its
 * Prometheus page (tessera's /metrics); servers without them are measured as before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/run_internal.h"

enum { SCRAPE_MAX_BYTES = 1 << 22, SCRAPE_TIMEOUT_S = 5 };

static size_t on_page(char *ptr, size_t size, size_t nmemb, void *ud)
{
    strbuf *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > SCRAPE_MAX_BYTES || !strbuf_add(b, ptr, n))
        return 0; /* aborts the transfer */
    return n;
}

/* Whether the label set of the sample at line (from its '{' to its '}', before next)
 * includes label; a sample without labels includes none. */
static bool has_label(const char *line, const char *next, const char *label)
{
    const char *close = line[0] == '{' ? strchr(line, '}') : NULL;
    const char *at = close ? strstr(line, label) : NULL;
    size_t n = strlen(label);
    return at && at + n <= close && (!next || close < next) && (at[-1] == '{' || at[-1] == ',');
}

bool loadgen_spec_sum(const char *page, const char *name, uint64_t *out)
{
    return loadgen_spec_sum_where(page, name, NULL, out);
}

bool loadgen_spec_sum_where(const char *page, const char *name, const char *label,
                            uint64_t *out)
{
    size_t n = strlen(name);
    bool found = false;
    uint64_t sum = 0;
    for (const char *line = page; line && *line;) {
        const char *next = strchr(line, '\n');
        if (!strncmp(line, name, n) && (line[n] == '{' || line[n] == ' ') &&
            (!label || has_label(line + n, next, label))) {
            const char *v = line[n] == ' ' ? line + n : strchr(line + n, '}');
            char *end = NULL;
            double x = v ? strtod(v + (*v == '}'), &end) : 0.0;
            if (v && end != v + (*v == '}') && x >= 0) {
                sum += (uint64_t)x;
                found = true;
            }
        }
        line = next ? next + 1 : NULL;
    }
    *out = sum;
    return found;
}

const char *loadgen_spec_source_name(int s)
{
    static const char *const names[LOADGEN_SPEC_SOURCES] = {"ngram", "draft_model"};
    return s >= 0 && s < LOADGEN_SPEC_SOURCES ? names[s] : "?";
}

bool loadgen_spec_read(const char *page, loadgen_spec_counts *out)
{
    memset(out, 0, sizeof *out);
    if (!loadgen_spec_sum(page, "tessera_spec_drafted_tokens_total", &out->drafted) ||
        !loadgen_spec_sum(page, "tessera_spec_accepted_tokens_total", &out->accepted))
        return false;
    for (int s = 0; s < LOADGEN_SPEC_SOURCES; s++) {
        char label[48];
        snprintf(label, sizeof label, "source=\"%s\"", loadgen_spec_source_name(s));
        bool d = loadgen_spec_sum_where(page, "tessera_spec_draft_tokens_total", label,
                                        &out->source_drafted[s]);
        bool a = loadgen_spec_sum_where(page, "tessera_spec_draft_accepted_tokens_total", label,
                                        &out->source_accepted[s]);
        out->by_source |= d && a;
    }
    return true;
}

bool loadgen_spec_scrape(const loadgen_runner *run, loadgen_spec_counts *out)
{
    if (!run->metrics[0])
        return false;
    CURL *e = curl_easy_init();
    strbuf page = {0};
    struct curl_slist *hdr = NULL;
    const char *key = run->key[LOADGEN_CLASS_NORMAL];
    char auth[600];
    if (key && strlen(key) < 500) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        hdr = curl_slist_append(NULL, auth);
    }
    bool ok = e && curl_easy_setopt(e, CURLOPT_URL, run->metrics) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_page) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEDATA, &page) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)SCRAPE_TIMEOUT_S) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
              (!hdr || curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdr) == CURLE_OK) &&
              curl_easy_perform(e) == CURLE_OK;
    long code = 0;
    if (ok)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    ok = ok && code == 200 && page.s && loadgen_spec_read(page.s, out);
    curl_slist_free_all(hdr);
    if (e)
        curl_easy_cleanup(e);
    strbuf_free(&page);
    return ok;
}
