/* pull.c: choosing and downloading a GGUF from a Hugging Face repository (pull.h). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/pull.h"
#include "common/sha256.h"

enum { PULL_MAX_LISTING = 16 << 20, PULL_ATTEMPTS = 4 };

static bool name_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '-' || ch == '_' || ch == '.';
}

bool pull_parse_ref(const char *ref, char *repo, size_t repo_cap, char *quant,
                    size_t quant_cap)
{
    size_t n = strcspn(ref, ":");
    const char *slash = memchr(ref, '/', n);
    if (!slash || slash == ref || slash + 1 == ref + n || n >= repo_cap)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ref + i != slash && !name_char(ref[i]))
            return false;
    const char *q = ref[n] == ':' ? ref + n + 1 : PULL_DEFAULT_QUANT;
    if (!*q || strlen(q) >= quant_cap)
        return false;
    for (const char *p = q; *p; p++)
        if (!name_char(*p))
            return false;
    memcpy(repo, ref, n);
    repo[n] = '\0';
    strcpy(quant, q);
    return true;
}

/* The quantization named in a GGUF file name: after the start, . or -, before . or -
 * ("K_M" is not a quantization of m.Q4_K_M.gguf). */
static bool names_quant(const char *file, const char *quant)
{
    size_t q = strlen(quant);
    for (const char *p = file; *p; p++) {
        if (p != file && p[-1] != '.' && p[-1] != '-')
            continue;
        if (!strncasecmp(p, quant, q) && (p[q] == '.' || p[q] == '-'))
            return true;
    }
    return false;
}

/* "...-00001-of-00003.gguf" */
static bool is_split(const char *file)
{
    const char *of = strstr(file, "-of-");
    return of && of - file >= 6 && of[-6] == '-' && strspn(of - 5, "0123456789") == 5 &&
           strspn(of + 4, "0123456789") == 5;
}

static bool ends_with_gguf(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && !strcasecmp(s + n - 5, ".gguf");
}

ts_status pull_pick(pull_file *out, const char *listing, size_t len, const char *quant,
                    ts_error *err)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(listing, len);
    if (!cJSON_IsArray(root)) {
        cJSON_Delete(root);
        return ts_error_set(err, TS_ERR_FORMAT, "the repository's file list is not a JSON list");
    }
    char offered[256] = "";
    int matches = 0;
    ts_status st = TS_OK;
    for (const cJSON *e = root->child; e; e = e->next) {
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(e, "lfs");
        if (!cJSON_IsString(path) || !ends_with_gguf(path->valuestring))
            continue;
        const char *base = strrchr(path->valuestring, '/');
        base = base ? base + 1 : path->valuestring;
        size_t used = strlen(offered);
        if (used + strlen(base) + 3 < sizeof offered)
            snprintf(offered + used, sizeof offered - used, "%s%s", used ? ", " : "", base);
        if (!names_quant(base, quant))
            continue;
        if (is_split(base)) {
            st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                              "%s is split into parts, which pull does not join yet", base);
            goto done;
        }
        if (++matches > 1)
            continue;
        const cJSON *lsize = lfs ? cJSON_GetObjectItemCaseSensitive(lfs, "size") : NULL;
        const cJSON *oid = lfs ? cJSON_GetObjectItemCaseSensitive(lfs, "oid") : NULL;
        const cJSON *sz = cJSON_IsNumber(lsize) ? lsize : size;
        if (strlen(path->valuestring) >= sizeof out->path || !cJSON_IsNumber(sz) ||
            sz->valuedouble < 0 || sz->valuedouble > 9e15) {
            st = ts_error_set(err, TS_ERR_FORMAT, "the file list's entry for %s is malformed",
                              base);
            goto done;
        }
        strcpy(out->path, path->valuestring);
        out->size = (uint64_t)sz->valuedouble;
        if (cJSON_IsString(oid) && strlen(oid->valuestring) == 64 &&
            strspn(oid->valuestring, "0123456789abcdef") == 64)
            strcpy(out->sha256, oid->valuestring);
    }
    if (matches == 0)
        st = ts_error_set(err, TS_ERR_NOT_FOUND, "no %s GGUF in the repository; it has: %s",
                          quant, offered[0] ? offered : "no .gguf files");
    else if (matches > 1)
        st = ts_error_set(err, TS_ERR_INVALID_ARG,
                          "%d files match %s (%s): name the quantization more exactly",
                          matches, quant, offered);
done:
    cJSON_Delete(root);
    return st;
}

typedef struct sink {
    FILE *f;          /* the .part file, or NULL for memory */
    char *buf;        /* memory */
    size_t len, cap;
    bool too_big;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    sink *s = user;
    size_t bytes = size * n;
    if (s->f)
        return fwrite(p, 1, bytes, s->f);
    if (s->len + bytes > PULL_MAX_LISTING) {
        s->too_big = true;
        return 0;
    }
    if (s->len + bytes + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 65536;
        while (cap < s->len + bytes + 1)
            cap *= 2;
        char *grown = realloc(s->buf, cap);
        if (!grown)
            return 0;
        s->buf = grown;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, bytes);
    s->len += bytes;
    s->buf[s->len] = '\0';
    return bytes;
}

