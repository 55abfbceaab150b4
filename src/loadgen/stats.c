/* stats.c: percentiles, priority classes, the --mix parser, api-keys files, and prompts. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/loadgen.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void loadgen_sort(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_double);
}

double loadgen_percentile(const double *sorted, size_t n, double q)
{
    if (n == 0)
        return NAN;
    q = q < 0 ? 0 : q > 1 ? 1 : q;
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n)
        return sorted[n - 1];
    double f = pos - (double)lo;
    return sorted[lo] + f * (sorted[lo + 1] - sorted[lo]);
}

void loadgen_pcts_of(loadgen_pcts *out, double *v, size_t n)
{
    loadgen_sort(v, n);
    out->p50 = loadgen_percentile(v, n, 0.50);
    out->p90 = loadgen_percentile(v, n, 0.90);
    out->p99 = loadgen_percentile(v, n, 0.99);
}

static const char *const class_names[LOADGEN_CLASS_COUNT] = {"high", "normal", "low"};

const char *loadgen_class_name(loadgen_class c)
{
    return (unsigned)c < LOADGEN_CLASS_COUNT ? class_names[c] : "unknown";
}

static int class_of(const char *s, size_t n)
{
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++)
        if (strlen(class_names[c]) == n && !memcmp(class_names[c], s, n))
            return c;
    return -1;
}

ts_status loadgen_mix_parse(loadgen_mix *out, const char *s, ts_error *err)
{
    loadgen_mix m = {{0}};
    bool seen[LOADGEN_CLASS_COUNT] = {false};
    const char *p = s;
    double sum = 0;
    if (!*s)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "mix: empty (want high:0.2,normal:0.6,low:0.2)");
    for (;;) {
        const char *colon = strchr(p, ':'), *comma = strchr(p, ',');
        if (!colon || (comma && comma < colon))
            return ts_error_set(err, TS_ERR_INVALID_ARG, "mix '%s': '%.*s' is not CLASS:WEIGHT", s,
                                (int)(comma ? (size_t)(comma - p) : strlen(p)), p);
        int c = class_of(p, (size_t)(colon - p));
        if (c < 0)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "mix '%s': unknown class '%.*s' (high, normal, low)", s,
                                (int)(colon - p), p);
        if (seen[c])
            return ts_error_set(err, TS_ERR_INVALID_ARG, "mix '%s': class %s given twice", s,
                                class_names[c]);
        seen[c] = true;
        char *end = NULL;
        errno = 0;
        double w = strtod(colon + 1, &end);
        if (errno || end == colon + 1 || (*end && *end != ',') || !isfinite(w) || w < 0)
            return ts_error_set(err, TS_ERR_INVALID_ARG,
                                "mix '%s': weight of %s must be a number >= 0", s, class_names[c]);
        m.weight[c] = w;
        sum += w;
        if (!*end)
            break;
        p = end + 1;
    }
    if (!(sum > 0) || !isfinite(sum))
        return ts_error_set(err, TS_ERR_INVALID_ARG, "mix '%s': the weights must not all be 0", s);
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++)
        m.weight[c] /= sum;
    *out = m;
    return TS_OK;
}

loadgen_class loadgen_mix_pick(const loadgen_mix *m, double u)
{
    double acc = 0;
    int last = 0;
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++) {
        if (m->weight[c] <= 0)
            continue;
        last = c;
        acc += m->weight[c];
        if (u < acc)
            return (loadgen_class)c;
    }
    return (loadgen_class)last; /* rounding left u just above the sum */
}

enum { MAX_KEYS_FILE = 1 << 20 };

