/* pull.h: `tessera pull REPO[:QUANT]`: a GGUF from a Hugging Face model repository, chosen
 * by quantization from the repository's file list, downloaded with resume and checked. */
#ifndef TESSERA_CLI_PULL_H
#define TESSERA_CLI_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#define PULL_DEFAULT_QUANT "Q4_K_M"

/* The bounds of a download. A listed size over PULL_MAX_SIZE is refused (the hub keeps
 * single files under 50 GB); a body is never written past its listed size; a transfer
 * slower than PULL_MIN_RATE bytes/s for stall_s seconds is stalled. */
#define PULL_MAX_SIZE (UINT64_C(64) << 30)
enum { PULL_MIN_RATE = 16 << 10, PULL_STALL_S = 60 };

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
 * Refuses, naming what the repository offers (control bytes escaped): no match, several,
 * a split file, a name with control bytes, a size over PULL_MAX_SIZE. */
ts_status pull_pick(pull_file *out, const char *listing, size_t len, const char *quant,
                    ts_error *err);

/* How pull_download fetches. */
typedef struct pull_options {
    const char *bearer_token; /* borrowed, may be NULL: sent to the first host only */
    bool progress;            /* a progress line on stderr */
    int stall_s;              /* under PULL_MIN_RATE for this long: stalled (0: PULL_STALL_S) */
} pull_options;

/* Fetches url into dest: into dest.part first (never through a symbolic link), resuming
 * what is there (a Range request; a server that ignores it starts over), retrying a
 * dropped or stalled connection up to 3 times, never writing past f->size; then checks it
 * with pull_verify and renames dest.part to dest. A body longer than listed or a file
 * that fails the check removes dest.part. Redirects are followed (http and https only). */
ts_status pull_download(const char *url, const char *dest, const pull_file *f,
                        const pull_options *o, ts_error *err);

/* Whether the file at path is f: its size, the sha256 when f lists one, and the GGUF
 * magic. TS_ERR_FORMAT, saying what differs, when it is not. */
ts_status pull_verify(const char *path, const pull_file *f, ts_error *err);

/* GET url into a malloc'd NUL-terminated *body (at most 16 MiB) and its length. */
ts_status pull_get(const char *url, const char *bearer_token, char **body, size_t *len,
                   ts_error *err);

#endif