typedef struct progress {
    bool on, tty;
    uint64_t base, total; /* bytes before this attempt, expected bytes */
    double t0, last;
    int last_decile;
} progress;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal, (void)ulnow;
    progress *p = user;
    double t = now_s();
    uint64_t have = p->base + (uint64_t)dlnow;
    int pct = p->total ? (int)(100.0 * (double)have / (double)p->total) : 0;
    if (!p->on || (p->tty ? t - p->last < 0.2 : pct / 10 == p->last_decile))
        return 0;
    p->last = t;
    p->last_decile = pct / 10;
    double rate = t > p->t0 ? (double)dlnow / (t - p->t0) : 0.0;
    fprintf(stderr, "%s  %3d%%  %.1f / %.1f MB  %.1f MB/s%s", p->tty ? "\r" : "", pct,
            (double)have / 1e6, (double)p->total / 1e6, rate / 1e6, p->tty ? "  " : "\n");
    return 0;
}

static CURL *new_handle(const char *url, const char *bearer_token, sink *s)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 8L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tessera-pull/0.1");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    /* a stalled transfer: under 1 KB/s for a minute */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    if (bearer_token && *bearer_token) {
        /* CURLAUTH_BEARER: libcurl sends it to the first host only, not across redirects */
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, bearer_token);
    }
    return h;
}

ts_status pull_get(const char *url, const char *bearer_token, char **body, size_t *len,
                   ts_error *err)
{
    sink s = {.f = NULL};
    CURL *h = new_handle(url, bearer_token, &s);
    if (!h)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot start libcurl");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK || !s.buf) {
        free(s.buf);
        return ts_error_set(err, TS_ERR_IO, "GET %s: %s", url,
                            s.too_big ? "larger than 16 MiB" : rc ? curl_easy_strerror(rc)
                                                                  : "empty answer");
    }
    *body = s.buf;
    *len = s.len;
    return TS_OK;
}

static ts_status file_sha256(const char *path, char out[65], ts_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_error_set(err, TS_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    sha256_ctx c;
    sha256_init(&c);
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    size_t n;
    while (buf && (n = fread(buf, 1, CHUNK, f)) > 0)
        sha256_update(&c, buf, n);
    bool bad = !buf || ferror(f);
    free(buf);
    fclose(f);
    if (bad)
        return ts_error_set(err, TS_ERR_IO, "cannot read %s", path);
    sha256_final_hex(&c, out);
    return TS_OK;
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* One attempt: appends to part from its current size. */
static CURLcode fetch_once(const char *url, const char *part, const char *bearer_token,
                           progress *pg, long *http_code)
{
    uint64_t have = file_size(part);
    sink s = {.f = fopen(part, "ab")};
    if (!s.f)
        return CURLE_WRITE_ERROR;
    CURL *h = new_handle(url, bearer_token, &s);
    if (!h) {
        fclose(s.f);
        return CURLE_OUT_OF_MEMORY;
    }
    if (have)
        curl_easy_setopt(h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)have);
    pg->base = have;
    pg->t0 = now_s();
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, pg);
    CURLcode rc = curl_easy_perform(h);
    *http_code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http_code);
    curl_easy_cleanup(h);
    if (fclose(s.f) != 0 && rc == CURLE_OK)
        rc = CURLE_WRITE_ERROR;
    return rc;
}

ts_status pull_download(const char *url, const char *dest, const pull_file *f,
                        const char *bearer_token, bool progress_on, ts_error *err)
{
    char part[4096];
    if ((size_t)snprintf(part, sizeof part, "%s.part", dest) >= sizeof part)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "path too long: %s", dest);
    progress pg = {.on = progress_on, .tty = isatty(2), .total = f->size, .last_decile = -1};
    CURLcode rc = CURLE_OK;
    long code = 0;
    for (int attempt = 0; attempt < PULL_ATTEMPTS; attempt++) {
        uint64_t have = file_size(part);
        if (have > f->size && truncate(part, 0) != 0) /* not this file: start over */
            return ts_error_set(err, TS_ERR_IO, "cannot truncate %s: %s", part, strerror(errno));
        if (have == f->size)
            break;
        if (have && progress_on)
            fprintf(stderr, "pull: resuming %s at %.1f MB\n", part, (double)have / 1e6);
        rc = fetch_once(url, part, bearer_token, &pg, &code);
        if (pg.tty && progress_on)
            fputc('\n', stderr);
        if (rc == CURLE_RANGE_ERROR && truncate(part, 0) == 0) /* cannot resume: restart */
            continue;
        if (rc == CURLE_HTTP_RETURNED_ERROR && code != 416)
            break; /* 404, 401...: no retry helps */
        if (rc == CURLE_OK && file_size(part) == f->size)
            break;
        if (rc != CURLE_OK && progress_on)
            fprintf(stderr, "pull: %s; retrying\n", curl_easy_strerror(rc));
    }
    uint64_t got = file_size(part);
    if (got != f->size) {
        if (rc == CURLE_HTTP_RETURNED_ERROR)
            return ts_error_set(err, TS_ERR_IO, "GET %s: HTTP %ld", url, code);
        return ts_error_set(err, TS_ERR_IO, "%s: got %llu of %llu bytes (%s); run pull again "
                                            "to resume",
                            part, (unsigned long long)got, (unsigned long long)f->size,
                            curl_easy_strerror(rc));
    }
    if (f->sha256[0]) {
        char sum[65];
        ts_status st = file_sha256(part, sum, err);
        if (st != TS_OK)
            return st;
        if (strcmp(sum, f->sha256)) {
            unlink(part);
            return ts_error_set(err, TS_ERR_FORMAT,
                                "%s: sha256 %s, the repository says %s; the download is "
                                "removed",
                                dest, sum, f->sha256);
        }
    }
    if (rename(part, dest) != 0)
        return ts_error_set(err, TS_ERR_IO, "cannot rename %s to %s: %s", part, dest,
                            strerror(errno));
    return TS_OK;
}
