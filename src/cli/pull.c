/* pull.c: choosing and downloading a GGUF from a Hugging Face repository (pull.h). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli/pull.h"
#include "common/sha256.h"
#include "server/utf8.h"

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

/* A name with a byte a terminal would act on (an ESC, a newline, DEL). */
static bool has_controls(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
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
        const char *raw = strrchr(path->valuestring, '/');
        raw = raw ? raw + 1 : path->valuestring;
        char base[256]; /* for messages: a listing's names may hold any byte */
        utf8_escape_controls(base, sizeof base, raw);
        size_t used = strlen(offered);
        if (used + strlen(base) + 3 < sizeof offered)
            snprintf(offered + used, sizeof offered - used, "%s%s", used ? ", " : "", base);
        if (!names_quant(raw, quant))
            continue;
        if (has_controls(path->valuestring)) {
            st = ts_error_set(err, TS_ERR_FORMAT, "the file name %s holds control characters",
                              base);
            goto done;
        }
        if (is_split(raw)) {
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
        if (sz->valuedouble > (double)PULL_MAX_SIZE) {
            st = ts_error_set(err, TS_ERR_TOO_LONG,
                              "%s is listed at %.0f bytes, over pull's bound of %llu", base,
                              sz->valuedouble, (unsigned long long)PULL_MAX_SIZE);
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
    int fd;           /* the .part file, or -1 for memory */
    uint64_t at;      /* bytes in the file */
    uint64_t limit;   /* the most the file may hold: its listed size */
    char *buf;        /* memory */
    size_t len, cap;
    bool too_big;     /* the body ran past limit (or PULL_MAX_LISTING in memory) */
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    sink *s = user;
    size_t bytes = size * n;
    if (s->fd >= 0) {
        if (bytes > s->limit - s->at) {
            s->too_big = true;
            return 0;
        }
        for (size_t off = 0; off < bytes;) {
            ssize_t w = write(s->fd, p + off, bytes - off);
            if (w < 0 && errno != EINTR)
                return 0;
            off += w > 0 ? (size_t)w : 0;
        }
        s->at += bytes;
        return bytes;
    }
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

static CURL *new_handle(const char *url, const char *bearer_token, int stall_s, sink *s)
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
    /* a stalled transfer, a slow drip included: under PULL_MIN_RATE for stall_s */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)PULL_MIN_RATE);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)stall_s);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    if (bearer_token && *bearer_token) {
        /* CURLAUTH_BEARER: libcurl sends it to the first host only, not across redirects */
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, bearer_token);
    }
    return h;
}

/* Failures that mean the hub did not answer at all (no name, no route, no TLS), where the
 * fix is another endpoint or the network rather than a retry. */
static bool unreachable(CURLcode rc)
{
    return rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
           rc == CURLE_COULDNT_CONNECT || rc == CURLE_SSL_CONNECT_ERROR ||
           rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_UNSUPPORTED_PROTOCOL;
}

#define PULL_UNREACHABLE_HINT                                                                  \
    "; the hub is $HF_ENDPOINT or --endpoint (default https://huggingface.co): check the "      \
    "network or point either at a reachable hub or mirror"

ts_status pull_get(const char *url, const char *bearer_token, char **body, size_t *len,
                   ts_error *err)
{
    sink s = {.fd = -1};
    CURL *h = new_handle(url, bearer_token, PULL_STALL_S, &s);
    if (!h)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot start libcurl");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK || !s.buf) {
        free(s.buf);
        return ts_error_set(err, TS_ERR_IO, "GET %s: %s%s", url,
                            s.too_big ? "larger than 16 MiB" : rc ? curl_easy_strerror(rc)
                                                                  : "empty answer",
                            unreachable(rc) ? PULL_UNREACHABLE_HINT : "");
    }
    *body = s.buf;
    *len = s.len;
    return TS_OK;
}

