/* bpe.c: byte-level BPE ("gpt2" vocabularies) as llama.cpp's llm_tokenizer_bpe does it:
 * a pre-tokenizer splits text into words, each word's bytes are mapped to printable
 * code points (GPT-2's bytes_to_unicode), then merged pair by pair in rank order (Llama
 * 3's family first takes a word that is a token whole). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

struct bpe_state {
    tokenizer_map merge_rank; /* "left right" -> rank */
    bpe_split_fn split;
    bool ignore_merges;       /* a word that is a token is taken whole (Llama 3's family) */
    unsigned char byte_utf8[256][2]; /* the UTF-8 of each byte's stand-in code point */
    unsigned char byte_len[256];
};

/* ---- GPT-2's byte <-> code point map ----------------------------------------------- */

static int byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* Printable bytes stand for themselves; the 68 others get 256, 257, ... in byte order. */
static uint32_t byte_to_cp(unsigned b)
{
    if (byte_is_printable(b))
        return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        k += !byte_is_printable(x);
    return 256 + k;
}

static int cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return byte_is_printable(cp) ? (int)cp : -1;
    uint32_t k = 256;
    for (unsigned x = 0; x < 256; x++)
        if (!byte_is_printable(x) && k++ == cp)
            return (int)x;
    return -1;
}

size_t tokenizer_bpe_decode_text(char *dst, const char *text, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tokenizer_utf8_next(text + i, len - i, &cp);
        int b = cp_to_byte(cp); /* U+FFFD for a malformed byte: -1 */
        if (b >= 0) {
            dst[n++] = (char)b;
        } else { /* not a stand-in: keep its bytes */
            memcpy(dst + n, text + i, k);
            n += k;
        }
        i += k;
    }
    return n;
}

/* ---- pre-tokenizers ------------------------------------------------------------------ */

enum { CLASS_NONE, CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE, CLASS_OTHER };

/* The class of the character at pos (CLASS_NONE past the end); *len gets its bytes. */
static int class_at(const char *s, size_t n, size_t pos, size_t *len)
{
    if (pos >= n) {
        *len = 0;
        return CLASS_NONE;
    }
    uint32_t cp;
    *len = tokenizer_utf8_next(s + pos, n - pos, &cp);
    uint32_t f = tokenizer_cpt_flags(cp);
    return f & TOKENIZER_CPT_WHITESPACE ? CLASS_SPACE
           : f & TOKENIZER_CPT_LETTER   ? CLASS_LETTER
           : f & TOKENIZER_CPT_NUMBER   ? CLASS_NUMBER
                                        : CLASS_OTHER;
}

static bool is_cr_lf(const char *s, size_t n, size_t pos)
{
    return pos < n && (s[pos] == '\r' || s[pos] == '\n');
}

/* The end of the run of characters of class cls that starts at pos. */
static size_t class_run_end(const char *s, size_t n, size_t pos, int cls)
{
    size_t k;
    while (class_at(s, n, pos, &k) == cls)
        pos += k;
    return pos;
}

/* 's|'t|'re|'ve|'m|'ll|'d at pos: where the contraction ends, or pos when none starts
 * there. Llama 3's expression takes them in any case, GPT-2's in lower case only. */
static size_t contraction_end(const char *s, size_t n, size_t pos, bool any_case)
{
    if (s[pos] != '\'' || pos + 1 >= n)
        return pos;
    char fold = any_case ? 0x20 : 0; /* sets the lower-case bit of ASCII letters */
    char c1 = (char)(s[pos + 1] | fold), c2 = pos + 2 < n ? (char)(s[pos + 2] | fold) : 0;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd')
        return pos + 2;
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return pos + 3;
    return pos;
}

/* \s+(?!\S)|\s+ at pos, which must be whitespace: the end of the run, except that a run
 * of two or more before other text leaves its last character to the next word.
 * *after_break (when not NULL) gets the end of the run's last CR or LF, 0 if it has none. */
