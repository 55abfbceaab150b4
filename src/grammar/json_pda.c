/* json_pda.c: the JSON-object pushdown automaton of json_pda.h, one byte at a time. */
#include "grammar/json_pda.h"

#include <string.h>

typedef enum pda_mode {
    M_VALUE,     /* a value (at depth 0: only an object) */
    M_OBJ_FIRST, /* after '{': a key or '}' */
    M_OBJ_KEY,   /* after ',' in an object: a key */
    M_COLON,     /* after a key */
    M_AFTER,     /* after a value in a container: ',' or the closer */
    M_ARR_FIRST, /* after '[': a value or ']' */
    M_STR,       /* inside a string */
    M_ESC,       /* after '\' in a string */
    M_HEX,       /* in \uXXXX, sub hex digits left, lit its surrogate context (HEX_*) */
    M_PAIR,      /* after a high surrogate's \uXXXX: sub of the "\u" bytes left */
    M_UTF8,      /* inside a multi-byte character, sub bytes left in [lo, hi] */
    M_NUM,       /* inside a number, sub is its phase */
    M_LIT,       /* inside true / false / null, sub bytes matched */
    M_DONE,      /* the top-level object closed */
} pda_mode;

/* What a \uXXXX escape may hold, so that surrogates come only in pairs (cJSON, like most
 * parsers, refuses a lone one, and no Unicode text holds one): a high surrogate
 * (D800-DBFF) must be followed by the escape of a low one (DC00-DFFF), which may not
 * stand alone. */
enum {
    HEX_ANY,  /* any code unit but a low surrogate */
    HEX_D,    /* the first digit was D: the second says whether it is a surrogate */
    HEX_HIGH, /* a high surrogate: the escape of a low one must follow */
    HEX_LOW,  /* the low half of a pair: D, then C-F, then any two digits */
};

/* Number phases: which bytes may follow what was read. */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static const char *const literals[] = {"true", "false", "null"};

/* The multi-byte UTF-8 bounds of the byte after a lead byte (RFC 3629 table). */
typedef struct utf8_next {
    uint8_t lo, hi;
} utf8_next;

static json_pda canonical(const json_pda *p);

void json_pda_init(json_pda *p)
{
    memset(p, 0, sizeof *p);
    p->mode = M_VALUE;
}

void json_pda_init_value(json_pda *p)
{
    json_pda_init(p);
    p->any_root = true;
}

bool json_pda_accepted(const json_pda *p)
{
    return p->mode == M_DONE;
}

bool json_pda_can_end(const json_pda *p)
{
    return p->mode == M_DONE ||
           (p->mode == M_NUM && p->depth == 0 &&
            (p->sub == N_ZERO || p->sub == N_INT || p->sub == N_FRAC || p->sub == N_EXP));
}

void json_pda_canonical(json_pda *p)
{
    *p = canonical(p);
}

/* p with the fields its mode does not read cleared. */
static json_pda canonical(const json_pda *p)
{
    json_pda c = *p;
    memset(c.stack + c.depth, 0, sizeof c.stack - c.depth);
    bool in_string = c.mode == M_STR || c.mode == M_ESC || c.mode == M_HEX ||
                     c.mode == M_PAIR || c.mode == M_UTF8;
    if (c.mode != M_HEX && c.mode != M_PAIR && c.mode != M_UTF8 && c.mode != M_NUM &&
        c.mode != M_LIT)
        c.sub = 0;
    if (c.mode != M_LIT && c.mode != M_HEX)
        c.lit = 0;
    if (c.mode != M_UTF8)
        c.lo = c.hi = 0;
    if (in_string)
        c.ws = 0;
    else
        c.in_key = false;
    return c;
}

bool json_pda_same(const json_pda *a, const json_pda *b)
{
    json_pda x = canonical(a), y = canonical(b);
    return !memcmp(&x, &y, sizeof x);
}

static void end_value(json_pda *p)
{
    p->mode = p->depth == 0 ? M_DONE : M_AFTER;
}

static bool push(json_pda *p, uint8_t c, pda_mode next)
{
    if (p->depth == JSON_PDA_MAX_DEPTH)
        return false;
    p->stack[p->depth++] = c;
    p->mode = next;
    return true;
}

