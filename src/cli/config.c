/* config.c: serve's JSON config file (config.h) turned into command-line arguments. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/config.h"

enum { CONFIG_MAX_FILE = 1 << 20 };

typedef enum value_kind {
    VALUE_STRING, /* a JSON string, passed as is */
    VALUE_PATH,   /* a string; relative to the config file's directory */
    VALUE_NUMBER, /* a JSON number */
    VALUE_SIZE,   /* a number of bytes, or a string such as "512M" */
    VALUE_FLAG,   /* true gives the option, false nothing */
    VALUE_NOT,    /* false gives the option, true nothing */
} value_kind;

typedef struct config_key {
    const char *key, *option;
    value_kind kind;
} config_key;

static const config_key top_keys[] = {
    {"host", "--host", VALUE_STRING},
    {"port", "--port", VALUE_NUMBER},
    {"model_dir", "--model-dir", VALUE_PATH},
    {"tokenizer", "--tokenizer", VALUE_PATH},
    {"chat_template", "--chat-template", VALUE_STRING},
    {"api_keys", "--api-keys", VALUE_PATH},
    {"protect_metrics", "--protect-metrics", VALUE_FLAG},
    {"log_format", "--log-format", VALUE_STRING},
    {"allowed_hosts", "--allowed-hosts", VALUE_STRING},
    {"cors", "--cors", VALUE_STRING},
    {NULL, NULL, VALUE_STRING},
};

static const config_key limit_keys[] = {
    {"max_body", "--max-body", VALUE_SIZE},
    {"max_connections", "--max-connections", VALUE_NUMBER},
    {"max_buffered", "--max-buffered", VALUE_SIZE},
    {"grace", "--grace", VALUE_NUMBER},
    {"max_answer", "--max-answer", VALUE_SIZE},
    {"max_answers_total", "--max-answers-total", VALUE_SIZE},
    {"read_timeout", "--read-timeout", VALUE_NUMBER},
    {"max_per_address", "--max-per-address", VALUE_NUMBER},
    {NULL, NULL, VALUE_STRING},
};

static const config_key engine_keys[] = {
    {"threads", "--threads", VALUE_NUMBER},
    {"kv_mem", "--kv-mem", VALUE_SIZE},
    {"kv_type", "--kv-type", VALUE_STRING},
    {"kv_f16", "--kv-f16", VALUE_FLAG},
    {"max_seqs", "--max-seqs", VALUE_NUMBER},
    {"max_queue", "--max-queue", VALUE_NUMBER},
    {"step_tokens", "--step-tokens", VALUE_NUMBER},
    {"prefill_cap", "--prefill-cap", VALUE_NUMBER},
    {"aging", "--aging", VALUE_NUMBER},
    {"prefix_cache", "--no-prefix-cache", VALUE_NOT},
    {"spec", "--spec", VALUE_STRING},
    {"spec_max", "--spec-max", VALUE_NUMBER},
    {"spec_rows", "--spec-rows", VALUE_NUMBER},
    {"spec_eager", "--spec-eager", VALUE_FLAG},
    {"draft_vocab", "--draft-vocab", VALUE_NUMBER},
    {"draft_model", "--draft-model", VALUE_PATH},
    {NULL, NULL, VALUE_STRING},
};

typedef struct builder {
    cli_config *c;
    int cap;
    const char *file; /* for messages */
    char dir[4096];   /* the config file's directory, "" for the current one */
    ts_error *err;
} builder;

static ts_status push(builder *b, const char *s)
{
    if (b->c->argc == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        char **grown = realloc(b->c->argv, (size_t)cap * sizeof *grown);
        if (!grown)
            return ts_error_set(b->err, TS_ERR_NOMEM, "out of memory reading %s", b->file);
        b->c->argv = grown;
        b->cap = cap;
    }
    if (!(b->c->argv[b->c->argc] = strdup(s)))
        return ts_error_set(b->err, TS_ERR_NOMEM, "out of memory reading %s", b->file);
    b->c->argc++;
    return TS_OK;
}

