/* jinja_lex.c: turns template source into tokens, applying Jinja's whitespace control as
 * Hugging Face configures it: `-` strips all whitespace on its side of a tag,
 * trim_blocks drops the newline after a block or comment tag, lstrip_blocks drops the
 * spaces and tabs before one on its line, and one trailing newline of the source goes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "template/jinja_internal.h"

typedef struct lexer {
    jinja_arena *a;
    const char *src;
    size_t len;
    size_t pos;
    size_t at_off; /* line and col are those of offset at_off */
    int line, col;
    jtok *toks;
    size_t n, cap;
    ts_error *err;
} lexer;

/* Moves the line/column cursor forward to offset off (offsets only grow). */
static void locate(lexer *lx, size_t off)
{
    for (; lx->at_off < off; lx->at_off++) {
        if (lx->src[lx->at_off] == '\n') {
            lx->line++;
            lx->col = 1;
        } else {
            lx->col++;
        }
    }
}

static ts_status lex_fail(lexer *lx, size_t off, ts_status st, const char *what)
{
    locate(lx, off);
    return ts_error_set(lx->err, st, "template line %d col %d: %s", lx->line, lx->col, what);
}

static jtok *push(lexer *lx, jtok_type t, size_t off, const char *s, size_t n)
{
    if (lx->n == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jtok *nt = jinja_alloc(lx->a, cap * sizeof *nt);
        if (!nt)
            return NULL;
        if (lx->n)
            memcpy(nt, lx->toks, lx->n * sizeof *nt);
        lx->toks = nt;
        lx->cap = cap;
    }
    locate(lx, off);
    jtok *k = &lx->toks[lx->n++];
    *k = (jtok){.t = t, .s = s, .n = n, .line = lx->line, .col = lx->col};
    return k;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_val(char c)
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A quoted string at lx->pos, with Python's escapes decoded. */
static ts_status lex_string(lexer *lx)
{
    size_t start = lx->pos, end = lx->pos + 1;
    char q = lx->src[lx->pos++];
    /* The closing quote first, so the decoded bytes (never more than the quoted ones)
     * get an allocation of their own size. */
    while (end < lx->len && lx->src[end] != q)
        end += lx->src[end] == '\\' ? 2 : 1;
    char *o = jinja_alloc(lx->a, (end < lx->len ? end : lx->len) - lx->pos + 1);
    if (!o)
        return lex_fail(lx, start, TS_ERR_TOO_LONG, "out of template memory");
    size_t n = 0;
    while (lx->pos < lx->len && lx->src[lx->pos] != q) {
        char c = lx->src[lx->pos++];
        if (c != '\\' || lx->pos >= lx->len) {
            o[n++] = c;
            continue;
        }
        char e = lx->src[lx->pos++];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t cp = 0;
            for (int i = 0; i < digits; i++) {
                int h = lx->pos < lx->len ? hex_val(lx->src[lx->pos]) : -1;
                if (h < 0)
                    return lex_fail(lx, lx->pos, TS_ERR_FORMAT, "bad escape in a string");
                cp = cp * 16 + (uint32_t)h;
                lx->pos++;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
                return lex_fail(lx, lx->pos, TS_ERR_FORMAT, "bad code point in a string");
            n += put_utf8(o + n, cp); /* never longer than the escape it replaces */
            continue;
        }
        const char *from = "ntrbfv0\\'\"\n", *to = "\n\t\r\b\f\v\0\\'\"";
        const char *f = memchr(from, e, 11);
        if (f && e == '\n') {
            continue; /* a backslash-newline continues the line */
        } else if (f) {
            o[n++] = to[f - from];
        } else {
            o[n++] = '\\';
            o[n++] = e;
        }
    }
    if (lx->pos >= lx->len)
        return lex_fail(lx, start, TS_ERR_FORMAT, "unterminated string");
    lx->pos++;
    return push(lx, JT_STRING, start, o, n)
               ? TS_OK
               : lex_fail(lx, start, TS_ERR_TOO_LONG, "too many tokens");
}

static ts_status lex_number(lexer *lx)
{
    size_t start = lx->pos;
    bool is_float = false;
    while (lx->pos < lx->len && (is_digit(lx->src[lx->pos]) || lx->src[lx->pos] == '_'))
        lx->pos++;
    if (lx->pos + 1 < lx->len && lx->src[lx->pos] == '.' && is_digit(lx->src[lx->pos + 1])) {
        is_float = true;
        lx->pos++;
        while (lx->pos < lx->len && is_digit(lx->src[lx->pos]))
            lx->pos++;
    }
    if (lx->pos < lx->len && (lx->src[lx->pos] == 'e' || lx->src[lx->pos] == 'E')) {
        size_t p = lx->pos + 1;
        if (p < lx->len && (lx->src[p] == '+' || lx->src[p] == '-'))
            p++;
        if (p < lx->len && is_digit(lx->src[p])) {
            is_float = true;
            while (p < lx->len && is_digit(lx->src[p]))
                p++;
            lx->pos = p;
        }
    }
    char buf[64];
    size_t n = 0;
    for (size_t i = start; i < lx->pos && n < sizeof buf - 1; i++)
        if (lx->src[i] != '_')
            buf[n++] = lx->src[i];
    buf[n] = '\0';
    errno = 0;
    jtok *t = push(lx, is_float ? JT_FLOAT : JT_INT, start, lx->src + start, lx->pos - start);
    if (!t)
        return lex_fail(lx, start, TS_ERR_TOO_LONG, "too many tokens");
    if (is_float)
        t->f = strtod(buf, NULL);
    else
        t->i = strtoll(buf, NULL, 10);
    if (errno || lx->pos - start >= sizeof buf)
        return lex_fail(lx, start, TS_ERR_FORMAT, "number out of range");
    return TS_OK;
}

/* Tokens of one {{ }} or {% %} tag, up to and including its end. *strip_after: the end
 * was -}} or -%}. *keep_newline: it was +%}. */
static ts_status lex_tag(lexer *lx, bool block, bool *strip_after, bool *keep_newline)
{
    static const char *const ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                      "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                      "]",  "{",  "}",  ",",  ".",  ":",  "|"};
    int depth = 0;
    char close = block ? '%' : '}';
    for (;;) {
        while (lx->pos < lx->len && is_space(lx->src[lx->pos]))
            lx->pos++;
        if (lx->pos >= lx->len)
            return lex_fail(lx, lx->pos, TS_ERR_FORMAT, block ? "missing %}" : "missing }}");
        const char *p = lx->src + lx->pos;
        size_t left = lx->len - lx->pos;
        size_t mark = (left >= 3 && (p[0] == '-' || (block && p[0] == '+'))) ? 1 : 0;
        if (depth == 0 && left >= mark + 2 && p[mark] == close && p[mark + 1] == '}') {
            *strip_after = mark && p[0] == '-';
            *keep_newline = mark && p[0] == '+';
            if (!push(lx, block ? JT_BLOCK_END : JT_VAR_END, lx->pos, p, mark + 2))
                return lex_fail(lx, lx->pos, TS_ERR_TOO_LONG, "too many tokens");
            lx->pos += mark + 2;
            return TS_OK;
        }
        ts_status st = TS_OK;
        if (*p == '"' || *p == '\'') {
            st = lex_string(lx);
        } else if (is_digit(*p)) {
            st = lex_number(lx);
        } else if (is_name_start(*p)) {
            size_t n = 1;
            while (n < left && (is_name_start(p[n]) || is_digit(p[n])))
                n++;
            if (!push(lx, JT_NAME, lx->pos, p, n))
                return lex_fail(lx, lx->pos, TS_ERR_TOO_LONG, "too many tokens");
            lx->pos += n;
        } else {
            size_t i = 0, nops = sizeof ops / sizeof *ops;
            while (i < nops && !(strlen(ops[i]) <= left && !memcmp(ops[i], p, strlen(ops[i]))))
                i++;
            if (i == nops)
                return lex_fail(lx, lx->pos, TS_ERR_FORMAT, "unexpected character");
            if (*p == '(' || *p == '[' || *p == '{')
                depth++;
            else if ((*p == ')' || *p == ']' || *p == '}') && depth > 0)
                depth--;
            if (!push(lx, JT_OP, lx->pos, p, strlen(ops[i])))
                return lex_fail(lx, lx->pos, TS_ERR_TOO_LONG, "too many tokens");
            lx->pos += strlen(ops[i]);
        }
        if (st != TS_OK)
            return st;
    }
}

