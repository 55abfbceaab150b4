/* log.c: log lines and request ids (log.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/log.h"

static bool id_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '.' || ch == ':';
}

/* splitmix64's finalizer: a bijection, so distinct inputs give distinct ids. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void srv_request_id(char out[SRV_REQUEST_ID_CAP], const char *client, uint64_t fresh)
{
    size_t n = 0;
    if (client)
        while (n < SRV_REQUEST_ID_CAP && client[n] && id_char(client[n]))
            n++;
    if (client && n > 0 && n < SRV_REQUEST_ID_CAP && !client[n]) {
        memcpy(out, client, n + 1);
        return;
    }
    snprintf(out, SRV_REQUEST_ID_CAP, "%016llx", (unsigned long long)mix(fresh));
}

static void iso_now(char out[32])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

static void log_json(const ts_server_options *opts, const srv_log_entry *e, const char *time)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "time", time) &&
              (!e->request_id || cJSON_AddStringToObject(o, "request_id", e->request_id)) &&
              (!e->model || cJSON_AddStringToObject(o, "model", e->model));
    if (ok && e->method)
        ok = cJSON_AddStringToObject(o, "method", e->method) &&
             cJSON_AddStringToObject(o, "path", e->path ? e->path : "") &&
             cJSON_AddNumberToObject(o, "status", e->status) &&
             cJSON_AddNumberToObject(o, "prompt_tokens", e->prompt_tokens) &&
             cJSON_AddNumberToObject(o, "completion_tokens", e->completion_tokens) &&
             cJSON_AddNumberToObject(o, "duration_ms", (double)(long long)(e->duration_ms * 10) / 10);
    if (ok && e->error_code)
        ok = cJSON_AddStringToObject(o, "error_code", e->error_code) != NULL;
    if (ok && e->error_param)
        ok = cJSON_AddStringToObject(o, "error_param", e->error_param) != NULL;
    if (ok && e->message)
        ok = cJSON_AddStringToObject(o, "message", e->message) != NULL;
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (line)
        opts->log(opts->log_user, line);
    else
        opts->log(opts->log_user, "{\"message\":\"out of memory formatting a log line\"}");
    free(line);
}

void srv_log(const ts_server_options *opts, const srv_log_entry *e)
{
    if (!opts->log)
        return;
    char time[32];
    iso_now(time);
    if (opts->log_json) {
        log_json(opts, e, time);
        return;
    }
    char line[1024];
    int n = snprintf(line, sizeof line, "%s req=%s model=%s ", time,
                     e->request_id ? e->request_id : "-", e->model ? e->model : "-");
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    if (e->method)
        snprintf(line + n, sizeof line - (size_t)n,
                 "%s %s %d prompt_tokens=%d completion_tokens=%d %.1fms%s%s%s%s%s%s%s", e->method,
                 e->path ? e->path : "", e->status, e->prompt_tokens, e->completion_tokens,
                 e->duration_ms, e->error_code ? " error=" : "", e->error_code ? e->error_code : "",
                 e->error_param ? " param=" : "", e->error_param ? e->error_param : "",
                 e->message ? " (" : "", e->message ? e->message : "", e->message ? ")" : "");
    else
        snprintf(line + n, sizeof line - (size_t)n, "%s", e->message ? e->message : "");
    opts->log(opts->log_user, line);
}