static size_t space_run_end(const char *s, size_t n, size_t pos, size_t *after_break)
{
    size_t k, end = pos, last = pos, count = 0, brk = 0;
    for (; class_at(s, n, end, &k) == CLASS_SPACE; end += k, count++) {
        last = end;
        if (is_cr_lf(s, n, end))
            brk = end + 1;
    }
    if (after_break)
        *after_break = brk;
    return count > 1 && end < n ? last : end;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t split_gpt2(const char *s, size_t n, size_t pos)
{
    size_t k, end = contraction_end(s, n, pos, false);
    if (end > pos)
        return end;
    size_t p = s[pos] == ' ' ? pos + 1 : pos;
    int cls = class_at(s, n, p, &k);
    if (cls == CLASS_LETTER || cls == CLASS_NUMBER || cls == CLASS_OTHER)
        return class_run_end(s, n, p, cls);
    return space_run_end(s, n, pos, NULL); /* no contraction and no run: pos is whitespace */
}

/* Llama 3's pre-tokenizer, and Qwen2's with max_digits 1:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 * \s*[\r\n]+|\s+(?!\S)|\s+   -- the first alternative that matches at pos wins. */
static size_t split_llama3_like(const char *s, size_t n, size_t pos, int max_digits)
{
    size_t k, k0, end = contraction_end(s, n, pos, true);
    if (end > pos)
        return end;
    int cls = class_at(s, n, pos, &k0);
    /* one character that is no letter, digit, CR or LF may lead a run of letters */
    size_t p = cls == CLASS_LETTER || cls == CLASS_NUMBER || is_cr_lf(s, n, pos) ? pos : pos + k0;
    if (class_at(s, n, p, &k) == CLASS_LETTER)
        return class_run_end(s, n, p, CLASS_LETTER);
    if (cls == CLASS_NUMBER) {
        p = pos;
        for (int d = 0; d < max_digits && class_at(s, n, p, &k) == CLASS_NUMBER; d++)
            p += k;
        return p;
    }
    p = s[pos] == ' ' ? pos + 1 : pos;
    if (class_at(s, n, p, &k) == CLASS_OTHER) {
        p = class_run_end(s, n, p, CLASS_OTHER);
        while (is_cr_lf(s, n, p))
            p++;
        return p;
    }
    /* no contraction and no run: pos is whitespace */
    size_t after_break;
    end = space_run_end(s, n, pos, &after_break);
    return after_break ? after_break : end; /* \s*[\r\n]+ reaches the run's last break */
}

static size_t split_llama3(const char *s, size_t n, size_t pos)
{
    return split_llama3_like(s, n, pos, 3);
}

static size_t split_qwen2(const char *s, size_t n, size_t pos)
{
    return split_llama3_like(s, n, pos, 1);
}

/* SmolLM's pre-tokenizer (StarCoder's, Command R's and a few others' too). llama.cpp
 * applies two expressions in turn: \p{N} cuts every digit out as a word of its own, then
 * GPT-2's expression cuts each stretch between digits. So digits never join each other,
 * and a space before a digit is a word of its own, not " 1" as in GPT-2. */
static size_t split_smollm(const char *s, size_t n, size_t pos)
{
    size_t k;
    if (class_at(s, n, pos, &k) == CLASS_NUMBER)
        return pos + k;
    /* A GPT-2 word starting at pos reaches at most over its first character and the run of
     * one class after it, and looks one character further; only a digit there ends its
     * stretch early. Scanning that far, not to the next digit, keeps long text linear. */
    size_t p = pos + k;
    int run = class_at(s, n, p, &k);
    if (run != CLASS_NUMBER && run != CLASS_NONE)
        p = class_run_end(s, n, p, run);
    size_t stretch_end = class_at(s, n, p, &k) == CLASS_NUMBER ? p : n;
    return split_gpt2(s, stretch_end, pos);
}

/* DeepSeek LLM's pre-tokenizer (tokenizer.ggml.pre deepseek-llm). llama.cpp applies six
 * expressions in turn, each cutting every piece the ones before it left into its matches
 * and the stretches between them (ranges written here as code points):
 *   [\r\n]                        each CR and LF alone
 *   \s?[LETTERS]+                 deepseek_letters below
 *   \s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+
 *   \s+$                          whitespace ending a piece
 *   [\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+
 *   \p{N}+
 * The first five run through std::wregex on a copy of the text in which every non-ASCII
 * whitespace character is U+000B, so to them such a character is whitespace only, never
 * punctuation (U+3000) or CJK (U+2003). Composed, they cut between two characters by what
 * those two and the one after them are, save the last rule, which looks along a run:
 *   - before and after each CR and LF;
 *   - where a run of letters, of punctuation, of CJK or of digits starts or ends; the
 *     punctuation ranges hold the ASCII and full-width letters, so those part from other
 *     letters ("café" gives "caf" and "é");
 *   - except that one whitespace character, not CR or LF, leads the letter or punctuation
 *     run after it, unless that run's first character is CJK too (the fifth expression
 *     cuts it out again);
 *   - and a whitespace run that reaches a CR, LF, letter, punctuation or the end of the
 *     text before any other character ends a piece, so \s+$ cuts it from what precedes it. */
enum {
    DS_SPACE = 1,   /* \s: the White_Space property */
    DS_BREAK = 2,   /* CR or LF */
    DS_LETTER = 4,  /* in deepseek_letters */
    DS_PUNCT = 8,   /* in the punctuation ranges, which hold ASCII and full-width letters */
    DS_CJK = 16,    /* in the CJK expression's ranges */
    DS_DIGIT = 32,  /* \p{N} */
};

/* The second expression's letter ranges (inclusive): upper, lower and title case letters
 * as DeepSeek's tokenizer lists them, which leaves out some (Armenian lower case, for one). */
static const uint32_t deepseek_letters[][2] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3},
    {0x104D8, 0x104FB}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF},
    {0x1E900, 0x1E943},
};