/* prefix + path, path joined to the config's directory when relative. */
static ts_status push_path(builder *b, const char *prefix, const char *path)
{
    char buf[8192];
    const char *dir = path[0] == '/' || !b->dir[0] ? "" : b->dir;
    if ((size_t)snprintf(buf, sizeof buf, "%s%s%s", prefix, dir, path) >= sizeof buf)
        return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: path too long", b->file);
    return push(b, buf);
}

static ts_status push_value(builder *b, const char *where, const config_key *k,
                            const cJSON *v)
{
    char num[64];
    ts_status st;
    switch (k->kind) {
    case VALUE_FLAG:
    case VALUE_NOT:
        if (!cJSON_IsBool(v))
            break;
        return cJSON_IsTrue(v) == (k->kind == VALUE_FLAG) ? push(b, k->option) : TS_OK;
    case VALUE_STRING:
    case VALUE_PATH:
        if (!cJSON_IsString(v))
            break;
        if ((st = push(b, k->option)) != TS_OK)
            return st;
        return k->kind == VALUE_PATH ? push_path(b, "", v->valuestring)
                                     : push(b, v->valuestring);
    case VALUE_SIZE:
        if (cJSON_IsString(v)) {
            if ((st = push(b, k->option)) != TS_OK)
                return st;
            return push(b, v->valuestring);
        }
        /* a plain number of bytes */
        /* fall through */
    case VALUE_NUMBER:
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
            break;
        if (v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15)
            snprintf(num, sizeof num, "%.0f", v->valuedouble);
        else
            snprintf(num, sizeof num, "%.17g", v->valuedouble);
        if ((st = push(b, k->option)) != TS_OK)
            return st;
        return push(b, num);
    }
    static const char *const wants[] = {"a string", "a path (string)", "a number",
                                        "a size (number or string)", "true or false",
                                        "true or false"};
    return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: %s%s wants %s", b->file, where,
                        k->key, wants[k->kind]);
}

/* Every member of obj through keys; where is the prefix for messages ("limits."). */
static ts_status push_section(builder *b, const cJSON *obj, const config_key *keys,
                              const char *where)
{
    if (!cJSON_IsObject(obj))
        return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: %.*s wants an object", b->file,
                            (int)strlen(where) - 1, where);
    for (const cJSON *m = obj->child; m; m = m->next) {
        const config_key *k = keys;
        while (k->key && strcmp(k->key, m->string))
            k++;
        if (!k->key)
            return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: unknown key %s%s", b->file,
                                where, m->string);
        ts_status st = push_value(b, where, k, m);
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

/* "models": a list of paths or names, or {"name": ROUTE, "path": PATH} objects. */
static ts_status push_models(builder *b, const cJSON *models)
{
    if (!cJSON_IsArray(models))
        return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: models wants a list", b->file);
    int i = 0;
    for (const cJSON *m = models->child; m; m = m->next, i++) {
        const cJSON *name = NULL, *path = m;
        if (cJSON_IsObject(m)) {
            for (const cJSON *f = m->child; f; f = f->next)
                if (strcmp(f->string, "name") && strcmp(f->string, "path"))
                    return ts_error_set(b->err, TS_ERR_INVALID_ARG,
                                        "%s: unknown key models[%d].%s", b->file, i, f->string);
            name = cJSON_GetObjectItemCaseSensitive(m, "name");
            path = cJSON_GetObjectItemCaseSensitive(m, "path");
            if (name && !cJSON_IsString(name))
                return ts_error_set(b->err, TS_ERR_INVALID_ARG,
                                    "%s: models[%d].name wants a string", b->file, i);
        }
        if (!cJSON_IsString(path) || !path->valuestring[0])
            return ts_error_set(b->err, TS_ERR_INVALID_ARG,
                                "%s: models[%d] wants a path, a name or {\"name\", \"path\"}",
                                b->file, i);
        char prefix[256];
        if (name && (size_t)snprintf(prefix, sizeof prefix, "%s=", name->valuestring) >=
                        sizeof prefix)
            return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: models[%d].name too long",
                                b->file, i);
        ts_status st = push(b, "-m");
        if (st != TS_OK)
            return st;
        const char *p = path->valuestring, *pre = name ? prefix : "";
        if (strchr(p, '/')) {
            st = push_path(b, pre, p);
        } else {
            /* a bare name: searched in the model directories, not beside the config */
            char buf[1024];
            if ((size_t)snprintf(buf, sizeof buf, "%s%s", pre, p) >= sizeof buf)
                return ts_error_set(b->err, TS_ERR_INVALID_ARG, "%s: models[%d] too long",
                                    b->file, i);
            st = push(b, buf);
        }
        if (st != TS_OK)
            return st;
    }
    return TS_OK;
}

