/* unigram.c: the Unigram encoder of t5 vocabularies (tokenizer.ggml.model = "t5"), the
 * SentencePiece model of XLM-RoBERTa (bge-m3, multilingual-e5, bge-reranker-v2-m3).
 *
 * The text is normalized first: a user-defined token's text passes unchanged; else the
 * longest prefix the precompiled charsmap knows becomes its replacement; else one UTF-8
 * character passes, and a byte that begins none becomes U+FFFD. Spaces then become '▁':
 * one before the first word when the vocabulary adds a space prefix, one before every
 * word instead of each run of spaces when it removes extra whitespace. The normalized
 * bytes are then cut into the pieces of highest total score (Viterbi over byte offsets,
 * moving one character at a time): user-defined pieces score 0, a character no piece
 * covers is the unknown token at the lowest normal score less 10, and a run of unknowns
 * is one token. llama.cpp's UGM tokenizer behaves the same. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

struct ugm_state {
    special_node *pieces;  /* trie of the normal, user-defined and unused tokens' texts */
    special_node *user;    /* trie of the user-defined tokens' texts */
    double unk_score;      /* the lowest normal score less UGM_UNK_PENALTY */
};

enum { UGM_UNK_PENALTY = 10 };

#define UGM_SPACE "\xe2\x96\x81" /* '▁' */

static bool is_type(const vocab_token *t, vocab_token_type type)
{
    return t->type == (int32_t)type;
}

static bool in_pieces(const vocab_token *t)
{
    return is_type(t, VOCAB_TOKEN_NORMAL) || is_type(t, VOCAB_TOKEN_USER_DEFINED) ||
           is_type(t, VOCAB_TOKEN_UNUSED);
}

static bool is_user(const vocab_token *t)
{
    return is_type(t, VOCAB_TOKEN_USER_DEFINED);
}

ts_status tokenizer_ugm_init(ts_tokenizer *tok, ts_error *err)
{
    const tokenizer_vocab *v = &tok->vocab;
    ugm_state *u = tok->ugm = calloc(1, sizeof *u);
    if (!u)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot index the Unigram vocabulary");
    ts_status st;
    if ((st = tokenizer_trie_build(&u->pieces, v, in_pieces, TRIE_LAST_ID, "Unigram pieces",
                                   err)) != TS_OK ||
        (st = tokenizer_trie_build(&u->user, v, is_user, TRIE_LAST_ID, "user-defined tokens",
                                   err)) != TS_OK)
        return st;
    float min_score = FLT_MAX;
    for (int i = 0; i < v->n_tokens; i++)
        if (is_type(&v->tokens[i], VOCAB_TOKEN_NORMAL) && v->tokens[i].score < min_score)
            min_score = v->tokens[i].score;
    u->unk_score = (double)(min_score - (float)UGM_UNK_PENALTY);
    return TS_OK;
}

void tokenizer_ugm_free(ugm_state *u)
{
    if (!u)
        return;
    free(u->pieces);
    free(u->user);
    free(u);
}

/* ---- the normalizer */

/* A growing byte string. */
typedef struct ugm_buf {
    char *p;
    size_t n, cap;
    bool failed;
} ugm_buf;

static void buf_put(ugm_buf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* The length of the longest user-defined token that starts s (n bytes), or 0. */
static size_t user_prefix(const special_node *t, const char *s, size_t n)
{
    size_t best = 0;
    int32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        if ((node = tokenizer_trie_child(t, node, (uint8_t)s[i])) < 0)
            break;
        if (t[node].token >= 0)
            best = i + 1;
    }
    return best;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Entry i of the charsmap's double array (its first word is the array's size in bytes);
 * false past its end. */
static bool xcda_node(const tokenizer_vocab *v, uint32_t i, uint32_t *node)
{
    if (i >= le32(v->charsmap) / 4)
        return false;
    *node = le32(v->charsmap + 4 + (size_t)i * 4);
    return true;
}

/* An entry's BASE (bits 10-30, shifted left 8 more when bit 9 is set). */
static uint32_t xcda_base(uint32_t node)
{
    return (node >> 10) << ((node & (1u << 9)) >> 6);
}

/* The longest prefix of s (n bytes) the charsmap replaces: its length (0 if none), and
 * in *repl the offset of its replacement among the replacement strings. A walk that
 * leaves the array ends the match there. */
static size_t charsmap_prefix(const tokenizer_vocab *v, const char *s, size_t n, uint32_t *repl)
{
    size_t best = 0;
    uint32_t node, idx;
    if (!v->charsmap || !xcda_node(v, 0, &node))
        return 0;
    idx = xcda_base(node);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c == 0)
            break;
        idx ^= c;
        if (!xcda_node(v, idx, &node) || (node & ((1u << 31) | 0xFFu)) != c)
            break;
        bool leaf = (node >> 8) & 1;
        idx ^= xcda_base(node);
        if (leaf) {
            uint32_t value;
            if (!xcda_node(v, idx, &value))
                break;
            best = i + 1;
            *repl = value & ((1u << 31) - 1);
        }
    }
    return best;
}

/* The length of the well-formed UTF-8 character (by its lead byte's length and its
 * continuation bytes, as llama.cpp checks) starting s, or 0. */