static uint64_t fd_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Whether the open file fd is f (pull_verify); name is for messages. */
static ts_status verify_fd(int fd, const char *name, const pull_file *f, ts_error *err)
{
    uint64_t size = fd_size(fd);
    if (size != f->size)
        return ts_error_set(err, TS_ERR_FORMAT, "%s is %llu bytes, the repository lists %llu",
                            name, (unsigned long long)size, (unsigned long long)f->size);
    char magic[4];
    if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, "GGUF", 4))
        return ts_error_set(err, TS_ERR_FORMAT, "%s is not a GGUF file (no GGUF magic)", name);
    if (!f->sha256[0])
        return TS_OK;
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot hash %s", name);
    sha256_ctx c;
    sha256_init(&c);
    ssize_t n;
    for (off_t at = 0; (n = pread(fd, buf, CHUNK, at)) > 0; at += n)
        sha256_update(&c, buf, (size_t)n);
    free(buf);
    if (n < 0)
        return ts_error_set(err, TS_ERR_IO, "cannot read %s: %s", name, strerror(errno));
    char sum[65];
    sha256_final_hex(&c, sum);
    if (strcmp(sum, f->sha256))
        return ts_error_set(err, TS_ERR_FORMAT, "%s: sha256 %s, the repository says %s", name,
                            sum, f->sha256);
    return TS_OK;
}