ts_status cli_config_load(cli_config *out, const char *path, ts_error *err)
{
    memset(out, 0, sizeof *out);
    builder b = {.c = out, .file = path, .err = err};
    char *text = NULL;
    cJSON *root = NULL;
    ts_status st = TS_OK;
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(b.dir, sizeof b.dir, "%.*s/", (int)(slash - path), path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        st = ts_error_set(err, TS_ERR_IO, "cannot open config %s", path);
        goto fail;
    }
    if (!(text = malloc(CONFIG_MAX_FILE + 1))) {
        st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading %s", path);
        goto fail;
    }
    size_t len = fread(text, 1, CONFIG_MAX_FILE + 1, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad || len > CONFIG_MAX_FILE) {
        st = ts_error_set(err, TS_ERR_INVALID_ARG, "%s: %s", path,
                          bad ? "cannot read it" : "larger than 1 MiB");
        goto fail;
    }
    text[len] = '\0';
    if (!(root = cJSON_ParseWithLength(text, len)) || !cJSON_IsObject(root)) {
        st = ts_error_set(err, TS_ERR_INVALID_ARG, "%s: not a JSON object", path);
        goto fail;
    }
    if ((st = push(&b, "serve")) != TS_OK)
        goto fail;
    for (const cJSON *m = root->child; m; m = m->next) {
        if (!strcmp(m->string, "models"))
            st = push_models(&b, m);
        else if (!strcmp(m->string, "limits"))
            st = push_section(&b, m, limit_keys, "limits.");
        else if (!strcmp(m->string, "engine"))
            st = push_section(&b, m, engine_keys, "engine.");
        else {
            const config_key *k = top_keys;
            while (k->key && strcmp(k->key, m->string))
                k++;
            st = k->key ? push_value(&b, "", k, m)
                        : ts_error_set(err, TS_ERR_INVALID_ARG, "%s: unknown key %s", path,
                                       m->string);
        }
        if (st != TS_OK)
            goto fail;
    }
    cJSON_Delete(root);
    free(text);
    return TS_OK;
fail:
    cJSON_Delete(root);
    free(text);
    cli_config_free(out);
    return st;
}

ts_status cli_config_args(cli_config *out, int argc, char **argv, ts_error *err)
{
    memset(out, 0, sizeof *out);
    int at = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--config")) {
            if (at)
                return ts_error_set(err, TS_ERR_INVALID_ARG, "--config given twice");
            if (i + 1 >= argc)
                return ts_error_set(err, TS_ERR_INVALID_ARG, "--config needs a value");
            at = i++;
        }
    ts_status st;
    builder b = {.c = out, .file = "arguments", .err = err};
    if (at) {
        if ((st = cli_config_load(out, argv[at + 1], err)) != TS_OK)
            return st;
        b.cap = out->argc;
    } else if ((st = push(&b, argv[0])) != TS_OK) {
        goto fail;
    }
    for (int i = 1; i < argc; i++)
        if (at && (i == at || i == at + 1))
            continue;
        else if ((st = push(&b, argv[i])) != TS_OK)
            goto fail;
    return TS_OK;
fail:
    cli_config_free(out);
    return st;
}

void cli_config_free(cli_config *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->argc; i++)
        free(c->argv[i]);
    free(c->argv);
    c->argv = NULL;
    c->argc = 0;
}