/* The source with every newline made "\n" and one trailing newline dropped. */
static char *normalize(jinja_arena *a, const char *src, size_t len, size_t *out_len)
{
    char *o = jinja_alloc(a, len + 1);
    if (!o)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            o[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            o[n++] = src[i];
        }
    }
    if (n > 0 && o[n - 1] == '\n')
        n--;
    *out_len = n;
    return o;
}

ts_status jinja_lex(jinja_arena *a, const char *src, size_t len, jtok **out, size_t *n_out,
                    ts_error *err)
{
    lexer lx = {.a = a, .line = 1, .col = 1, .err = err};
    if (!(lx.src = normalize(a, src, len, &lx.len)))
        return ts_error_set(err, TS_ERR_TOO_LONG, "template too large");
    bool strip_next = false;
    while (lx.pos < lx.len) {
        size_t start = lx.pos, tag = start;
        char kind = 0;
        for (; tag + 1 < lx.len; tag++) {
            if (lx.src[tag] == '{' && strchr("{%#", lx.src[tag + 1]) && lx.src[tag + 1]) {
                kind = lx.src[tag + 1];
                break;
            }
        }
        if (!kind)
            tag = lx.len;
        if (strip_next)
            while (start < tag && is_space(lx.src[start]))
                start++;
        size_t end = tag;
        char mark = kind && tag + 2 < lx.len ? lx.src[tag + 2] : 0;
        if (mark == '-') {
            while (end > start && is_space(lx.src[end - 1]))
                end--;
        } else if (kind && kind != '{' && mark != '+') {
            size_t l = end;
            while (l > start && (lx.src[l - 1] == ' ' || lx.src[l - 1] == '\t'))
                l--;
            if ((l > start && lx.src[l - 1] == '\n') ||
                (l == start && (start == 0 || lx.src[start - 1] == '\n')))
                end = l;
        }
        if (end > start && !push(&lx, JT_TEXT, start, lx.src + start, end - start))
            return lex_fail(&lx, start, TS_ERR_TOO_LONG, "too many tokens");
        if (!kind)
            break;
        lx.pos = tag + 2 + (mark == '-' || mark == '+');
        bool strip_after = false, keep_newline = false;
        if (kind == '#') {
            const char *e = NULL;
            for (size_t i = lx.pos; i + 1 < lx.len && !e; i++)
                if (lx.src[i] == '#' && lx.src[i + 1] == '}')
                    e = lx.src + i;
            if (!e)
                return lex_fail(&lx, tag, TS_ERR_FORMAT, "unclosed comment");
            strip_after = e > lx.src + lx.pos && e[-1] == '-';
            keep_newline = e > lx.src + lx.pos && e[-1] == '+';
            lx.pos = (size_t)(e - lx.src) + 2;
        } else {
            bool block = kind == '%';
            if (!push(&lx, block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, tag, lx.src + tag, 2))
                return lex_fail(&lx, tag, TS_ERR_TOO_LONG, "too many tokens");
            size_t first = lx.n;
            ts_status st = lex_tag(&lx, block, &strip_after, &keep_newline);
            if (st != TS_OK)
                return st;
            if (block && lx.n > first && lx.toks[first].t == JT_NAME && lx.toks[first].n == 3 &&
                !memcmp(lx.toks[first].s, "raw", 3))
                return lex_fail(&lx, tag, TS_ERR_UNSUPPORTED, "unsupported statement 'raw'");
            if (!block)
                keep_newline = true; /* trim_blocks leaves {{ }} alone */
        }
        strip_next = strip_after;
        if (!strip_after && !keep_newline && lx.pos < lx.len && lx.src[lx.pos] == '\n')
            lx.pos++;
    }
    if (!push(&lx, JT_EOF, lx.len, lx.src + lx.len, 0))
        return lex_fail(&lx, lx.len, TS_ERR_TOO_LONG, "too many tokens");
    *out = lx.toks;
    *n_out = lx.n;
    return TS_OK;
}