static bool start_value(json_pda *p, uint8_t c)
{
    if (p->depth == 0 && c != '{' && !p->any_root)
        return false;
    switch (c) {
    case '{': return push(p, '{', M_OBJ_FIRST);
    case '[': return push(p, '[', M_ARR_FIRST);
    case '"': p->mode = M_STR; p->in_key = false; return true;
    case '-': p->mode = M_NUM; p->sub = N_MINUS; return true;
    case '0': p->mode = M_NUM; p->sub = N_ZERO; return true;
    case 't': case 'f': case 'n':
        p->mode = M_LIT;
        p->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        p->sub = 1;
        return true;
    default:
        if (c >= '1' && c <= '9') {
            p->mode = M_NUM;
            p->sub = N_INT;
            return true;
        }
        return false;
    }
}

static bool close_container(json_pda *p, uint8_t c)
{
    if (p->depth == 0 || p->stack[p->depth - 1] != (c == '}' ? '{' : '['))
        return false;
    p->depth--;
    end_value(p);
    return true;
}

static bool after_value(json_pda *p, uint8_t c)
{
    if (c == ',') {
        p->mode = p->stack[p->depth - 1] == '{' ? M_OBJ_KEY : M_VALUE;
        return true;
    }
    return (c == '}' || c == ']') && close_container(p, c);
}

static bool string_byte(json_pda *p, uint8_t c)
{
    if (c == '"') {
        if (p->in_key)
            p->mode = M_COLON;
        else
            end_value(p);
        return true;
    }
    if (c == '\\') {
        p->mode = M_ESC;
        return true;
    }
    if (c < 0x20)
        return false;
    if (c < 0x80)
        return true;
    utf8_next n = {0x80, 0xBF};
    int more;
    if (c >= 0xC2 && c <= 0xDF)
        more = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        more = 2;
        n = c == 0xE0 ? (utf8_next){0xA0, 0xBF} : c == 0xED ? (utf8_next){0x80, 0x9F} : n;
    } else if (c >= 0xF0 && c <= 0xF4) {
        more = 3;
        n = c == 0xF0 ? (utf8_next){0x90, 0xBF} : c == 0xF4 ? (utf8_next){0x80, 0x8F} : n;
    } else
        return false;
    p->mode = M_UTF8;
    p->sub = (uint8_t)more;
    p->lo = n.lo;
    p->hi = n.hi;
    return true;
}

static bool utf8_byte(json_pda *p, uint8_t c)
{
    if (c < p->lo || c > p->hi)
        return false;
    p->lo = 0x80;
    p->hi = 0xBF;
    if (--p->sub == 0)
        p->mode = M_STR;
    return true;
}

static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* A digit of \uXXXX (p->sub left before it), surrogates only in pairs (HEX_*). */
static bool hex_byte(json_pda *p, uint8_t c)
{
    int v = is_digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0)
        return false;
    int pos = 4 - p->sub;
    if (p->lit == HEX_LOW) {
        if ((pos == 0 && v != 0xD) || (pos == 1 && v < 0xC))
            return false;
    } else if (pos == 0) {
        p->lit = v == 0xD ? HEX_D : HEX_ANY;
    } else if (pos == 1 && p->lit == HEX_D) {
        if (v >= 0xC)
            return false; /* a low surrogate alone */
        p->lit = v >= 8 ? HEX_HIGH : HEX_ANY;
    }
    if (--p->sub == 0) {
        p->mode = p->lit == HEX_HIGH ? M_PAIR : M_STR;
        p->sub = p->lit == HEX_HIGH ? 2 : 0;
        p->lit = 0;
    }
    return true;
}

/* A byte in a number; a byte that cannot continue it ends it (where it may end) and is
 * then read as what follows a value. */
static bool number_byte(json_pda *p, uint8_t c)
{
    switch (p->sub) {
    case N_MINUS:
        if (!is_digit(c))
            return false;
        p->sub = c == '0' ? N_ZERO : N_INT;
        return true;
    case N_ZERO:
    case N_INT:
        if (is_digit(c) && p->sub == N_INT)
            return true;
        if (c == '.') {
            p->sub = N_DOT;
            return true;
        }
        break;
    case N_DOT:
    case N_ESIGN:
        if (!is_digit(c))
            return false;
        p->sub = p->sub == N_DOT ? N_FRAC : N_EXP;
        return true;
    case N_E:
        if (c == '+' || c == '-' || is_digit(c)) {
            p->sub = is_digit(c) ? N_EXP : N_ESIGN;
            return true;
        }
        return false;
    case N_FRAC:
    case N_EXP:
        if (is_digit(c))
            return true;
        break;
    }
    if ((c == 'e' || c == 'E') && p->sub != N_EXP) {
        p->sub = N_E;
        return true;
    }
    if (p->depth == 0)
        return false; /* a top-level number (any_root) ends outside the automaton */
    p->mode = M_AFTER;
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' ? (p->ws = 1, true)
                                                             : after_value(p, c);
}