ts_status loadgen_keys_load(loadgen_keys *out, const char *path, ts_error *err)
{
    memset(out, 0, sizeof *out);
    ts_status st = TS_OK;
    char *text = NULL;
    cJSON *root = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_error_set(err, TS_ERR_IO, "api keys %s: %s", path, strerror(errno));
    text = malloc(MAX_KEYS_FILE + 1);
    if (!text) {
        st = ts_error_set(err, TS_ERR_NOMEM, "api keys %s: out of memory", path);
        goto fail;
    }
    size_t n = fread(text, 1, MAX_KEYS_FILE + 1, f);
    if (ferror(f) || n > MAX_KEYS_FILE) {
        st = ts_error_set(err, n > MAX_KEYS_FILE ? TS_ERR_TOO_LONG : TS_ERR_IO,
                          "api keys %s: unreadable or over %d bytes", path, MAX_KEYS_FILE);
        goto fail;
    }
    root = cJSON_ParseWithLength(text, n);
    if (!cJSON_IsObject(root)) {
        st = ts_error_set(err, TS_ERR_FORMAT, "api keys %s: not a JSON object", path);
        goto fail;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        const cJSON *tier = cJSON_GetObjectItemCaseSensitive(e, "tier");
        int c = LOADGEN_CLASS_NORMAL;
        if (!cJSON_IsObject(e) || !e->string || !*e->string ||
            (tier && !cJSON_IsNull(tier) &&
             (!cJSON_IsString(tier) || (c = class_of(tier->valuestring, strlen(tier->valuestring))) < 0))) {
            st = ts_error_set(err, TS_ERR_FORMAT,
                              "api keys %s: entry '%s' wants {\"tier\": \"high|normal|low\"}", path,
                              e->string ? e->string : "");
            goto fail;
        }
        if (!out->key[c] && !(out->key[c] = strdup(e->string))) {
            st = ts_error_set(err, TS_ERR_NOMEM, "api keys %s: out of memory", path);
            goto fail;
        }
    }
    cJSON_Delete(root);
    free(text);
    fclose(f);
    return TS_OK;
fail:
    cJSON_Delete(root);
    free(text);
    fclose(f);
    loadgen_keys_free(out);
    return st;
}

void loadgen_keys_free(loadgen_keys *k)
{
    if (!k)
        return;
    for (int c = 0; c < LOADGEN_CLASS_COUNT; c++) {
        free(k->key[c]);
        k->key[c] = NULL;
    }
}

/* Common words that a Llama vocabulary holds as single tokens (with their leading space). */
static const char *const words[] = {
    "the", "and", "was", "she", "he", "they", "little", "big", "day", "time", "dog", "cat",
    "bird", "tree", "house", "ball", "girl", "boy", "mom", "dad", "friend", "happy", "sad",
    "sun", "sky", "water", "park", "play", "run", "jump", "look", "see", "saw", "went",
    "came", "said", "asked", "smiled", "found", "made", "wanted", "liked", "loved", "help",
    "red", "blue", "green", "small", "long", "good", "bad", "new", "old", "very", "with",
    "from", "into", "over", "under", "after", "before", "then", "when", "there", "here",
    "one", "two", "three", "all", "some", "many", "more", "most", "other", "each", "every",
    "book", "car", "box", "toy", "door", "room", "bed", "food", "cake", "apple", "fish",
    "flower", "garden", "road", "hill", "river", "rain", "snow", "wind", "night", "morning",
    "home", "school", "game", "song", "story", "name", "hand", "head", "eyes", "feet",
    "bear", "duck", "frog", "horse", "king", "queen", "man", "woman", "baby", "child",
    "walk", "talk", "sing", "read", "eat", "drink", "sleep", "open", "close", "find",
    "give", "take", "make", "think", "know", "feel", "try", "call", "move", "live",
    "work", "turn", "start", "show", "hear", "keep", "hold", "bring", "write", "sit",
    "stand", "fly", "swim", "climb", "laugh", "cry", "shout", "share", "wait", "stop",
};

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

char *loadgen_words(int n_words, uint64_t seed)
{
    enum { N_WORDS = sizeof words / sizeof words[0], MAX_WORD = 8 };
    if (n_words < 0)
        n_words = 0;
    char *out = malloc((size_t)n_words * (MAX_WORD + 1) + 1);
    if (!out)
        return NULL;
    uint64_t s = seed;
    size_t len = 0;
    for (int i = 0; i < n_words; i++) {
        const char *w = words[splitmix64(&s) % N_WORDS];
        size_t wl = strlen(w);
        if (i)
            out[len++] = ' ';
        memcpy(out + len, w, wl);
        len += wl;
    }
    out[len] = '\0';
    return out;
}
