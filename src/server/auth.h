/* auth.h: API keys from a JSON file ({"KEY": {"tier": "high|normal|low", "name": "...",
 * "cache_namespace": "..."}}) and constant-time checks of "Authorization: Bearer KEY" headers. */
#ifndef TESSERA_SERVER_AUTH_H
#define TESSERA_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/engine.h"

enum {
    AUTH_MAX_KEY_LEN = 256,       /* bytes of one key */
    AUTH_MAX_FILE = 1 << 20,      /* bytes of the key file */
};

typedef struct auth_key {
    char *key;            /* owned */
    size_t key_len;
    ts_priority tier;     /* priority of this key's requests */
    char *name;           /* owned; "" when the file gives none */
    uint64_t cache_ns;    /* prefix-cache namespace: a hash of "cache_namespace" (keys
                           * naming the same one share cached prompts), else of the key
                           * itself; never 0 (the namespace of a server without keys) */
} auth_key;

typedef struct auth_keys auth_keys;

/* A 64-bit FNV-1a hash of n bytes continuing from h (start with AUTH_NS_SEED); never 0. */
#define AUTH_NS_SEED UINT64_C(0xcbf29ce484222325)
uint64_t auth_ns_hash(uint64_t h, const char *s, size_t n);

/* A request's prefix-cache namespace: its key's (0 without keys), narrowed by salt
 * (NULL: none) to a namespace of its own. */
uint64_t auth_request_ns(uint64_t key_ns, const char *salt);

/* Parses len bytes of JSON (borrowed). Rejects, with err saying where: malformed JSON, a
 * top level that is not an object, no keys, an empty, over-long or non-printable key, an
 * entry that is not an object, a tier other than high/normal/low (default normal), a
 * name that is not a string. */
ts_status auth_keys_parse(const char *json, size_t len, auth_keys **out, ts_error *err);

/* Reads and parses the file at path (borrowed). */
ts_status auth_keys_load(const char *path, auth_keys **out, ts_error *err);

/* Accepts NULL. */
void auth_keys_free(auth_keys *keys);

size_t auth_keys_count(const auth_keys *keys);

/* The entry whose key the header value ("Bearer KEY", borrowed, may be NULL) carries, or
 * NULL. Every key is compared, each in time independent of where bytes differ. The entry
 * is borrowed from keys. */
const auth_key *auth_check(const auth_keys *keys, const char *authorization);

/* True when a[0..alen) equals b[0..blen); the time taken depends only on
 * AUTH_MAX_KEY_LEN, not on the contents or where they differ. Inputs longer than
 * AUTH_MAX_KEY_LEN never match. */
bool auth_equal_ct(const char *a, size_t alen, const char *b, size_t blen);

#endif /* TESSERA_SERVER_AUTH_H */
