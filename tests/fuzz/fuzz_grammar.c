/* fuzz_grammar.c: libFuzzer target: grammar texts through the GBNF, regex and choice
 * compilers, and the compiled automaton driven byte by byte.
 *
 * Input: a mode byte (mode % 3: 0 GBNF, 1 regex, 2 choice, its strings separated by
 * '\n'), the text, then optionally a NUL and driver bytes. Each driver byte d picks the
 * next byte of the text: d itself when the automaton takes it, else the (d mod n)-th of
 * the n bytes it takes. Checked: a refusal carries a documented status and a message and
 * leaves no grammar; an accepted grammar's automaton never runs dry before the text can
 * end (no dead end), "done" means no byte is taken, the closing cost is 0 exactly when the
 * text can end, and one byte lowers it by at most one. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "grammar/grammar.h"

enum { MAX_TEXT = 2048 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void drive(const ts_grammar *g, const uint8_t *d, size_t n)
{
    static gr_state st, next;
    size_t len = 0;
    FUZZ_CHECK(gr_init(&st, g), "an accepted grammar has no start");
    for (size_t i = 0; i < n && len < MAX_TEXT; i++) {
        uint32_t cost = gr_cost(g, &st);
        FUZZ_CHECK((cost == 0) == gr_can_end(&st), "cost %u but can_end %d", cost,
                   gr_can_end(&st));
        uint8_t c = d[i];
        if (!gr_step(g, &st, c, &next)) {
            uint8_t ok[256];
            int n_ok = 0;
            for (int b = 0; b < 256; b++)
                if (gr_step(g, &st, (uint8_t)b, &next))
                    ok[n_ok++] = (uint8_t)b;
            if (n_ok == 0) {
                FUZZ_CHECK(gr_can_end(&st), "dead end after %zu bytes", len);
                FUZZ_CHECK(gr_done(&st), "no byte taken but not done");
                break;
            }
            FUZZ_CHECK(!gr_done(&st), "done, yet a byte is taken");
            c = ok[d[i] % n_ok];
            gr_step(g, &st, c, &next);
        }
        FUZZ_CHECK(gr_cost(g, &next) + 1 >= cost, "one byte lowered the cost from %u to %u",
                   cost, gr_cost(g, &next));
        memcpy(&st, &next, gr_state_size(&next));
        len++;
    }
}

/* The choice strings of text (n bytes), split at '\n'. */
static ts_status compile_choice(const char *text, size_t n, ts_grammar **g, ts_error *err)
{
    const char *s[TS_GRAMMAR_MAX_CHOICES + 1];
    size_t lens[TS_GRAMMAR_MAX_CHOICES + 1], k = 0, at = 0;
    while (k <= TS_GRAMMAR_MAX_CHOICES) {
        const char *nl = memchr(text + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - text) : n;
        s[k] = text + at;
        lens[k++] = end - at;
        if (!nl)
            break;
        at = end + 1;
    }
    return ts_grammar_compile_choice(s, lens, k, g, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 3;
    data++, size--;
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_text = nul ? (size_t)(nul - data) : size;
    char *text = malloc(n_text + 1); /* exactly the text, as a server holds it */
    if (!text)
        return 0;
    memcpy(text, data, n_text);
    ts_grammar *g = (ts_grammar *)1;
    ts_error err = {0};
    ts_status st = mode == 0   ? ts_grammar_compile_gbnf(text, n_text, &g, &err)
                   : mode == 1 ? ts_grammar_compile_regex(text, n_text, &g, &err)
                               : compile_choice(text, n_text, &g, &err);
    free(text);
    if (st != TS_OK) {
        FUZZ_CHECK(st == TS_ERR_UNSUPPORTED || st == TS_ERR_INVALID_ARG || st == TS_ERR_TOO_LONG ||
                       st == TS_ERR_NOMEM, "compile refused with %s", ts_status_str(st));
        FUZZ_CHECK(err.msg[0] != '\0', "a refusal without a message");
        FUZZ_CHECK(g == NULL, "a refusal left a grammar");
        return 0;
    }
    FUZZ_CHECK(g != NULL, "accepted without a grammar");
    if (nul)
        drive(g, nul + 1, size - n_text - 1);
    ts_grammar_release(g);
    return 0;
}