static size_t utf8_char_len(const char *s, size_t n)
{
    uint8_t c = (uint8_t)s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                          : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if (((uint8_t)s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* Normalizes the prefix of s (n > 0 bytes): *out and *out_len receive its normalized
 * bytes, and it returns the bytes consumed; 0 for a charsmap whose replacement runs
 * off its end. */
static size_t normalize_prefix(const ts_tokenizer *tok, const char *s, size_t n,
                               const char **out, size_t *out_len)
{
    const tokenizer_vocab *v = &tok->vocab;
    size_t len = user_prefix(tok->ugm->user, s, n);
    if (len > 0) {
        *out = s, *out_len = len;
        return len;
    }
    uint32_t repl = 0;
    if ((len = charsmap_prefix(v, s, n, &repl)) > 0) {
        uint32_t blob = le32(v->charsmap);
        const char *strings = (const char *)v->charsmap + 4 + blob;
        size_t size = v->charsmap_len - 4 - blob;
        if (repl >= size)
            return 0;
        const char *end = memchr(strings + repl, '\0', size - repl);
        if (!end)
            return 0;
        *out = strings + repl, *out_len = (size_t)(end - (strings + repl));
        return len;
    }
    if ((len = utf8_char_len(s, n)) > 0) {
        *out = s, *out_len = len;
        return len;
    }
    *out = "\xef\xbf\xbd", *out_len = 3;
    return 1;
}

/* The normalized text into b; TS_ERR_FORMAT for a charsmap that cannot be applied. */
static ts_status normalize(const ts_tokenizer *tok, const char *text, size_t len, ugm_buf *b)
{
    const tokenizer_vocab *v = &tok->vocab;
    bool merge = v->remove_extra_whitespaces, prefixed = false, in_word = false;
    for (size_t pos = 0; pos < len;) {
        const char *piece;
        size_t n;
        size_t used = normalize_prefix(tok, text + pos, len - pos, &piece, &n);
        if (used == 0)
            return TS_ERR_FORMAT;
        for (size_t i = 0; i < n; i++) {
            if (piece[i] != ' ') {
                if (!in_word && ((v->add_space_prefix && !prefixed) || merge)) {
                    buf_put(b, UGM_SPACE, 3);
                    prefixed = true;
                }
                in_word = true;
                buf_put(b, piece + i, 1);
            } else {
                in_word = false;
                if (!merge)
                    buf_put(b, UGM_SPACE, 3);
            }
        }
        pos += used;
    }
    return b->failed ? TS_ERR_NOMEM : TS_OK;
}

/* ---- the segmentation */

/* The best segmentation found so far of the normalized text's first bytes: its last
 * token, where that token starts, and the total score. */
typedef struct ugm_best {
    int32_t token;
    size_t start;
    double score;
} ugm_best;

/* The length of the character that lead byte c begins (1 for a continuation byte). */
static size_t lead_len(uint8_t c)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Offers token id (score s) as the segmentation of s[start, end) after best[start]. */
static void offer(ugm_best *best, size_t start, size_t end, int32_t id, double score)
{
    double total = best[start].score + score;
    if (total > best[end].score)
        best[end] = (ugm_best){id, start, total};
}

/* Emits the best segmentation's tokens, first to last, runs of unknowns as one. */
static ts_status emit_best(const ts_tokenizer *tok, const ugm_best *best, size_t n,
                           tokenizer_out *out)
{
    int32_t unk = tok->vocab.unk_id;
    size_t count = 0;
    for (size_t end = n;; end = best[end].start) {
        count++;
        if (best[end].start == 0)
            break;
    }
    int32_t *ids = malloc(count * sizeof *ids);
    if (!ids)
        return TS_ERR_NOMEM;
    size_t k = count;
    for (size_t end = n;; end = best[end].start) {
        ids[--k] = best[end].token;
        if (best[end].start == 0)
            break;
    }
    for (size_t i = 0; i < count; i++)
        if (!(ids[i] == unk && i > 0 && ids[i - 1] == unk))
            tokenizer_emit(out, ids[i]);
    free(ids);
    return TS_OK;
}

static ts_status segment(const ts_tokenizer *tok, const char *s, size_t n, tokenizer_out *out)
{
    const tokenizer_vocab *v = &tok->vocab;
    const ugm_state *u = tok->ugm;
    ugm_best *best = malloc((n + 1) * sizeof *best);
    if (!best)
        return TS_ERR_NOMEM;
    for (size_t i = 0; i <= n; i++)
        best[i] = (ugm_best){v->unk_id, 0, -DBL_MAX};
    best[0].score = 0;
    for (size_t pos = 0; pos < n;) {
        size_t clen = lead_len((uint8_t)s[pos]);
        if (clen > n - pos)
            clen = n - pos;
        bool whole_char = false;
        int32_t node = 0;
        for (size_t end = pos; end < n;) {
            if ((node = tokenizer_trie_child(u->pieces, node, (uint8_t)s[end++])) < 0)
                break;
            int32_t id = u->pieces[node].token;
            if (id < 0)
                continue;
            whole_char |= end - pos == clen;
            const vocab_token *t = &v->tokens[id];
            offer(best, pos, end, id, is_type(t, VOCAB_TOKEN_USER_DEFINED) ? 0.0 : t->score);
        }
        if (!whole_char)
            offer(best, pos, pos + clen, v->unk_id, u->unk_score);
        pos += clen;
    }
    ts_status st = emit_best(tok, best, n, out);
    free(best);
    return st;
}

ts_status tokenizer_ugm_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out)
{
    ugm_buf b = {0};
    ts_status st = normalize(tok, text, len, &b);
    if (st == TS_OK && b.n > 0)
        st = segment(tok, b.p, b.n, out);
    free(b.p);
    return st;
}