static bool is_deepseek_letter(uint32_t cp)
{
    size_t lo = 0, hi = sizeof deepseek_letters / sizeof *deepseek_letters;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < deepseek_letters[mid][0])
            hi = mid;
        else if (cp > deepseek_letters[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* The DS_* classes of the character at pos (0 past the end); *len gets its bytes. */
static unsigned deepseek_class_at(const char *s, size_t n, size_t pos, size_t *len)
{
    if (pos >= n) {
        *len = 0;
        return 0;
    }
    uint32_t cp;
    *len = tokenizer_utf8_next(s + pos, n - pos, &cp);
    uint32_t f = tokenizer_cpt_flags(cp);
    if (f & TOKENIZER_CPT_WHITESPACE) /* only that: the expressions saw U+000B for it */
        return cp == '\r' || cp == '\n' ? DS_SPACE | DS_BREAK : DS_SPACE;
    unsigned c = f & TOKENIZER_CPT_NUMBER ? DS_DIGIT : 0;
    if (is_deepseek_letter(cp))
        c |= DS_LETTER;
    if ((cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x7E) ||
        (cp >= 0x2018 && cp <= 0x201F) || (cp >= 0x3000 && cp <= 0x3002) ||
        (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF5E))
        c |= DS_PUNCT;
    if ((cp >= 0x0800 && cp <= 0x9FA5) || (cp >= 0xAC00 && cp <= 0xD7FF))
        c |= DS_CJK;
    return c;
}

/* Whitespace other than CR or LF: \s? lets one lead a letter or punctuation run. */
static bool deepseek_leads(unsigned c)
{
    return (c & (DS_SPACE | DS_BREAK)) == DS_SPACE;
}

/* Whether the pieces part between characters of classes a and b, c following b. */
static bool deepseek_cut(unsigned a, unsigned b, unsigned c)
{
    if ((a | b) & DS_BREAK || (a ^ b) & (DS_CJK | DS_DIGIT))
        return true;
    if (deepseek_leads(b) && c & (DS_LETTER | DS_PUNCT))
        return true; /* b leads the run after it */
    return !(a & DS_SPACE) && (a ^ b) & (DS_LETTER | DS_PUNCT);
}

/* Whether the whitespace run at pos reaches a CR, LF, letter, punctuation or the end of
 * the text before any other character: then \s+$ cuts it from the text before it. */
static bool deepseek_space_run_trails(const char *s, size_t n, size_t pos)
{
    size_t k;
    unsigned c = deepseek_class_at(s, n, pos, &k);
    while (c & DS_SPACE) {
        if (c & DS_BREAK)
            return true;
        pos += k;
        c = deepseek_class_at(s, n, pos, &k);
        if (pos >= n || c & (DS_LETTER | DS_PUNCT))
            return true;
    }
    return false;
}

/* Walks from pos with the classes of three characters at hand (the one before a possible
 * cut, the one after it, the next) and stops at the first cut. */
static size_t split_deepseek_llm(const char *s, size_t n, size_t pos)
{
    size_t k, k_next;
    unsigned prev = deepseek_class_at(s, n, pos, &k);
    pos += k;
    unsigned cur = deepseek_class_at(s, n, pos, &k);
    while (pos < n) {
        unsigned next = deepseek_class_at(s, n, pos + k, &k_next);
        if (deepseek_cut(prev, cur, next))
            return pos;
        if (!(prev & DS_SPACE) && cur & DS_SPACE && deepseek_space_run_trails(s, n, pos))
            return pos;
        prev = cur;
        cur = next;
        pos += k;
        k = k_next;
    }
    return n;
}

/* Mistral's tekken (Nemo, Small 3.x, Devstral):
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|
 *   \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * cut as llama.cpp cuts it: its std::regex runs on a copy of the text in which every
 * non-ASCII character stands for its category, the case classes written as "a letter not
 * in a-z" and "a letter not in A-Z". So only ASCII letters have a case there: any other
 * letter (É, ß, Я, 中) fits both classes, and marks are neither letters nor anything
 * else the first two alternatives take. */
enum { TK_UPPER, TK_LOWER, TK_CASELESS, TK_DIGIT, TK_SPACE, TK_BREAK, TK_OTHER, TK_NONE };

/* The TK_* class of the character at pos (TK_NONE past the end); *len gets its bytes. */
static int tekken_class_at(const char *s, size_t n, size_t pos, size_t *len)
{
    if (pos >= n) {
        *len = 0;
        return TK_NONE;
    }
    uint32_t cp;
    *len = tokenizer_utf8_next(s + pos, n - pos, &cp);
    if (cp < 0x80) { /* std::regex's own classes in the "C" locale */
        if (cp >= 'A' && cp <= 'Z')
            return TK_UPPER;
        if (cp >= 'a' && cp <= 'z')
            return TK_LOWER;
        if (cp >= '0' && cp <= '9')
            return TK_DIGIT;
        if (cp == '\r' || cp == '\n')
            return TK_BREAK;
        return cp == ' ' || (cp >= '\t' && cp <= '\f') ? TK_SPACE : TK_OTHER;
    }
    uint32_t f = tokenizer_cpt_flags(cp);
    return f & TOKENIZER_CPT_WHITESPACE ? TK_SPACE
           : f & TOKENIZER_CPT_LETTER   ? TK_CASELESS
           : f & TOKENIZER_CPT_NUMBER   ? TK_DIGIT
                                        : TK_OTHER;
}

static bool tekken_is_letter(int c)
{
    return c == TK_UPPER || c == TK_LOWER || c == TK_CASELESS;
}

/* The end of the word of letters that starts at q. The first alternative's upper-case
 * part backtracks from the longest run of upper-case and caseless letters to the last
 * place a lower-case or caseless letter follows: the first lower-case letter, which the
 * lower-case part then extends over lower-case and caseless letters; else the run's last
 * caseless letter, taken alone. A run of ASCII capitals only is the second alternative's. */
static size_t tekken_letters_end(const char *s, size_t n, size_t q)
{
    size_t k, p = q, after_caseless = 0;
    int c;
    while ((c = tekken_class_at(s, n, p, &k)) == TK_UPPER || c == TK_CASELESS) {
        p += k;
        if (c == TK_CASELESS)
            after_caseless = p;
    }
    if (c == TK_LOWER) {
        while ((c = tekken_class_at(s, n, p, &k)) == TK_LOWER || c == TK_CASELESS)
            p += k;
        return p;
    }
    return after_caseless ? after_caseless : p;
}

static size_t split_tekken(const char *s, size_t n, size_t pos)
{
    size_t k0, k;
    int c0 = tekken_class_at(s, n, pos, &k0);
    /* one character that is no letter, digit, CR or LF may lead a word of letters */
    size_t q = tekken_is_letter(c0) || c0 == TK_DIGIT || c0 == TK_BREAK ? pos : pos + k0;
    if (tekken_is_letter(tekken_class_at(s, n, q, &k)))
        return tekken_letters_end(s, n, q);
    if (c0 == TK_DIGIT)
        return pos + k0;
    size_t p = s[pos] == ' ' ? pos + 1 : pos;
    if (tekken_class_at(s, n, p, &k) == TK_OTHER) {
        while (tekken_class_at(s, n, p, &k) == TK_OTHER)
            p += k;
        while (p < n && (s[p] == '\r' || s[p] == '\n' || s[p] == '/'))
            p++;
        return p;
    }
    /* pos is whitespace: \s*[\r\n]+ reaches the run's last break; else \s+(?!\S) leaves
     * the last character of a run of two or more before other text to the next word */
    size_t end = pos, last = pos, brk = 0, count = 0;
    int c;
    while ((c = tekken_class_at(s, n, end, &k)) == TK_SPACE || c == TK_BREAK) {
        last = end;
        end += k;
        count++;
        if (c == TK_BREAK)
            brk = end;
    }
    if (brk)
        return brk;
    return count > 1 && end < n ? last : end;
}

/* tokenizer.ggml.pre -> splitter, under the names llama.cpp's converter writes, and two
 * things llama.cpp's loader sets for its Llama 3 names (byte-level BPE does neither
 * otherwise). add_bos: prompts start with BOS when the file has no
 * tokenizer.ggml.add_bos_token. ignore_merges: a word the vocabulary holds whole is that
 * one token, before any merge (Hugging Face's ignore_merges). */
static const struct {
    const char *name;
    bpe_split_fn split;
    bool add_bos, ignore_merges;
} pre_tokenizers[] = {
    {"", split_gpt2, false, false},
    {"default", split_gpt2, false, false},
    {"gpt2", split_gpt2, false, false},
    {"gpt-2", split_gpt2, false, false},
    {"llama3", split_llama3, true, true},
    {"llama-v3", split_llama3, true, true},
    {"llama-bpe", split_llama3, true, true},
    {"falcon3", split_llama3, true, true},
    {"qwen2", split_qwen2, false, false},
    {"deepseek-r1-qwen", split_qwen2, false, false},
    {"smollm", split_smollm, false, false},
    {"starcoder", split_smollm, false, false},
    {"refact", split_smollm, false, false},
    {"command-r", split_smollm, false, false},
    {"codeshell", split_smollm, false, false},
    {"exaone", split_smollm, false, false},
    {"minerva-7b", split_smollm, false, false},
    {"deepseek-llm", split_deepseek_llm, false, false},
    {"tekken", split_tekken, true, true},
};

static int find_pre(const char *pre)
{
    for (size_t i = 0; i < sizeof pre_tokenizers / sizeof *pre_tokenizers; i++)
        if (strcmp(pre, pre_tokenizers[i].name) == 0)
            return (int)i;
    return -1;
}

bpe_split_fn tokenizer_bpe_splitter(const char *pre)
{
    int i = find_pre(pre);
    return i < 0 ? NULL : pre_tokenizers[i].split;
}

/* Whether llama.cpp starts prompts with BOS for this pre-tokenizer name when the file does
 * not say (Llama 3's family); false for one we do not know. */
static bool tokenizer_bpe_pre_adds_bos(const char *pre)
{
    int i = find_pre(pre);
    return i >= 0 && pre_tokenizers[i].add_bos;
}

bool vocab_default_add_bos(vocab_kind kind, const char *pre)
{
    return kind == VOCAB_KIND_SPM || (kind == VOCAB_KIND_BPE && tokenizer_bpe_pre_adds_bos(pre));
}

/* ---- tables -------------------------------------------------------------------------- */

ts_status tokenizer_bpe_init(ts_tokenizer *tok, ts_error *err)
{
    const tokenizer_vocab *v = &tok->vocab;
    bpe_state *b = calloc(1, sizeof *b);
    if (!b)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate BPE tables");
    tok->bpe = b;
    int pre = find_pre(v->pre);
    if (pre < 0)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "pre-tokenizer '%s' is not supported", v->pre);
    b->split = pre_tokenizers[pre].split;
    b->ignore_merges = pre_tokenizers[pre].ignore_merges;
    if (v->n_merges > (1 << 24)) /* ranks must stay exact as float scores */
        return ts_error_set(err, TS_ERR_FORMAT, "%d merges is too many", v->n_merges);
    if (tokenizer_map_init(&b->merge_rank, (size_t)v->n_merges) != TS_OK)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate the merge table");
    for (int i = 0; i < v->n_merges; i++) {
        const char *m = v->merges[i];
        size_t len = strlen(m);
        if (len < 3 || !strchr(m + 1, ' '))
            return ts_error_set(err, TS_ERR_FORMAT, "merge %d ('%.40s') is not 'left right'", i, m);
        if (tokenizer_map_get(&b->merge_rank, m, len) < 0) /* the first rank wins */
            tokenizer_map_put(&b->merge_rank, m, (uint32_t)len, i);
    }
    for (unsigned x = 0; x < 256; x++) {
        uint32_t cp = byte_to_cp(x);
        if (cp < 0x80) {
            b->byte_utf8[x][0] = (unsigned char)cp;
            b->byte_len[x] = 1;
        } else {
            b->byte_utf8[x][0] = (unsigned char)(0xC0 | (cp >> 6));
            b->byte_utf8[x][1] = (unsigned char)(0x80 | (cp & 0x3F));
            b->byte_len[x] = 2;
        }
    }
    return TS_OK;
}

void tokenizer_bpe_free(bpe_state *b)
{
    if (!b)
        return;
    tokenizer_map_free(&b->merge_rank);
    free(b);
}

/* ---- encoding ------------------------------------------------------------------------ */

typedef struct bpe_symbol {
    int prev, next;
    size_t off, n; /* into the mapped word; n == 0 once merged away */
} bpe_symbol;

typedef struct bpe_ctx {
    const ts_tokenizer *tok;
    char *m;    /* the mapped word */
    char *key;  /* "left right" scratch */
    bpe_symbol *sym;
    tokenizer_heap heap;
} bpe_ctx;

static int try_add_bigram(bpe_ctx *c, int left, int right)
{
    if (left < 0 || right < 0)
        return 0;
    const bpe_symbol *l = &c->sym[left], *r = &c->sym[right];
    memcpy(c->key, c->m + l->off, l->n);
    c->key[l->n] = ' ';
    memcpy(c->key + l->n + 1, c->m + r->off, r->n);
    int32_t rank = tokenizer_map_get(&c->tok->bpe->merge_rank, c->key, l->n + 1 + r->n);
    if (rank < 0)
        return 0;
    tokenizer_bigram b = {left, right, -(float)rank, l->n + r->n};
    return tokenizer_heap_push(&c->heap, b);
}

static int encode_word(bpe_ctx *c, const char *w, size_t len, tokenizer_out *out)
{
    const bpe_state *b = c->tok->bpe;
    size_t mlen = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char x = (unsigned char)w[i];
        memcpy(c->m + mlen, b->byte_utf8[x], b->byte_len[x]);
        mlen += b->byte_len[x];
    }
    if (b->ignore_merges) {
        int32_t whole = tokenizer_map_get(&c->tok->text_to_id, c->m, mlen);
        if (whole >= 0) {
            tokenizer_emit(out, whole);
            return 0;
        }
    }
    int n_sym = 0;
    for (size_t off = 0; off < mlen; n_sym++) {
        uint32_t cp;
        size_t k = tokenizer_utf8_next(c->m + off, mlen - off, &cp);
        c->sym[n_sym] = (bpe_symbol){n_sym - 1, n_sym + 1, off, k};
        off += k;
    }
    c->sym[n_sym - 1].next = -1;
    c->heap.n = 0;
    for (int i = 1; i < n_sym; i++)
        if (try_add_bigram(c, i - 1, i) != 0)
            return -1;
    while (c->heap.n > 0) {
        tokenizer_bigram bg = tokenizer_heap_pop(&c->heap);
        bpe_symbol *l = &c->sym[bg.left], *r = &c->sym[bg.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != bg.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            c->sym[r->next].prev = bg.left;
        if (try_add_bigram(c, l->prev, bg.left) != 0 || try_add_bigram(c, bg.left, l->next) != 0)
            return -1;
    }
    const tokenizer_map *ids = &c->tok->text_to_id;
    for (int i = 0; i != -1; i = c->sym[i].next) {
        const bpe_symbol *s = &c->sym[i];
        int32_t id = tokenizer_map_get(ids, c->m + s->off, s->n);
        if (id >= 0) {
            tokenizer_emit(out, id);
            continue;
        }
        for (size_t k = 0; k < s->n; k++) /* llama.cpp's fallback: single bytes */
            if ((id = tokenizer_map_get(ids, c->m + s->off + k, 1)) >= 0)
                tokenizer_emit(out, id);
    }
    return 0;
}

ts_status tokenizer_bpe_encode(const ts_tokenizer *tok, const char *text, size_t len,
                               tokenizer_out *out)
{
    if (len == 0)
        return TS_OK;
    if (len > TOKENIZER_MAX_TEXT)
        return TS_ERR_TOO_LONG;
    ts_status st = TS_ERR_NOMEM;
    bpe_ctx c = {.tok = tok};
    c.m = malloc(2 * len);
    c.key = malloc(4 * len + 1);
    c.sym = malloc(2 * len * sizeof *c.sym);
    if (!c.m || !c.key || !c.sym)
        goto done;
    for (size_t pos = 0; pos < len;) {
        size_t end = tok->bpe->split(text, len, pos);
        if (encode_word(&c, text + pos, end - pos, out) != 0)
            goto done;
        pos = end;
    }
    st = TS_OK;
done:
    tokenizer_heap_free(&c.heap);
    free(c.sym);
    free(c.key);
    free(c.m);
    return st;
}
