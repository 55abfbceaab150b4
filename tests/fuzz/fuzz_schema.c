/* fuzz_schema.c: libFuzzer target: JSON Schema texts through ts_schema_compile, and the
 * compiled automaton driven byte by byte.
 *
 * Input: a schema text, then optionally a NUL and driver bytes. Each driver byte d picks
 * the next byte of the text: d itself when the automaton takes it, else the (d mod n)-th
 * of the n bytes it takes. Checked: a refusal carries a message, one of compile's
 * documented statuses and a NUL-terminated path, and no schema; an accepted schema's
 * automaton never runs dry before the text can end (no dead end), every driven text that
 * can end parses as JSON, and sch_done means no byte is taken. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common.h"
#include "grammar/schema.h"

enum { MAX_TEXT = 4096 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void drive(const ts_schema *s, const uint8_t *d, size_t n)
{
    static sch_state st, next;
    static char text[MAX_TEXT + 1];
    size_t len = 0;
    sch_init(&st, s);
    FUZZ_CHECK(st.n > 0, "an accepted schema starts with no path");
    for (size_t i = 0; i < n && len < MAX_TEXT; i++) {
        uint8_t c = d[i];
        if (!sch_step(s, &st, c, &next)) {
            uint8_t ok[256];
            int n_ok = 0;
            for (int b = 0; b < 256; b++)
                if (sch_step(s, &st, (uint8_t)b, &next))
                    ok[n_ok++] = (uint8_t)b;
            if (n_ok == 0) {
                FUZZ_CHECK(sch_can_end(s, &st), "dead end after %zu bytes: %.*s", len, (int)len, text);
                FUZZ_CHECK(sch_done(s, &st), "no byte taken but not done");
                break;
            }
            FUZZ_CHECK(!sch_done(s, &st), "done, yet a byte is taken");
            c = ok[d[i] % n_ok];
            sch_step(s, &st, c, &next);
        }
        memcpy(&st, &next, sch_state_size(&next));
        text[len++] = (char)c;
    }
    text[len] = '\0';
    if (sch_can_end(s, &st)) {
        cJSON *v = cJSON_ParseWithLength(text, len);
        FUZZ_CHECK(v != NULL, "a text the automaton can end is not JSON: %s", text);
        cJSON_Delete(v);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_schema = nul ? (size_t)(nul - data) : size;
    char *text = malloc(n_schema + 1); /* exactly the schema, as a server holds it */
    if (!text)
        return 0;
    memcpy(text, data, n_schema);
    ts_schema *s = (ts_schema *)1;
    ts_error err = {0};
    char path[TS_SCHEMA_PATH_LEN];
    memset(path, 'x', sizeof path);
    ts_status st = ts_schema_compile(text, n_schema, &s, path, sizeof path, &err);
    free(text);
    if (st != TS_OK) {
        FUZZ_CHECK(st == TS_ERR_UNSUPPORTED || st == TS_ERR_INVALID_ARG || st == TS_ERR_TOO_LONG ||
                       st == TS_ERR_NOMEM, "compile refused with %s", ts_status_str(st));
        FUZZ_CHECK(err.msg[0] != '\0', "a refusal without a message");
        FUZZ_CHECK(memchr(path, 0, sizeof path) != NULL, "the path is not NUL-terminated");
        FUZZ_CHECK(s == NULL, "a refusal left a schema");
        return 0;
    }
    if (nul)
        drive(s, nul + 1, size - n_schema - 1);
    ts_schema_release(s);
    return 0;
}
