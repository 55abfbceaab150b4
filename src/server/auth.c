/* auth.c: the API-key table, its JSON file format and constant-time key comparison. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "server/auth.h"

struct auth_keys {
    auth_key *keys; /* (n) */
    size_t n;
};

bool auth_equal_ct(const char *a, size_t alen, const char *b, size_t blen)
{
    const volatile unsigned char *pa = (const unsigned char *)a;
    const volatile unsigned char *pb = (const unsigned char *)b;
    unsigned diff = (alen != blen) | (alen > AUTH_MAX_KEY_LEN) | (blen > AUTH_MAX_KEY_LEN);
    /* Always AUTH_MAX_KEY_LEN rounds; out-of-range bytes read as 0 via a mask, not a branch
     * on the data. */
    for (size_t i = 0; i < AUTH_MAX_KEY_LEN; i++) {
        size_t ia = i < alen ? i : 0, ib = i < blen ? i : 0;
        unsigned ma = (unsigned)-(unsigned)(i < alen), mb = (unsigned)-(unsigned)(i < blen);
        unsigned ca = alen ? (pa[ia] & ma) : 0, cb = blen ? (pb[ib] & mb) : 0;
        diff |= ca ^ cb;
    }
    return diff == 0;
}

static ts_status parse_tier(const cJSON *t, const char *key_label, ts_priority *out,
                            ts_error *err)
{
    *out = TS_PRIORITY_NORMAL;
    if (!t)
        return TS_OK;
    if (cJSON_IsString(t)) {
        if (!strcmp(t->valuestring, "high"))
            return *out = TS_PRIORITY_HIGH, TS_OK;
        if (!strcmp(t->valuestring, "normal"))
            return *out = TS_PRIORITY_NORMAL, TS_OK;
        if (!strcmp(t->valuestring, "low"))
            return *out = TS_PRIORITY_LOW, TS_OK;
    }
    return ts_error_set(err, TS_ERR_FORMAT,
                        "api key %s: \"tier\" must be \"high\", \"normal\" or \"low\"",
                        key_label);
}

static bool key_ok(const char *k, size_t n)
{
    if (n == 0 || n > AUTH_MAX_KEY_LEN)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] <= 0x20 || (unsigned char)k[i] >= 0x7f)
            return false;
    return true;
}

ts_status auth_keys_parse(const char *json, size_t len, auth_keys **out, ts_error *err)
{
    *out = NULL;
    ts_status st = TS_OK;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    auth_keys *ks = calloc(1, sizeof *ks);
    if (!ks) {
        st = ts_error_set(err, TS_ERR_NOMEM, "cannot allocate the key table");
        goto fail;
    }
    if (!root) {
        st = ts_error_set(err, TS_ERR_FORMAT, "api key file is not valid JSON (near byte %zu)",
                          end && end >= json ? (size_t)(end - json) : (size_t)0);
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        st = ts_error_set(err, TS_ERR_FORMAT,
                          "api key file must hold an object {\"KEY\": {\"tier\": ...}}");
        goto fail;
    }
    int count = cJSON_GetArraySize(root);
    if (count < 1) {
        st = ts_error_set(err, TS_ERR_FORMAT, "api key file holds no keys");
        goto fail;
    }
    ks->keys = calloc((size_t)count, sizeof *ks->keys);
    if (!ks->keys) {
        st = ts_error_set(err, TS_ERR_NOMEM, "cannot allocate %d keys", count);
        goto fail;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        size_t idx = ks->n + 1; /* 1-based, for messages that must not print the key */
        char label[32];
        snprintf(label, sizeof label, "#%zu", idx);
        size_t klen = strlen(e->string);
        if (!key_ok(e->string, klen)) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "api key %s must be 1 to %d printable ASCII characters without "
                              "spaces", label, AUTH_MAX_KEY_LEN);
            goto fail;
        }
        if (!cJSON_IsObject(e)) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "api key %s: its value must be an object {\"tier\", \"name\"}",
                              label);
            goto fail;
        }
        auth_key *k = &ks->keys[ks->n];
        if ((st = parse_tier(cJSON_GetObjectItemCaseSensitive(e, "tier"), label, &k->tier,
                             err)) != TS_OK)
            goto fail;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (name && !cJSON_IsString(name)) {
            st = ts_error_set(err, TS_ERR_FORMAT, "api key %s: \"name\" must be a string",
                              label);
            goto fail;
        }
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(e, "cache_namespace");
        if (ns && (!cJSON_IsString(ns) || !ns->valuestring[0])) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "api key %s: \"cache_namespace\" must be a non-empty string", label);
            goto fail;
        }
        /* "k:" and "n:" keep a key from naming another key's own namespace. */
        k->cache_ns = ns ? auth_ns_hash(auth_ns_hash(AUTH_NS_SEED, "n:", 2), ns->valuestring,
                                        strlen(ns->valuestring))
                         : auth_ns_hash(auth_ns_hash(AUTH_NS_SEED, "k:", 2), e->string, klen);
        for (size_t j = 0; j < ks->n; j++)
            if (ks->keys[j].key_len == klen && !memcmp(ks->keys[j].key, e->string, klen)) {
                st = ts_error_set(err, TS_ERR_FORMAT, "api key %s repeats key #%zu", label,
                                  j + 1);
                goto fail;
            }
        k->key = strdup(e->string);
        k->key_len = klen;
        k->name = strdup(name ? name->valuestring : "");
        ks->n++;
        if (!k->key || !k->name) {
            st = ts_error_set(err, TS_ERR_NOMEM, "cannot copy api key %s", label);
            goto fail;
        }
    }
    cJSON_Delete(root);
    *out = ks;
    return TS_OK;
