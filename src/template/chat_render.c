/* chat_render.c: the primitives the built-in families render with (chat_template.c
 * without tools, chat_tools.c with them): markup, content and its spans, JSON. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_internal.h"
#include "template/jinja.h"

void chat_template__markup(chat_render *out, ...)
{
    va_list ap;
    va_start(ap, out);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
        strbuf_add(&out->text, s, strlen(s));
    va_end(ap);
}

static bool is_ascii_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* The Llama 3 and Gemma templates pass every message through Jinja's trim and Llama 2's
 * through strip(), so "  hi\n" is rendered as "hi" there. Only ASCII whitespace goes, as
 * in llama.cpp's renderings. */
void chat_template__content(chat_render *out, const char *c, size_t len, bool strip_lead,
                            bool strip_trail)
{
    while (strip_lead && len > 0 && is_ascii_space(*c)) {
        c++;
        len--;
    }
    while (strip_trail && len > 0 && is_ascii_space(c[len - 1]))
        len--;
    ts_text_span sp = {out->text.len, len};
    if (sp.len == 0)
        return;
    strbuf_add(&out->text, c, sp.len);
    strbuf_add(&out->spans, &sp, sizeof sp);
}

bool chat_template__json(chat_render *out, const cJSON *v, int indent)
{
    char *j = jinja_tojson(v, indent);
    if (!j)
        return false;
    chat_template__content(out, j, strlen(j), false, false);
    free(j);
    return true;
}