ts_status pull_verify(const char *path, const pull_file *f, ts_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ts_error_set(err, TS_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    ts_status st = verify_fd(fd, path, f, err);
    close(fd);
    return st;
}

/* One attempt: appends to fd from its current size, never past limit bytes in all;
 * *too_big when the body would have gone past. */
static CURLcode fetch_once(const char *url, int fd, uint64_t limit, const pull_options *o,
                           progress *pg, long *http_code, bool *too_big)
{
    uint64_t have = fd_size(fd);
    sink s = {.fd = fd, .at = have, .limit = limit};
    if (lseek(fd, 0, SEEK_END) < 0)
        return CURLE_WRITE_ERROR;
    CURL *h = new_handle(url, o->bearer_token, o->stall_s > 0 ? o->stall_s : PULL_STALL_S, &s);
    if (!h)
        return CURLE_OUT_OF_MEMORY;
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
    *too_big = s.too_big;
    return rc;
}

/* Why an attempt failed, in words. */
static const char *why(CURLcode rc, long code, int stall_s, char *buf, size_t cap)
{
    if (rc == CURLE_OPERATION_TIMEDOUT && code) /* the answer began, then slowed */
        snprintf(buf, cap, "the transfer stalled: under %d KiB/s for %d s", PULL_MIN_RATE >> 10,
                 stall_s);
    else
        snprintf(buf, cap, "%s%s", curl_easy_strerror(rc),
                 unreachable(rc) ? PULL_UNREACHABLE_HINT : "");
    return buf;
}

/* The .part file, opened for writing into *fd: never through a symbolic link, never
 * anything but a regular file. */
static ts_status open_part(const char *part, int *fd, ts_error *err)
{
    *fd = open(part, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (*fd < 0)
        return errno == ELOOP ? ts_error_set(err, TS_ERR_IO, "%s is a symbolic link; pull does "
                                                             "not write through one",
                                             part)
                              : ts_error_set(err, TS_ERR_IO, "cannot open %s: %s", part,
                                             strerror(errno));
    struct stat st;
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(*fd);
        *fd = -1;
        return ts_error_set(err, TS_ERR_IO, "%s is not a regular file", part);
    }
    return TS_OK;
}

/* The loop of attempts into fd; *too_big when the server sent more than f->size. Returns
 * the last failure that says more than "cannot resume" (a stall, a dropped connection). */
static CURLcode fetch_all(const char *url, int fd, const pull_file *f, const pull_options *o,
                          long *code, bool *too_big)
{
    int stall_s = o->stall_s > 0 ? o->stall_s : PULL_STALL_S;
    progress pg = {.on = o->progress, .tty = isatty(2), .total = f->size, .last_decile = -1};
    CURLcode rc = CURLE_OK, told = CURLE_OK;
    long told_code = 0;
    char reason[320];
    *too_big = false;
    for (int attempt = 0; attempt < PULL_ATTEMPTS; attempt++) {
        uint64_t have = fd_size(fd);
        if (have > f->size && ftruncate(fd, 0) != 0) /* not this file: start over */
            return CURLE_WRITE_ERROR;
        if (have == f->size)
            break;
        if (have && o->progress)
            fprintf(stderr, "pull: resuming at %.1f MB\n", (double)have / 1e6);
        rc = fetch_once(url, fd, f->size, o, &pg, code, too_big);
        if (pg.tty && o->progress)
            fputc('\n', stderr);
        if (*too_big)
            break;
        if (rc != CURLE_RANGE_ERROR) {
            told = rc;
            told_code = *code;
        }
        if (rc == CURLE_RANGE_ERROR && ftruncate(fd, 0) == 0) /* cannot resume: restart */
            continue;
        if (rc == CURLE_HTTP_RETURNED_ERROR && *code != 416)
            break; /* 404, 401...: no retry helps */
        if (rc == CURLE_OK && fd_size(fd) == f->size)
            break;
        if (rc != CURLE_OK && o->progress)
            fprintf(stderr, "pull: %s; retrying\n", why(rc, *code, stall_s, reason, sizeof reason));
    }
    if (rc == CURLE_RANGE_ERROR && told != CURLE_OK) {
        *code = told_code;
        return told;
    }
    return rc;
}

ts_status pull_download(const char *url, const char *dest, const pull_file *f,
                        const pull_options *o, ts_error *err)
{
    char part[4096], reason[320];
    if ((size_t)snprintf(part, sizeof part, "%s.part", dest) >= sizeof part)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "path too long: %s", dest);
    int fd;
    ts_status st = open_part(part, &fd, err);
    if (st != TS_OK)
        return st;
    uint64_t have = fd_size(fd);
    struct statvfs vfs;
    if (have < f->size && fstatvfs(fd, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < f->size - have) {
        st = ts_error_set(err, TS_ERR_IO, "%s needs %.1f MB more, its disk has %.1f MB free",
                          dest, (double)(f->size - have) / 1e6,
                          (double)vfs.f_bavail * (double)vfs.f_frsize / 1e6);
        goto out;
    }
    long code = 0;
    bool too_big;
    CURLcode rc = fetch_all(url, fd, f, o, &code, &too_big);
    if (too_big) {
        unlink(part);
        st = ts_error_set(err, TS_ERR_FORMAT, "%s: the server sent more than the listed %llu "
                                              "bytes; the download is removed",
                          dest, (unsigned long long)f->size);
        goto out;
    }
    uint64_t got = fd_size(fd);
    if (got != f->size) {
        int stall_s = o->stall_s > 0 ? o->stall_s : PULL_STALL_S;
        if (rc == CURLE_HTTP_RETURNED_ERROR)
            st = ts_error_set(err, TS_ERR_IO, "GET %s: HTTP %ld", url, code);
        else
            st = ts_error_set(err, TS_ERR_IO, "%s: got %llu of %llu bytes (%s); run pull "
                                              "again to resume",
                              part, (unsigned long long)got, (unsigned long long)f->size,
                              why(rc, code, stall_s, reason, sizeof reason));
        goto out;
    }
    if ((st = verify_fd(fd, dest, f, err)) != TS_OK) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
        unlink(part);
        ts_error_set(err, st, "%s; the download is removed", msg);
        goto out;
    }
    if (rename(part, dest) != 0)
        st = ts_error_set(err, TS_ERR_IO, "cannot rename %s to %s: %s", part, dest,
                          strerror(errno));
out:
    close(fd);
    return st;
}