fail:
    cJSON_Delete(root);
    auth_keys_free(ks);
    return st;
}

ts_status auth_keys_load(const char *path, auth_keys **out, ts_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_error_set(err, TS_ERR_IO, "cannot open api key file %s", path);
    char *buf = malloc(AUTH_MAX_FILE + 1);
    size_t n = buf ? fread(buf, 1, AUTH_MAX_FILE + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    ts_status st;
    if (!buf)
        st = ts_error_set(err, TS_ERR_NOMEM, "cannot read api key file %s", path);
    else if (bad)
        st = ts_error_set(err, TS_ERR_IO, "cannot read api key file %s", path);
    else if (n > AUTH_MAX_FILE)
        st = ts_error_set(err, TS_ERR_TOO_LONG, "api key file %s is over %d bytes", path,
                          AUTH_MAX_FILE);
    else if ((st = auth_keys_parse(buf, n, out, err)) != TS_OK && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        ts_error_set(err, st, "%s: %s", path, msg);
    }
    free(buf);
    return st;
}

void auth_keys_free(auth_keys *ks)
{
    if (!ks)
        return;
    for (size_t i = 0; i < ks->n; i++) {
        free(ks->keys[i].key);
        free(ks->keys[i].name);
    }
    free(ks->keys);
    free(ks);
}

size_t auth_keys_count(const auth_keys *ks)
{
    return ks ? ks->n : 0;
}

const auth_key *auth_check(const auth_keys *ks, const char *authorization)
{
    if (!ks || !authorization)
        return NULL;
    const char *p = authorization;
    while (*p == ' ')
        p++;
    if (strncasecmp(p, "Bearer ", 7) != 0)
        return NULL;
    p += 7;
    while (*p == ' ')
        p++;
    size_t n = strlen(p);
    while (n && p[n - 1] == ' ')
        n--;
    const auth_key *found = NULL;
    for (size_t i = 0; i < ks->n; i++)
        if (auth_equal_ct(p, n, ks->keys[i].key, ks->keys[i].key_len))
            found = &ks->keys[i];
    return found;
}

uint64_t auth_ns_hash(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h ? h : 1;
}

uint64_t auth_request_ns(uint64_t key_ns, const char *salt)
{
    if (!salt)
        return key_ns;
    uint64_t h = auth_ns_hash(key_ns ? key_ns : AUTH_NS_SEED, "s:", 2);
    return auth_ns_hash(h, salt, strlen(salt));
}
