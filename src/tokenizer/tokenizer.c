/* tokenizer.c: building a tokenizer from a vocabulary, the public encode / decode entry
 * points, and the per-token decoded bytes. The encoders live in spm.c and bpe.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

/* Caps on what an untrusted vocabulary may ask for. */
enum {
    TOKENIZER_MAX_TOKENS = 1 << 22,
    TOKENIZER_MAX_TOKEN_LEN = 1 << 16,
};

/* Tokens that end generation besides EOS, EOT and the file's other end ids: the texts
 * llama.cpp ends on (end of a turn, of a message, of a tool call; the fill-in-the-middle
 * pad, repository and file separators). Some conversions type them user-defined or
 * normal; llama.cpp makes each a control token at load, whatever its type, and so does
 * find_special_tokens. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
    "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
    "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
    "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence" "\xef\xbd\x9c>",
    "[e~[",
    /* fill-in-the-middle */
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
};

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xNN>" token text, or -1. */
static int byte_token_value(const char *text, size_t len)
{
    if (len != 6 || memcmp(text, "<0x", 3) != 0 || text[5] != '>')
        return -1;
    int hi = hex_digit(text[3]), lo = hex_digit(text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Writes what token t decodes to into dst, which holds at least max(t->len, 3) bytes;
 * returns the byte count. */
static size_t decode_token(const tokenizer_vocab *v, const vocab_token *t, char *dst)
{
    switch (t->type) {
    case VOCAB_TOKEN_CONTROL:
    case VOCAB_TOKEN_UNUSED:
        return 0;
    case VOCAB_TOKEN_UNKNOWN: /* llama.cpp prints U+2585 for <unk> */
        memcpy(dst, "\xe2\x96\x85", 3);
        return 3;
    case VOCAB_TOKEN_BYTE: {
        int b = byte_token_value(t->text, t->len);
        if (b >= 0) {
            *dst = (char)b;
            return 1;
        }
        break;
    }
    case VOCAB_TOKEN_USER_DEFINED:
        memcpy(dst, t->text, t->len);
        return t->len;
    default:
        break;
    }
    if (v->kind == VOCAB_KIND_BPE)
        return tokenizer_bpe_decode_text(dst, t->text, t->len);
    /* SentencePiece: U+2581 (e2 96 81) stands for a space. */
    size_t n = 0;
    for (uint32_t i = 0; i < t->len; i++) {
        if (i + 2 < t->len && memcmp(t->text + i, "\xe2\x96\x81", 3) == 0) {
            dst[n++] = ' ';
            i += 2;
        } else {
            dst[n++] = t->text[i];
        }
    }
    return n;
}

static ts_status copy_vocab(tokenizer_vocab *dst, const tokenizer_vocab *src, ts_error *err)
{
    *dst = *src;
    dst->tokens = NULL;
    dst->merges = NULL;
    dst->charsmap = NULL;
    dst->charsmap_len = 0;
    dst->n_tokens = 0;
    dst->n_merges = 0;
    dst->pre[sizeof dst->pre - 1] = '\0';
    dst->tokens = calloc((size_t)src->n_tokens, sizeof *dst->tokens);
    if (!dst->tokens)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot copy %d tokens", src->n_tokens);
    for (int i = 0; i < src->n_tokens; i++) {
        const vocab_token *t = &src->tokens[i];
        if (!t->text || t->len > TOKENIZER_MAX_TOKEN_LEN)
            return ts_error_set(err, TS_ERR_FORMAT, "token %d has no text or is too long", i);
        dst->tokens[i] = *t;
        dst->tokens[i].text = malloc(t->len + 1);
        dst->n_tokens = i + 1;
        if (!dst->tokens[i].text)
            return ts_error_set(err, TS_ERR_NOMEM, "cannot copy token %d", i);
        memcpy(dst->tokens[i].text, t->text, t->len);
        dst->tokens[i].text[t->len] = '\0';
    }
    if (src->charsmap && src->charsmap_len > 0) {
        if (!(dst->charsmap = malloc(src->charsmap_len)))
            return ts_error_set(err, TS_ERR_NOMEM, "cannot copy the charsmap");
        memcpy(dst->charsmap, src->charsmap, src->charsmap_len);
        dst->charsmap_len = src->charsmap_len;
    }
    if (src->n_merges > 0) {
        dst->merges = calloc((size_t)src->n_merges, sizeof *dst->merges);
        if (!dst->merges)
            return ts_error_set(err, TS_ERR_NOMEM, "cannot copy %d merges", src->n_merges);
        for (int i = 0; i < src->n_merges; i++) {
            if (!src->merges[i])
                return ts_error_set(err, TS_ERR_FORMAT, "merge %d is missing", i);
            dst->merges[i] = strdup(src->merges[i]);
            dst->n_merges = i + 1;
            if (!dst->merges[i])
                return ts_error_set(err, TS_ERR_NOMEM, "cannot copy merge %d", i);
        }
    }
    return TS_OK;
}

static ts_status check_special(const tokenizer_vocab *v, int32_t id, const char *what,
                               ts_error *err)
{
    if (id < -1 || id >= v->n_tokens)
        return ts_error_set(err, TS_ERR_FORMAT, "%s token id %d outside the vocabulary of %d",
                            what, (int)id, v->n_tokens);
    return TS_OK;
}

/* WordPiece answers a word it cannot cut with the unknown token, so it needs one; its
 * separator, if any, must be a token. */
static ts_status check_wordpiece(const tokenizer_vocab *v, ts_error *err)
{
    if (v->unk_id < 0)
        return ts_error_set(err, TS_ERR_FORMAT, "a bert vocabulary needs an unknown token");
    return check_special(v, v->sep_id, "separator", err);
}

/* Unigram answers a character no piece covers with the unknown token; its separator,
 * if any, must be a token; its charsmap, if any, has a size word and a double array that ends before the replacements. */
static ts_status check_unigram(const tokenizer_vocab *v, ts_error *err)
{
    if (v->unk_id < 0)
        return ts_error_set(err, TS_ERR_FORMAT, "a t5 (Unigram) vocabulary needs an unknown token");
    ts_status st = check_special(v, v->sep_id, "separator", err);
    if (st != TS_OK)
        return st;
    uint32_t blob = 0;
    if (v->charsmap && v->charsmap_len >= 4)
        blob = (uint32_t)v->charsmap[0] | (uint32_t)v->charsmap[1] << 8 |
               (uint32_t)v->charsmap[2] << 16 | (uint32_t)v->charsmap[3] << 24;
    if ((v->charsmap_len > 0 && !v->charsmap) ||
        (v->charsmap && (v->charsmap_len < 4 || (uint64_t)blob + 4 >= v->charsmap_len)))
        return ts_error_set(err, TS_ERR_FORMAT, "precompiled charsmap of %u bytes cannot hold "
                            "its %u-byte double array", v->charsmap_len, blob);
    return TS_OK;
}

static ts_status build_pieces(ts_tokenizer *tok, ts_error *err)
{
    const tokenizer_vocab *v = &tok->vocab;
    size_t bound = 0; /* no token decodes to more than max(len, 3) bytes */
    for (int i = 0; i < v->n_tokens; i++)
        bound += v->tokens[i].len > 3 ? v->tokens[i].len : 3;
    if (bound > UINT32_MAX)
        return ts_error_set(err, TS_ERR_TOO_LONG, "token texts total %zu bytes", bound);
    tok->piece_off = malloc(((size_t)v->n_tokens + 1) * sizeof *tok->piece_off);
    tok->pieces = malloc(bound);
    if (!tok->piece_off || !tok->pieces)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate the piece table");
    size_t off = 0;
    for (int i = 0; i < v->n_tokens; i++) {
        tok->piece_off[i] = (uint32_t)off;
        off += decode_token(v, &v->tokens[i], tok->pieces + off);
    }
    tok->piece_off[v->n_tokens] = (uint32_t)off;
    return TS_OK;
}

static void add_eog(ts_tokenizer *tok, int32_t id)
{
    for (int i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id)
            return;
    if (id >= 0 && tok->n_eog < (int)(sizeof tok->eog / sizeof *tok->eog))
        tok->eog[tok->n_eog++] = id;
}

static int32_t id_of(const ts_tokenizer *tok, const char *text)
{
    return tokenizer_map_get(&tok->text_to_id, text, strlen(text));
}

/* The tokens spelled as one of eog_texts that end generation, and their types: control,
 * so that they end generation and print nothing. Two exceptions, as llama.cpp makes them:
 * where <|return|> and <|call|> (or <|calls|> and <|flush|>) end a message, <|end|> only
 * separates messages and prints (gpt-oss, Solar Open); where <|tool_response> is one, </s>
 * is ordinary text (Gemma 4, PaddleOCR). */
static void find_eog_texts(ts_tokenizer *tok)
{
    int32_t end = id_of(tok, "<|end|>"), s_end = id_of(tok, "</s>");
    bool end_separates = end >= 0 && ((id_of(tok, "<|return|>") >= 0 && id_of(tok, "<|call|>") >= 0) ||
                                      (id_of(tok, "<|calls|>") >= 0 && id_of(tok, "<|flush|>") >= 0));
    bool s_is_text = s_end >= 0 && id_of(tok, "<|tool_response>") >= 0;
    for (size_t k = 0; k < sizeof eog_texts / sizeof *eog_texts; k++) {
        int32_t id = id_of(tok, eog_texts[k]);
        if (id < 0)
            continue;
        if (id == end && end_separates) {
            tok->vocab.tokens[id].type = VOCAB_TOKEN_USER_DEFINED;
            continue;
        }
        if (id == s_end && s_is_text) {
            tok->vocab.tokens[id].type = VOCAB_TOKEN_NORMAL;
            continue;
        }
        tok->vocab.tokens[id].type = VOCAB_TOKEN_CONTROL;
        add_eog(tok, id);
    }
}

static void find_special_tokens(ts_tokenizer *tok)
{
    const tokenizer_vocab *v = &tok->vocab;
    for (int b = 0; b < 256; b++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        int32_t id = tokenizer_map_get(&tok->text_to_id, buf, 6);
        if (id < 0)
            id = tokenizer_map_get(&tok->text_to_id, (const char[]){(char)b}, 1);
        tok->byte_token[b] = id >= 0 ? id : v->unk_id;
    }
    /* the file's own end ids first, then the ones llama.cpp knows by their text */
    add_eog(tok, v->eos_id);
    add_eog(tok, v->eot_id);
    for (int i = 0; i < v->n_eog_extra; i++)
        add_eog(tok, v->eog_extra[i]);
    find_eog_texts(tok);
}

/* Whether ts_tokenize_ex finds t spelled out in text: control, user-defined and unknown
 * tokens, as llama.cpp's special-token pass does. */
static bool is_special(const vocab_token *t)
{
    return t->len > 0 && (t->type == VOCAB_TOKEN_CONTROL || t->type == VOCAB_TOKEN_USER_DEFINED ||
                          t->type == VOCAB_TOKEN_UNKNOWN);
}

/* The tokens ts_tokenize_ex finds spelled out in text (control and user-defined ones), in
 * a byte trie: finding the longest one at a position then costs at most its length in
 * steps, however many share its first bytes (Gemma's 6000 <unusedN>, Llama 3's 250
 * <|reserved_special_token_N|>: a prompt of '<' would otherwise compare each with every
 * byte). Of tokens spelled alike, the lowest id stands for them. */
static ts_status build_special_trie(ts_tokenizer *tok, ts_error *err)
{
    const tokenizer_vocab *v = &tok->vocab;
    for (int i = 0; i < v->n_tokens; i++)
        tok->n_special += is_special(&v->tokens[i]);
    return tokenizer_trie_build(&tok->special, v, is_special, TRIE_FIRST_ID, "special tokens",
                                err);
}

ts_status tokenizer_create(const tokenizer_vocab *v, ts_tokenizer **out, ts_error *err)
{
    ts_status st;
    *out = NULL;
    if (!v || v->n_tokens <= 0 || v->n_tokens > TOKENIZER_MAX_TOKENS || !v->tokens)
        return ts_error_set(err, TS_ERR_FORMAT, "vocabulary size %d out of range",
                            v ? v->n_tokens : 0);
    if (v->n_merges < 0 || (v->n_merges > 0 && !v->merges))
        return ts_error_set(err, TS_ERR_FORMAT, "merge count %d without merges", v->n_merges);
    if (v->kind != VOCAB_KIND_SPM && v->kind != VOCAB_KIND_BPE && v->kind != VOCAB_KIND_WPM &&
        v->kind != VOCAB_KIND_UGM)
        return ts_error_set(err, TS_ERR_UNSUPPORTED, "unknown vocabulary kind %d", (int)v->kind);
    if (v->kind == VOCAB_KIND_WPM && (st = check_wordpiece(v, err)) != TS_OK)
        return st;
    if (v->kind == VOCAB_KIND_UGM && (st = check_unigram(v, err)) != TS_OK)
        return st;
    if ((st = check_special(v, v->bos_id, "BOS", err)) || (st = check_special(v, v->eos_id, "EOS", err)) ||
        (st = check_special(v, v->unk_id, "unknown", err)) ||
        (st = check_special(v, v->pad_id, "padding", err)) ||
        (st = check_special(v, v->eot_id, "end-of-turn", err)))
        return st;
    if (v->n_eog_extra < 0 || v->n_eog_extra > (int)(sizeof v->eog_extra / sizeof *v->eog_extra))
        return ts_error_set(err, TS_ERR_FORMAT, "%d end-of-generation ids", v->n_eog_extra);
    for (int i = 0; i < v->n_eog_extra; i++)
        if ((st = check_special(v, v->eog_extra[i], "end-of-generation", err)))
            return st;

    ts_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate a tokenizer");
    if ((st = copy_vocab(&tok->vocab, v, err)) != TS_OK)
        goto fail;
    if (tokenizer_map_init(&tok->text_to_id, (size_t)v->n_tokens) != TS_OK) {
        st = ts_error_set(err, TS_ERR_NOMEM, "cannot allocate the token map");
        goto fail;
    }
    for (int i = 0; i < v->n_tokens; i++)
        tokenizer_map_put(&tok->text_to_id, tok->vocab.tokens[i].text, tok->vocab.tokens[i].len, i);
    find_special_tokens(tok);
    if ((st = build_special_trie(tok, err)) != TS_OK || (st = build_pieces(tok, err)) != TS_OK)
        goto fail;
    if (v->kind == VOCAB_KIND_BPE && (st = tokenizer_bpe_init(tok, err)) != TS_OK)
        goto fail;
    if (v->kind == VOCAB_KIND_WPM && (st = tokenizer_wpm_init(tok, err)) != TS_OK)
        goto fail;
    if (v->kind == VOCAB_KIND_UGM && (st = tokenizer_ugm_init(tok, err)) != TS_OK)
        goto fail;
    *out = tok;
    return TS_OK;
fail:
    ts_tokenizer_free(tok);
    return st;
}

void ts_tokenizer_free(ts_tokenizer *tok)
{
    if (!tok)
        return;
    tokenizer_bpe_free(tok->bpe);
    free(tok->wpm_trie);
    tokenizer_ugm_free(tok->ugm);
    free(tok->special);
    free(tok->pieces);
    free(tok->piece_off);
    tokenizer_map_free(&tok->text_to_id);
    vocab_clear(&tok->vocab);
    free(tok);
}

const tokenizer_vocab *tokenizer_get_vocab(const ts_tokenizer *tok)
{
    return &tok->vocab;
}

ts_status ts_tokenize(const ts_tokenizer *tok, const char *text, size_t len, bool add_special,
                      int32_t *ids, size_t cap, size_t *n_ids)
{
    ts_tokenize_opts o = {.add_special = add_special};
    return ts_tokenize_ex(tok, text, len, &o, ids, cap, n_ids);
}

static ts_status encode_plain(const ts_tokenizer *tok, const char *text, size_t len,
                              tokenizer_out *out)
{
    switch (tok->vocab.kind) {
    case VOCAB_KIND_BPE:
        return tokenizer_bpe_encode(tok, text, len, out);
    case VOCAB_KIND_WPM:
        return tokenizer_wpm_encode(tok, text, len, out);
    case VOCAB_KIND_UGM:
        return tokenizer_ugm_encode(tok, text, len, out);
    default:
        return tokenizer_spm_encode(tok, text, len, out);
    }
}

/* The longest special token whose text starts s (n bytes available); -1 if none. */
static int32_t special_at(const ts_tokenizer *tok, const char *s, size_t n)
{
    int32_t best = -1, node = 0;
    for (size_t i = 0; i < n; i++) {
        if ((node = tokenizer_trie_child(tok->special, node, (uint8_t)s[i])) < 0)
            break;
        if (tok->special[node].token >= 0)
            best = tok->special[node].token;
    }
    return best;
}

static bool spans_valid(const ts_tokenize_opts *o, size_t len)
{
    if (o->n_plain > 0 && !o->plain)
        return false;
    size_t end = 0;
    for (size_t i = 0; i < o->n_plain; i++) {
        const ts_text_span *sp = &o->plain[i];
        if (sp->off < end || sp->off > len || sp->len > len - sp->off)
            return false;
        end = sp->off + sp->len;
    }
    return true;
}

ts_status ts_tokenize_ex(const ts_tokenizer *tok, const char *text, size_t len,
                         const ts_tokenize_opts *o, int32_t *ids, size_t cap, size_t *n_ids)
{
    static const ts_tokenize_opts defaults = {0};
    if (n_ids)
        *n_ids = 0;
    o = o ? o : &defaults;
    if (!tok || (!text && len > 0) || (!ids && cap > 0) || !n_ids || !spans_valid(o, len))
        return TS_ERR_INVALID_ARG;
    if (len > TOKENIZER_MAX_TEXT) /* the whole text, not each piece between special tokens */
        return TS_ERR_TOO_LONG;
    tokenizer_out out = {ids, cap, 0};
    /* llama.cpp's WordPiece puts [CLS] ... [SEP] around a text whatever add_bos_token and
     * add_sep_token say (those steer rerank pairs only) */
    bool wpm = tok->vocab.kind == VOCAB_KIND_WPM;
    if (o->add_special && (wpm ? tok->vocab.bos_id >= 0 : ts_tokenizer_add_bos(tok)))
        tokenizer_emit(&out, tok->vocab.bos_id);
    size_t piece = 0; /* start of the plain text not yet encoded */
    if (o->parse_special && tok->n_special > 0) { /* any special tokens at all */
        size_t span = 0;
        for (size_t i = 0; i < len;) {
            if (span < o->n_plain && i >= o->plain[span].off) {
                i = o->plain[span].off + o->plain[span].len;
                span++;
                continue;
            }
            size_t limit = span < o->n_plain ? o->plain[span].off : len;
            int32_t id = special_at(tok, text + i, limit - i);
            if (id < 0) {
                i++;
                continue;
            }
            ts_status st = encode_plain(tok, text + piece, i - piece, &out);
            if (st != TS_OK)
                return st;
            tokenizer_emit(&out, id);
            i += tok->vocab.tokens[id].len;
            piece = i;
        }
    }
    ts_status st = encode_plain(tok, text + piece, len - piece, &out);
    /* WordPiece closes a text with [SEP] (BERT's single-text form, [CLS] text [SEP]); the
     * others with EOS where the vocabulary asks and the caller wants a whole text's ending */
    if (st == TS_OK && o->add_special && wpm && tok->vocab.sep_id >= 0)
        tokenizer_emit(&out, tok->vocab.sep_id);
    else if (st == TS_OK && o->add_special && o->add_eos && ts_tokenizer_text_eos(tok))
        tokenizer_emit(&out, tok->vocab.eos_id);
    *n_ids = out.n;
    return st;
}

ts_status ts_tokenize_alloc(const ts_tokenizer *tok, const char *text, size_t len,
                            const ts_tokenize_opts *o, int32_t **ids, size_t *n_ids)
{
    if (!ids || !n_ids)
        return TS_ERR_INVALID_ARG;
    *ids = NULL;
    *n_ids = 0;
    if (len > TOKENIZER_MAX_TEXT) /* before allocating 4 bytes per byte of it */
        return TS_ERR_TOO_LONG;
    /* An id per byte, plus BOS, EOS and a space prefix, holds nearly every answer, so one
     * pass usually does; the rest (one-byte special tokens, each followed by a prefixed
     * piece) take a second. */
    size_t cap = len + 3, n = 0;
    int32_t *buf = malloc(cap * sizeof *buf);
    ts_status st = buf ? ts_tokenize_ex(tok, text, len, o, buf, cap, &n) : TS_ERR_NOMEM;
    if (st == TS_OK && n > cap) {
        int32_t *more = realloc(buf, n * sizeof *buf);
        if (more)
            buf = more;
        st = more ? ts_tokenize_ex(tok, text, len, o, buf, n, &n) : TS_ERR_NOMEM;
    }
    if (st != TS_OK || n == 0) {
        free(buf);
        return st;
    }
    *ids = buf;
    *n_ids = n;
    return TS_OK;
}

const char *ts_token_bytes(const ts_tokenizer *tok, int32_t id, size_t *len)
{
    if (!tok || id < 0 || id >= tok->vocab.n_tokens) {
        if (len)
            *len = 0;
        return "";
    }
    if (len)
        *len = tok->piece_off[id + 1] - tok->piece_off[id];
    return tok->pieces + tok->piece_off[id];
}

const char *ts_token_text(const ts_tokenizer *tok, int32_t id)
{
    if (!tok || id < 0 || id >= tok->vocab.n_tokens || !tok->vocab.tokens[id].text)
        return "";
    return tok->vocab.tokens[id].text;
}

const char *ts_token_piece(const ts_tokenizer *tok, int32_t id, size_t *len)
{
    size_t n = 0;
    const char *b = ts_token_bytes(tok, id, &n);
    int type = tok && id >= 0 && id < tok->vocab.n_tokens ? tok->vocab.tokens[id].type
                                                          : VOCAB_TOKEN_NORMAL;
    if (type == VOCAB_TOKEN_UNUSED) {
        b = "", n = 0;
    } else if (n == 0 || type == VOCAB_TOKEN_UNKNOWN) { /* not U+2585 for <unk> here */
        b = ts_token_text(tok, id);
        n = strlen(b);
    }
    *len = n;
    return b;
}

size_t ts_detokenize(const ts_tokenizer *tok, const int32_t *ids, size_t n_ids, char *out,
                     size_t cap)
{
    size_t n = 0;
    /* the space of the first word's '▁': SentencePiece's added prefix, WordPiece's mark
     * of a word-initial piece */
    bool strip = tok && (((tok->vocab.kind == VOCAB_KIND_SPM || tok->vocab.kind == VOCAB_KIND_UGM) &&
                          tok->vocab.add_space_prefix) ||
                         tok->vocab.kind == VOCAB_KIND_WPM);
    for (size_t i = 0; tok && i < n_ids; i++) {
        size_t len;
        const char *p = ts_token_bytes(tok, ids[i], &len);
        if (len == 0)
            continue;
        if (strip && p[0] == ' ')
            p++, len--;
        strip = false;
        for (size_t k = 0; k < len; k++, n++)
            if (n < cap)
                out[n] = p[k];
    }
    return n;
}

int ts_tokenizer_vocab_size(const ts_tokenizer *tok)
{
    return tok ? tok->vocab.n_tokens : 0;
}

int32_t ts_tokenizer_bos(const ts_tokenizer *tok)
{
    return tok ? tok->vocab.bos_id : -1;
}

bool ts_tokenizer_add_bos(const ts_tokenizer *tok)
{
    return tok && tok->vocab.add_bos && tok->vocab.bos_id >= 0;
}

bool ts_tokenizer_add_eos(const ts_tokenizer *tok)
{
    return tok && tok->vocab.add_eos && tok->vocab.eos_id >= 0;
}

bool ts_tokenizer_text_eos(const ts_tokenizer *tok)
{
    return ts_tokenizer_add_eos(tok) && tok->vocab.kind != VOCAB_KIND_WPM;
}

int32_t ts_tokenizer_eos(const ts_tokenizer *tok)
{
    return tok ? tok->vocab.eos_id : -1;
}

int32_t ts_tokenizer_sep(const ts_tokenizer *tok)
{
    return tok && tok->vocab.add_sep ? tok->vocab.sep_id : -1;
}

bool ts_token_is_eog(const ts_tokenizer *tok, int32_t id)
{
    for (int i = 0; tok && i < tok->n_eog; i++)
        if (tok->eog[i] == id)
            return true;
    return false;
}

bool ts_token_is_plain(const ts_tokenizer *tok, int32_t id)
{
    const tokenizer_vocab *v = tok ? &tok->vocab : NULL;
    if (v && id >= 0 && id < v->n_tokens) {
        int32_t t = v->tokens[id].type;
        if (t != VOCAB_TOKEN_NORMAL && t != VOCAB_TOKEN_UNDEFINED)
            return false;
        if (id == v->bos_id || id == v->eos_id || id == v->unk_id || id == v->pad_id ||
            id == v->eot_id)
            return false;
    }
    return !ts_token_is_eog(tok, id);
}
