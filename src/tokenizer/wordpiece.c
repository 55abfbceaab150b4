/* wordpiece.c: the WordPiece encoder of BERT vocabularies (tokenizer.ggml.model = "bert").
 *
 * The text is normalized code point by code point (BERT's normalizer, as the file asks:
 * accents folded to the base letter and combining marks dropped; lowercased), then split
 * into words: whitespace ends a word, control characters, NUL and U+FFFD vanish, and each
 * punctuation mark, ASCII symbol and CJK ideograph is a word of its own. Each word, with
 * '▁' before it, is then cut greedily into the longest vocabulary tokens from the left:
 * the first piece carries the '▁' (BERT's word-initial piece) and the rest are bare
 * (BERT's "##" pieces, stored without the prefix). A word that cannot be cut to its end
 * is one unknown token. llama.cpp's WPM tokenizer behaves the same. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

uint32_t tokenizer_cpt_map_apply(const tokenizer_cpt_map *map, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < map[mid].first)
            hi = mid;
        else if (cp > map[mid].last)
            lo = mid + 1;
        else
            return map[mid].to;
    }
    return cp;
}

/* CJK ideographs, which BERT splits one to a word (the ranges of BERT's
 * _is_chinese_char, with the extension-C/D bound as Hugging Face's Rust code has it). */
static bool is_cjk(uint32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static size_t utf8_put(char *dst, uint32_t cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

#define WPM_SPACE "\xe2\x96\x81" /* '▁', the mark of a word-initial piece */
enum { WPM_SPACE_LEN = 3 };

/* The longest token a bert vocabulary may hold. Real ones stay under a hundred bytes; the
 * cap bounds the work of each position of a word (a walk of at most this many bytes). */
enum { WPM_MAX_TOKEN_LEN = 1024 };

ts_status tokenizer_wpm_init(ts_tokenizer *tok, ts_error *err)
{
    const tokenizer_vocab *v = &tok->vocab;
    for (int i = 0; i < v->n_tokens; i++)
        if (v->tokens[i].len > WPM_MAX_TOKEN_LEN)
            return ts_error_set(err, TS_ERR_FORMAT, "bert vocabulary: token %d is %u bytes "
                                "long (at most %d)", i, v->tokens[i].len, WPM_MAX_TOKEN_LEN);
    return tokenizer_trie_build(&tok->wpm_trie, v, NULL, TRIE_LAST_ID, "token texts", err);
}

/* The longest token that starts s (n bytes); *len receives its length. -1 if none. */
static int32_t longest_token(const special_node *t, const char *s, size_t n, size_t *len)
{
    int32_t best = -1, node = 0;
    for (size_t i = 0; i < n; i++) {
        if ((node = tokenizer_trie_child(t, node, (uint8_t)s[i])) < 0)
            break;
        if (t[node].token >= 0) {
            best = t[node].token;
            *len = i + 1;
        }
    }
    return best;
}

/* Cuts word (n bytes, starting with '▁') into its longest pieces from the left; a word
 * with a part no piece matches becomes the unknown token as a whole. */
static void encode_word(const ts_tokenizer *tok, const char *word, size_t n, tokenizer_out *out)
{
    size_t start = out->n;
    for (size_t i = 0; i < n;) {
        size_t len = 0;
        int32_t id = longest_token(tok->wpm_trie, word + i, n - i, &len);
        if (id < 0) {
            out->n = start;
            break;
        }
        tokenizer_emit(out, id);
        i += len;
    }
    if (out->n == start)
        tokenizer_emit(out, tok->vocab.unk_id);
}

/* cp with its accent folded where the vocabulary asks, or -1 where the normalizer drops
 * it; *flags receives the folded code point's flags. Lowercasing comes after the split
 * (the split looks at the code point before it). */
static int64_t normalize(const tokenizer_vocab *v, uint32_t cp, uint32_t *flags)
{
    if (v->strip_accents)
        cp = tokenizer_cpt_map_apply(tokenizer_nfd_map, tokenizer_nfd_map_n, cp);
    *flags = tokenizer_cpt_flags(cp);
    if (*flags & TOKENIZER_CPT_WHITESPACE)
        return cp;
    if (cp == 0 || cp == 0xFFFD || (*flags & TOKENIZER_CPT_CONTROL))
        return -1;
    if (v->strip_accents && (*flags & TOKENIZER_CPT_MARK))
        return -1;
    return cp;
}

static uint32_t lower(const tokenizer_vocab *v, uint32_t cp)
{
    return v->lowercase ? tokenizer_cpt_map_apply(tokenizer_lower_map, tokenizer_lower_map_n, cp)
                        : cp;
}

ts_status tokenizer_wpm_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out)
{
    if (len == 0)
        return TS_OK;
    /* '▁' and at most 4 bytes for each input byte (a code point of k bytes maps to one
     * of at most 4) */
    char *word = malloc(WPM_SPACE_LEN + 4 * len);
    if (!word)
        return TS_ERR_NOMEM;
    memcpy(word, WPM_SPACE, WPM_SPACE_LEN);
    size_t n = WPM_SPACE_LEN; /* bytes of word so far, '▁' included */
    for (size_t pos = 0; pos < len;) {
        uint32_t cp, flags;
        pos += tokenizer_utf8_next(text + pos, len - pos, &cp);
        int64_t c = normalize(&tok->vocab, cp, &flags);
        if (c < 0)
            continue;
        bool alone = (flags & TOKENIZER_CPT_PUNCT) || (c < 0x7F && (flags & TOKENIZER_CPT_SYMBOL)) ||
                     is_cjk((uint32_t)c);
        if ((flags & TOKENIZER_CPT_WHITESPACE) || alone) {
            if (n > WPM_SPACE_LEN)
                encode_word(tok, word, n, out);
            n = WPM_SPACE_LEN;
            if (!alone)
                continue;
            n += utf8_put(word + n, lower(&tok->vocab, (uint32_t)c));
            encode_word(tok, word, n, out);
            n = WPM_SPACE_LEN;
            continue;
        }
        n += utf8_put(word + n, lower(&tok->vocab, (uint32_t)c));
    }
    if (n > WPM_SPACE_LEN)
        encode_word(tok, word, n, out);
    free(word);
    return TS_OK;
}
