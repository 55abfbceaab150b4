/* grammar_oracle.c: the backtracking recogniser of grammar_oracle.h: a continuation is
 * the list of nodes still to match, so every alternative and repetition count is tried. */
#include "grammar_oracle.h"

#include <stdarg.h>
#include <string.h>

enum { POOL = 4096, RULES = 64 };

typedef enum { K_CHR, K_NOT, K_SET, K_LIT, K_SEQ, K_ALT, K_STAR, K_EPS, K_REF } go_kind;

typedef struct go_item {
    go_kind k;
    int a, b;
    uint32_t lo, hi;
    const char *s;
} go_item;

static go_item pool[POOL];
static int n_pool;
static go_node rules[RULES];
static const char *text;
static size_t text_len;

void go_reset(void)
{
    n_pool = 0;
    memset(rules, 0, sizeof rules);
}

static go_node add(go_item it)
{
    pool[n_pool] = it;
    return n_pool++;
}

go_node go_chr(uint32_t lo, uint32_t hi) { return add((go_item){K_CHR, 0, 0, lo, hi, 0}); }
go_node go_set(const char *ascii) { return add((go_item){K_SET, 0, 0, 0, 0, ascii}); }
go_node go_not(const char *ascii, uint32_t lo, uint32_t hi)
{
    return add((go_item){K_NOT, 0, 0, lo, hi, ascii});
}
go_node go_lit(const char *s) { return add((go_item){K_LIT, 0, 0, 0, 0, s}); }
go_node go_eps(void) { return add((go_item){K_EPS, 0, 0, 0, 0, 0}); }
go_node go_ref(int rule) { return add((go_item){K_REF, rule, 0, 0, 0, 0}); }
go_node go_star(go_node a) { return add((go_item){K_STAR, a, 0, 0, 0, 0}); }
go_node go_plus(go_node a) { return go_seq(2, a, go_star(a)); }
go_node go_opt(go_node a) { return add((go_item){K_ALT, a, go_eps(), 0, 0, 0}); }
void go_rule(int rule, go_node body) { rules[rule] = body; }

/* Folds n nodes into a right-leaning chain of kind k. */
static go_node chain(go_kind k, int n, va_list ap)
{
    go_node first = va_arg(ap, go_node);
    if (n == 1)
        return first;
    go_node rest = chain(k, n - 1, ap);
    return add((go_item){k, first, rest, 0, 0, 0});
}

go_node go_seq(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    go_node r = chain(K_SEQ, n, ap);
    va_end(ap);
    return r;
}

go_node go_alt(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    go_node r = chain(K_ALT, n, ap);
    va_end(ap);
    return r;
}

/* The code point at pos and its byte count (0 at the end). */
static int decode(size_t pos, uint32_t *cp)
{
    if (pos >= text_len)
        return 0;
    const unsigned char *u = (const unsigned char *)text + pos;
    int n = u[0] < 0x80 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
    uint32_t v = n == 1 ? u[0] : u[0] & (0x3F >> (n - 1));
    for (int i = 1; i < n && pos + (size_t)i < text_len; i++)
        v = v << 6 | (u[i] & 0x3F);
    *cp = v;
    return n;
}

typedef struct kont {
    go_node node;
    const struct kont *next;
} kont;

static bool match(const kont *k, size_t pos)
{
    if (!k)
        return pos == text_len;
    const go_item *it = &pool[k->node];
    uint32_t cp = 0;
    int n;
    switch (it->k) {
    case K_CHR:
        n = decode(pos, &cp);
        return n && cp >= it->lo && cp <= it->hi && match(k->next, pos + (size_t)n);
    case K_SET:
        n = decode(pos, &cp);
        return n && cp && cp < 0x80 && strchr(it->s, (int)cp) && match(k->next, pos + 1);
    case K_NOT:
        n = decode(pos, &cp);
        return n && !(cp < 0x80 && cp && strchr(it->s, (int)cp)) &&
               !(cp >= it->lo && cp <= it->hi) && match(k->next, pos + (size_t)n);
    case K_LIT: {
        size_t l = strlen(it->s);
        return pos + l <= text_len && !memcmp(text + pos, it->s, l) && match(k->next, pos + l);
    }
    case K_SEQ: {
        kont kb = {it->b, k->next}, ka = {it->a, &kb};
        return match(&ka, pos);
    }
    case K_ALT: {
        kont ka = {it->a, k->next}, kb = {it->b, k->next};
        return match(&ka, pos) || match(&kb, pos);
    }
    case K_STAR: {
        kont again = {k->node, k->next}, ka = {it->a, &again};
        return match(k->next, pos) || match(&ka, pos);
    }
    case K_EPS: return match(k->next, pos);
    case K_REF: {
        kont kr = {rules[it->a], k->next};
        return match(&kr, pos);
    }
    }
    return false;
}

bool go_match(const char *s, size_t n)
{
    text = s;
    text_len = n;
    kont start = {rules[0], NULL};
    return match(&start, 0);
}