static bool literal_byte(json_pda *p, uint8_t c)
{
    const char *l = literals[p->lit];
    if ((uint8_t)l[p->sub] != c)
        return false;
    if (l[++p->sub] == '\0')
        end_value(p);
    return true;
}

bool json_pda_step(json_pda *p, uint8_t c)
{
    json_pda was = *p;
    bool ws = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    bool ok;
    switch ((pda_mode)p->mode) {
    case M_VALUE:
    case M_OBJ_FIRST:
    case M_OBJ_KEY:
    case M_COLON:
    case M_AFTER:
    case M_ARR_FIRST:
        if (ws) {
            ok = (p->depth > 0 || p->mode != M_VALUE) && p->ws < JSON_PDA_MAX_WS;
            p->ws++;
            break;
        }
        p->ws = 0;
        switch ((pda_mode)p->mode) {
        case M_VALUE: ok = start_value(p, c); break;
        case M_OBJ_FIRST:
        case M_OBJ_KEY:
            ok = c == '"' || (c == '}' && p->mode == M_OBJ_FIRST);
            if (c == '"') {
                p->mode = M_STR;
                p->in_key = true;
            } else if (ok) {
                ok = close_container(p, c);
            }
            break;
        case M_COLON:
            ok = c == ':';
            p->mode = M_VALUE;
            break;
        case M_AFTER: ok = after_value(p, c); break;
        default: /* M_ARR_FIRST */
            ok = c == ']' ? close_container(p, c) : start_value(p, c);
            break;
        }
        break;
    case M_STR: ok = string_byte(p, c); break;
    case M_ESC:
        ok = c && strchr("\"\\/bfnrtu", c);
        p->mode = c == 'u' ? M_HEX : M_STR;
        p->sub = 4;
        p->lit = HEX_ANY;
        break;
    case M_HEX: ok = hex_byte(p, c); break;
    case M_PAIR:
        ok = c == (p->sub == 2 ? '\\' : 'u');
        if (--p->sub == 0) {
            p->mode = M_HEX;
            p->sub = 4;
            p->lit = HEX_LOW;
        }
        break;
    case M_UTF8: ok = utf8_byte(p, c); break;
    case M_NUM: ok = number_byte(p, c); break;
    case M_LIT: ok = literal_byte(p, c); break;
    default: ok = false; break; /* M_DONE */
    }
    if (!ok)
        *p = was;
    return ok;
}

/* Bytes that end a string of p (its quote), then what the key or value still needs. */
static int string_end_cost(const json_pda *p)
{
    return 1 + (p->in_key ? 2 : 0) + p->depth;
}

int json_pda_close_cost(const json_pda *p)
{
    int d = p->depth;
    switch ((pda_mode)p->mode) {
    case M_DONE: return 0;
    case M_VALUE: return d == 0 && !p->any_root ? 2 : 1 + d;
    case M_OBJ_FIRST:
    case M_ARR_FIRST:
    case M_AFTER: return d;
    case M_OBJ_KEY: return 4 + d;
    case M_COLON: return 2 + d;
    case M_STR: return string_end_cost(p);
    case M_ESC: return 1 + string_end_cost(p);
    case M_HEX: return p->sub + (p->lit == HEX_HIGH ? 6 : 0) + string_end_cost(p);
    case M_PAIR: return p->sub + 4 + string_end_cost(p);
    case M_UTF8: return p->sub + string_end_cost(p);
    case M_NUM:
        return (p->sub == N_MINUS || p->sub == N_DOT || p->sub == N_E || p->sub == N_ESIGN) +
               d;
    case M_LIT: return (int)strlen(literals[p->lit]) - p->sub + d;
    }
    return 0;
}
