/* pull.h: `tessera pull REPO[:QUANT]`: a GGUF from a Hugging Face model repository, chosen
 * by quantization from the repository's file list, downloaded with resume and checked. */
#ifndef TESSERA_CLI_PULL_H
#define TESSERA_CLI_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#define PULL_DEFAULT_QUANT "Q4_K_M"

typedef struct pull_file {
    char path[512];    /* in the repository */
    uint64_t size;     /* bytes */
    char sha256[65];   /* lowercase hex; "" when the listing gives none */
} pull_file;

/* "owner/name[:QUANT]" into repo and quant (PULL_DEFAULT_QUANT when absent). False for
 * anything but one '/' between two non-empty names of letters, digits and - _ . */
bool pull_parse_ref(const char *ref, char *repo, size_t repo_cap, char *quant,
                    size_t quant_cap);

/* From the hub's file listing (GET /api/models/REPO/tree/main: a JSON array of {"type",
 * "path", "size", "lfs": {"oid": SHA256, "size"}}; len bytes, borrowed), the one .gguf
 * whose name holds quant (case-insensitive, after the start, . or -, and before . or -).
 * Refuses, naming what the repository offers: no match, several, a split file. */
ts_status pull_pick(pull_file *out, const char *listing, size_t len, const char *quant,
                    ts_error *err);

/* Fetches url into dest: into dest.part first, resuming what is there (a Range request;
 * a server that ignores it starts over), retrying a dropped connection up to 3 times;
 * then checks the size and, when f has one, the sha256, and renames dest.part to dest.
 * A wrong checksum removes dest.part. Redirects are followed (http and https only);
 * bearer_token (may be NULL) is sent to url's host only. progress: a progress line on
 * stderr. */
ts_status pull_download(const char *url, const char *dest, const pull_file *f,
                        const char *bearer_token, bool progress, ts_error *err);

/* GET url into a malloc'd NUL-terminated *body (at most 16 MiB) and its length. */
ts_status pull_get(const char *url, const char *bearer_token, char **body, size_t *len,
                   ts_error *err);

#endif
