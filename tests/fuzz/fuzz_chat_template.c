/* fuzz_chat_template.c: libFuzzer target: chat-template detection from arbitrary Jinja
 * text, lookup by name, and rendering of arbitrary messages in every family.
 *
 * Input: NUL-separated fields: the Jinja template text, a template name, then role and
 * content pairs (a role field "0".."2" means system/user/assistant, anything else is taken
 * as the role's text). Checked: detection gives a known family; lookup by name succeeds
 * exactly for the known names, round-tripping chat_template_name(), and fails with a
 * message otherwise; rendering fails exactly when a role is unknown, with a message;
 * otherwise the text contains every content and is valid UTF-8 when the contents are, and
 * the content spans mark exactly the messages' texts. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "server/utf8.h"
#include "template/chat_template.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

enum { MAX_MESSAGES = 64 };

static bool known_role(const char *r)
{
    return !strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant") ||
           !strcmp(r, "tool");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL, "out of memory");
    memcpy(text, data, size);
    text[size] = '\0';
    /* Split into fields at each NUL. */
    const char *fields[2 + 2 * MAX_MESSAGES];
    size_t n_fields = 0;
    for (size_t i = 0; i <= size && n_fields < sizeof fields / sizeof *fields;) {
        fields[n_fields++] = text + i;
        i += strlen(text + i) + 1;
    }

    chat_template_kind detected = chat_template_detect(fields[0]);
    FUZZ_CHECK((unsigned)detected < CHAT_TEMPLATE_COUNT, "detected family %d", (int)detected);

    chat_template_kind named = CHAT_TEMPLATE_PLAIN;
    if (n_fields > 1) {
        ts_error err = {0};
        ts_status st = chat_template_from_name(fields[1], &named, &err);
        bool known = false;
        for (int k = 0; k < CHAT_TEMPLATE_COUNT; k++)
            known |= !strcmp(fields[1], chat_template_name((chat_template_kind)k));
        FUZZ_CHECK((st == TS_OK) == known, "chat_template_from_name('%s') answered %s",
                   fields[1], ts_status_str(st));
        if (st == TS_OK)
            FUZZ_CHECK(!strcmp(chat_template_name(named), fields[1]), "name round trip failed");
        else
            FUZZ_CHECK(err.msg[0] != '\0' && err.status == st, "unknown name without a message");
    }

    static const char *const roles[3] = {"system", "user", "assistant"};
    chat_message msgs[MAX_MESSAGES];
    size_t n = 0;
    bool roles_ok = true, utf8_ok = true, tool = false;
    for (size_t i = 2; i + 1 < n_fields && n < MAX_MESSAGES; i += 2, n++) {
        const char *r = fields[i];
        msgs[n].role = (r[0] >= '0' && r[0] <= '2' && r[1] == '\0') ? roles[r[0] - '0'] : r;
        msgs[n].content = fields[i + 1];
        msgs[n].tool_calls = NULL;
        msgs[n].tool_call_id = NULL;
        roles_ok &= known_role(msgs[n].role);
        tool |= !strcmp(msgs[n].role, "tool");
        utf8_ok &= utf8_valid(msgs[n].content, strlen(msgs[n].content));
    }

    size_t non_empty = 0; /* messages with any text */
    for (size_t i = 0; i < n; i++)
        non_empty += msgs[i].content[0] != '\0';
    chat_template_kind kinds[2] = {detected, named};
    for (int k = 0; k < 2; k++) {
        bool trims = chat_template_trims(kinds[k]);
        size_t non_blank = 0; /* messages with text left after the format's trimming */
        for (size_t i = 0; i < n; i++) {
            size_t core;
            fuzz_chat_core(msgs[i].content, trims, &core);
            non_blank += core > 0;
        }
        chat_rendering out = {0};
        ts_error err = {0};
        ts_status st = chat_template_render(kinds[k], msgs, n, NULL, &out, &err);
        const char *name = chat_template_name(kinds[k]);
        if (!roles_ok) {
            FUZZ_CHECK(st == TS_ERR_INVALID_ARG && err.msg[0] != '\0' && out.text == NULL,
                       "an unknown role was rendered or refused without a message");
            continue;
        }
        FUZZ_CHECK(st == TS_OK && out.text != NULL, "rendering %zu messages failed: %s", n,
                   err.msg);
        size_t len = strlen(out.text), end = 0;
        if (tool) { /* tool results are rewritten (tags, JSON quoting): valid text only */
            if (utf8_ok)
                FUZZ_CHECK(utf8_valid(out.text, len), "the %s rendering is not valid UTF-8",
                           name);
            chat_rendering_free(&out);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            size_t core_len;
            const char *core = fuzz_chat_core(msgs[i].content, trims, &core_len);
            FUZZ_CHECK(memmem(out.text, len, core, core_len) != NULL,
                       "the %s rendering lost message %zu's content", name, i);
        }
        /* the content spans: one per message with text left after the format's trimming,
         * in order, apart, each a piece of some message's text holding all its core (its
         * whole text, for a format that does not trim) */
        FUZZ_CHECK(out.n_content >= non_blank && out.n_content <= non_empty,
                   "%s: %zu content spans for %zu messages", name, out.n_content, non_empty);
        for (size_t c = 0; c < out.n_content; c++) {
            const ts_text_span *sp = &out.content[c];
            FUZZ_CHECK(sp->off >= end && sp->len <= len && sp->off <= len - sp->len,
                       "%s: content span %zu out of order or outside the text", name, c);
            end = sp->off + sp->len;
            bool found = false;
            for (size_t i = 0; i < n && !found; i++) {
                size_t core_len;
                const char *core = fuzz_chat_core(msgs[i].content, trims, &core_len);
                found = sp->len >= core_len &&
                        memmem(msgs[i].content, strlen(msgs[i].content), out.text + sp->off,
                               sp->len) != NULL &&
                        memmem(out.text + sp->off, sp->len, core, core_len) != NULL;
            }
            FUZZ_CHECK(found, "%s: content span %zu is no message's text", name, c);
        }
        if (utf8_ok)
            FUZZ_CHECK(utf8_valid(out.text, len), "the %s rendering is not valid UTF-8", name);
        chat_rendering_free(&out);
    }
    free(text);
    return 0;
}
