/* bench_edit.c: the editing workload of `tessera bench --workload edit`: a prompt that
 * holds a document and asks for it again, so the answer repeats most of the prompt, as
 * code edits, summaries that quote and answers from retrieved text do. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench.h"
#include "tessera/tokenizer.h"

/* Plain prose, written for this benchmark: long enough (~700 tokens in common
 * vocabularies) that an answer of a few hundred tokens is still copying it. */
static const char DOCUMENT[] =
    "The lighthouse on the northern cape was built in the spring of a wet year, when the "
    "fishing boats had lost three crews to the rocks in as many months. The town paid for "
    "the stone, the county paid for the lamp, and the keeper was paid by nobody at all for "
    "the first winter, because the letters that named him were lost on the way.\n\n"
    "He kept the light anyway. Every evening he climbed the one hundred and twelve steps, "
    "trimmed the wicks, polished the brass and the great glass lens, and wrote the weather "
    "into a book with a green cover. Every morning he climbed down again, slept until noon, "
    "and walked to the harbour to ask whether any boat had come home late.\n\n"
    "The book with the green cover still exists. It records the wind in four directions "
    "and eight strengths, the height of the sea, the colour of the sky at sunset, and, in a "
    "smaller hand at the bottom of each page, the names of the boats that passed the cape "
    "after dark. Some pages hold a single line. Others are crowded to the margins, written "
    "on nights when a storm drove half the fleet into the bay at once.\n\n"
    "In the second year the letters arrived, along with a salary, a new coat and an "
    "assistant who was afraid of heights. The assistant learned to climb the stairs by "
    "counting them aloud, and the keeper learned to sleep through the counting. Together "
    "they painted the tower white with a red band, so that ships could tell it from the "
    "church spire on the southern hill.\n\n"
    "The lamp burned oil until the harbour was given electric power, and then it burned "
    "nothing at all for a week while the engineers argued about the wiring. The fishermen "
    "complained so loudly that the old oil lamp was lit again and kept beside the new one "
    "for twenty years, in case the town's generator failed on a bad night. It failed twice.\n\n"
    "Today the light is automatic. A small machine turns the lens, a sensor decides when "
    "the evening has come, and a technician visits twice a year to replace whatever has "
    "worn out. The keeper's house has become a museum, where the green book lies open under "
    "glass at a page from a November storm, and visitors read the names of the boats that "
    "came home.\n";

static const char HEAD[] = "Below is a document, followed by an exact copy of it.\n\nDocument:\n";
static const char TAIL[] = "\nExact copy of the document:\n";

/* The ids of text (len bytes), BOS first when add_special and the vocabulary wants it:
 * *out (malloc'd, *n ids) is the caller's. */
static ts_status tokenize(const ts_model *m, const char *text, size_t len, bool add_special,
                         int32_t **out, int *n, ts_error *err)
{
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    size_t need = 0;
    int32_t *ids = NULL;
    ts_status st = ts_tokenize(tok, text, len, add_special, NULL, 0, &need);
    if (st == TS_OK && !(ids = malloc((need ? need : 1) * sizeof *ids)))
        st = TS_ERR_NOMEM;
    if (st == TS_OK)
        st = ts_tokenize(tok, text, len, add_special, ids, need, &need);
    if (st != TS_OK) {
        free(ids);
        return ts_error_set(err, st, "cannot tokenize the editing workload's text: %s",
                            ts_status_str(st));
    }
    *out = ids;
    *n = (int)need;
    return TS_OK;
}

ts_status bench_edit_prompt(const ts_model *m, int32_t **out, int *n, ts_error *err)
{
    *out = NULL;
    *n = 0;
    size_t len = strlen(HEAD) + strlen(DOCUMENT) + strlen(TAIL);
    char *text = malloc(len + 1);
    if (!text)
        return ts_error_set(err, TS_ERR_NOMEM, "out of memory for the editing prompt");
    strcpy(text, HEAD);
    strcat(text, DOCUMENT);
    strcat(text, TAIL);
    ts_status st = tokenize(m, text, len, true, out, n, err);
    free(text);
    return st;
}

/* xorshift64's next draw from *x (never 0). */
static uint64_t next_draw(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A plain token of m's vocabulary drawn from *x (any token when it has too few plain ones
 * to find). */
static int32_t random_plain_token(const ts_model *m, uint64_t *x)
{
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    uint64_t vocab = (uint64_t)ts_model_get_config(m)->vocab_size;
    int32_t id = 0;
    for (int tries = 0; tries < 64; tries++) {
        id = (int32_t)(next_draw(x) % vocab);
        if (ts_token_is_plain(tok, id))
            break;
    }
    return id;
}

ts_status bench_edit_script(const ts_model *m, double rate, uint64_t seed, int32_t **out,
                            int *n, ts_error *err)
{
    *out = NULL;
    *n = 0;
    if (!(rate >= 0 && rate <= 1))
        return ts_error_set(err, TS_ERR_INVALID_ARG, "the edit rate %g is not within 0..1", rate);
    ts_status st = tokenize(m, DOCUMENT, strlen(DOCUMENT), false, out, n, err);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    x = x ? x : 1;
    for (int i = 0; st == TS_OK && i < *n; i++)
        if ((double)(next_draw(&x) >> 11) * 0x1.0p-53 < rate)
            (*out)[i] = random_plain_token(m, &x);
    return st;
}
