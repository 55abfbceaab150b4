/* cli_pull.c: `tessera pull REPO[:QUANT]`: fetches a GGUF from a Hugging Face repository
 * into the model directory (the only command that uses the network). */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/pull.h"
#include "server/utf8.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tessera pull OWNER/REPO[:QUANT] [--model-dir DIR] [--endpoint URL]\n"
            "                    [--stall-seconds N] [--quiet]\n"
            "  fetches the repository's GGUF of that quantization (default " PULL_DEFAULT_QUANT
            ", as named\n"
            "  in the file name: Q8_0, Q4_0, ...) into the model directory, resuming a partial\n"
            "  download and checking its size, sha256 and GGUF magic before it is put in place;\n"
            "  `tessera serve -m NAME` then finds it. A file there already is checked the same way.\n"
            "  --model-dir DIR   where to store it (default: the first directory of\n"
            "                    $TESSERA_MODELS, else ./models)\n"
            "  --endpoint URL    the hub (default $HF_ENDPOINT, else https://huggingface.co)\n"
            "  --stall-seconds N a transfer under 16 KiB/s for N seconds is stalled and\n"
            "                    retried, up to 3 times (default 60)\n"
            "  --quiet           no progress lines\n"
            "  $HF_TOKEN         sent as a bearer token to the hub (gated repositories)\n");
}

/* s with every byte outside [A-Za-z0-9-._~/] percent-encoded, into out. */
static bool url_path(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("-._~/", ch);
        int w = plain ? snprintf(out + n, cap - n, "%c", ch)
                      : snprintf(out + n, cap - n, "%%%02X", ch);
        if (w < 0 || (size_t)w >= cap - n)
            return false;
        n += (size_t)w;
    }
    return true;
}

int cli_pull(int argc, char **argv)
{
    const char *ref = NULL, *dir = NULL, *endpoint = getenv("HF_ENDPOINT");
    bool quiet = false;
    int stall_s = PULL_STALL_S;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quiet")) {
            quiet = true;
        } else if (!strcmp(a, "--model-dir") || !strcmp(a, "--endpoint")) {
            const char *v = cli_value(argc, argv, &i);
            if (!v)
                return 2;
            *(a[2] == 'm' ? &dir : &endpoint) = v;
        } else if (!strcmp(a, "--stall-seconds")) {
            const char *v = cli_value(argc, argv, &i);
            char *end;
            long n = v ? strtol(v, &end, 10) : 0;
            if (!v || *end || n < 1 || n > 3600) {
                fprintf(stderr, "tessera pull: --stall-seconds wants 1 to 3600\n");
                return 2;
            }
            stall_s = (int)n;
        } else if (a[0] != '-' && !ref) {
            ref = a;
        } else {
            fprintf(stderr, "tessera pull: unexpected argument %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    char repo[256], quant[64];
    if (!ref || !pull_parse_ref(ref, repo, sizeof repo, quant, sizeof quant)) {
        fprintf(stderr, "tessera pull: give a repository as OWNER/NAME[:QUANT]%s%s\n",
                ref ? ", not " : "", ref ? ref : "");
        return 2;
    }
    if (!endpoint || !*endpoint)
        endpoint = "https://huggingface.co";
    char dirs[4096];
    if (!dir) {
        const char *env = getenv("TESSERA_MODELS");
        snprintf(dirs, sizeof dirs, "%.*s", env && *env ? (int)strcspn(env, ":") : 6,
                 env && *env ? env : "models");
        dir = dirs;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "tessera pull: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    const char *token = getenv("HF_TOKEN");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int status = 1;
    char url[8192], path[2048], dest[4096], *listing = NULL;
    size_t len = 0;
    pull_file f;
    ts_error err = {0};
    snprintf(url, sizeof url, "%s/api/models/%s/tree/main", endpoint, repo);
    if (pull_get(url, token, &listing, &len, &err) != TS_OK ||
        pull_pick(&f, listing, len, quant, &err) != TS_OK)
        goto done;
    const char *base = strrchr(f.path, '/');
    base = base ? base + 1 : f.path;
    if (!url_path(path, sizeof path, f.path) ||
        (size_t)snprintf(url, sizeof url, "%s/%s/resolve/main/%s", endpoint, repo, path) >=
            sizeof url ||
        (size_t)snprintf(dest, sizeof dest, "%s/%s", dir, base) >= sizeof dest) {
        ts_error_set(&err, TS_ERR_INVALID_ARG, "path too long: %s", f.path);
        goto done;
    }
    char shown[sizeof f.path];
    utf8_escape_controls(shown, sizeof shown, f.path);
    if (!quiet)
        fprintf(stderr, "pull: %s (%.1f MB%s) from %s\n", shown, (double)f.size / 1e6,
                f.sha256[0] ? ", sha256 checked" : ", no checksum listed", repo);
    struct stat st;
    ts_error why = {0};
    /* A file of the listed size is hashed (or its magic read) before it counts as there. */
    if (stat(dest, &st) == 0 && (uint64_t)st.st_size == f.size &&
        pull_verify(dest, &f, &why) == TS_OK) {
        fprintf(stderr, "pull: %s is there already\n", dest);
    } else {
        if (why.msg[0])
            fprintf(stderr, "pull: %s; fetching it again\n", why.msg);
        pull_options po = {.bearer_token = token, .progress = !quiet, .stall_s = stall_s};
        if (pull_download(url, dest, &f, &po, &err) != TS_OK)
            goto done;
    }
    printf("%s\n", dest);
    if (!quiet)
        fprintf(stderr, "pull: serve it with: tessera serve -m %s\n", dest);
    status = 0;
done:
    if (status)
        fprintf(stderr, "tessera pull: %s\n", err.msg);
    free(listing);
    curl_global_cleanup();
    return status;
}
