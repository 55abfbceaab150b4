/* gguf_vocab.c: a tokenizer_vocab from a GGUF file's tokenizer.ggml.* keys. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/vocab.h"

/* More tokens or merges than this is taken for corruption. */
enum { VOCAB_MAX_TOKENS = 1 << 22, VOCAB_MAX_MERGES = 1 << 22 };

static char *dup_str(gguf_str s)
{
    char *p = malloc((size_t)s.len + 1);
    if (p) {
        memcpy(p, s.ptr, (size_t)s.len);
        p[s.len] = '\0';
    }
    return p;
}

/* An optional token id: absent gives fallback where it lies in the vocabulary, else -1;
 * 0xFFFFFFFF (llama.cpp's "none") gives -1. */
static ts_status get_id(const gguf_file *f, const char *key, int32_t fallback, int n_tokens,
                        int32_t *out, ts_error *err)
{
    *out = -1;
    int64_t id;
    ts_status st = gguf_get_i64(f, key, &id, err);
    if (st == TS_ERR_NOT_FOUND && fallback < n_tokens)
        *out = fallback;
    if (st == TS_ERR_NOT_FOUND || (st == TS_OK && (id == UINT32_MAX || id == -1)))
        return TS_OK;
    if (st != TS_OK)
        return st;
    if (id < 0 || id >= n_tokens)
        return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s': token id %lld is not below "
                            "the vocabulary size %d", key, (long long)id, n_tokens);
    *out = (int32_t)id;
    return TS_OK;
}

static ts_status get_flag(const gguf_file *f, const char *key, bool *out, ts_error *err)
{
    ts_status st = gguf_get_bool(f, key, out, err);
    return st == TS_ERR_NOT_FOUND ? TS_OK : st;
}

/* An optional per-token array of elem: absent gives NULL, a wrong length an error. */
static ts_status get_per_token(const gguf_file *f, const char *key, gguf_type elem, int n,
                               const gguf_value **out, ts_error *err)
{
    *out = NULL;
    ts_status st = gguf_get_array(f, key, elem, out, err);
    if (st == TS_ERR_NOT_FOUND) {
        *out = NULL;
        return TS_OK;
    }
    if (st == TS_OK && (*out)->v.arr.n != (uint64_t)n)
        return ts_error_set(err, TS_ERR_FORMAT, "metadata key '%s' has %llu entries for %d tokens",
                            key, (unsigned long long)(*out)->v.arr.n, n);
    return st;
}

static ts_status read_tokens(tokenizer_vocab *v, const gguf_file *f, ts_error *err)
{
    const gguf_value *tokens, *scores, *types;
    ts_status st = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens, err);
    if (st != TS_OK)
        return st;
    uint64_t n = tokens->v.arr.n;
    if (n == 0 || n > VOCAB_MAX_TOKENS)
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens (1 to %d "
                            "allowed)", (unsigned long long)n, VOCAB_MAX_TOKENS);
    if ((st = get_per_token(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, (int)n, &scores,
                            err)) != TS_OK ||
        (st = get_per_token(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, (int)n, &types,
                            err)) != TS_OK)
        return st;
    if (!(v->tokens = calloc((size_t)n, sizeof *v->tokens)))
        return ts_error_set(err, TS_ERR_NOMEM, "vocabulary of %llu tokens", (unsigned long long)n);
    v->n_tokens = (int)n;
    for (int i = 0; i < v->n_tokens; i++) {
        vocab_token *t = &v->tokens[i];
        gguf_str s = gguf_array_str(tokens, (uint64_t)i);
        if (s.len > UINT32_MAX / 2)
            return ts_error_set(err, TS_ERR_FORMAT, "token %d is %llu bytes long", i,
                                (unsigned long long)s.len);
        if (!(t->text = dup_str(s)))
            return ts_error_set(err, TS_ERR_NOMEM, "token %d", i);
        t->len = (uint32_t)s.len;
        t->score = scores ? gguf_array_f32(scores, (uint64_t)i) : 0.0f;
        t->type = types ? gguf_array_i32(types, (uint64_t)i) : VOCAB_TOKEN_NORMAL;
        if (t->type < VOCAB_TOKEN_UNDEFINED || t->type > VOCAB_TOKEN_BYTE)
            return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.ggml.token_type: token %d has "
                                "type %d", i, t->type);
    }
    return TS_OK;
}

static ts_status read_merges(tokenizer_vocab *v, const gguf_file *f, ts_error *err)
{
    const gguf_value *merges;
    ts_status st = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, err);
    if (st == TS_ERR_NOT_FOUND)
        return v->kind == VOCAB_KIND_BPE
                   ? ts_error_set(err, TS_ERR_FORMAT, "a gpt2 vocabulary needs tokenizer.ggml.merges")
                   : TS_OK;
    if (st != TS_OK)
        return st;
    uint64_t n = merges->v.arr.n;
    if (n > VOCAB_MAX_MERGES)
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.ggml.merges: %llu merges",
                            (unsigned long long)n);
    if (n && !(v->merges = calloc((size_t)n, sizeof *v->merges)))
        return ts_error_set(err, TS_ERR_NOMEM, "%llu merges", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++, v->n_merges++)
        if (!(v->merges[i] = dup_str(gguf_array_str(merges, i))))
            return ts_error_set(err, TS_ERR_NOMEM, "merge %llu", (unsigned long long)i);
    return TS_OK;
}

/* The rest of a bert vocabulary: its special ids, with llama.cpp's defaults where the
 * file names none (BERT's [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102, each only if the
 * vocabulary reaches it), [CLS] and [SEP] around texts unless the file says otherwise,
 * and the normalizer: lowercase when the file says so, accents folded as it says or else
 * together with lowercasing (BERT's uncased models). */
static ts_status read_wordpiece(tokenizer_vocab *v, const gguf_file *f, ts_error *err)
{
    int n = v->n_tokens;
    ts_status st;
    if ((st = get_id(f, "tokenizer.ggml.bos_token_id", 101, n, &v->bos_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.eos_token_id", -1, n, &v->eos_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.unknown_token_id", 100, n, &v->unk_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.seperator_token_id", 102, n, &v->sep_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.padding_token_id", 0, n, &v->pad_id, err)))
        return st;
    v->eot_id = -1;
    if (v->unk_id < 0)
        return ts_error_set(err, TS_ERR_FORMAT, "a bert vocabulary needs an unknown token "
                            "(tokenizer.ggml.unknown_token_id)");
    v->add_bos = true;
    v->add_sep = true;
    if ((st = get_flag(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_sep_token", &v->add_sep, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.normalizer.lowercase", &v->lowercase, err)) != TS_OK)
        return st;
    v->strip_accents = v->lowercase;
    return get_flag(f, "tokenizer.ggml.normalizer.strip_accents", &v->strip_accents, err);
}

/* The rest of a t5 (Unigram) vocabulary, as llama.cpp reads it: ids default to <pad> 0,
 * </s> 1 and <unk> 2 (each only if the vocabulary reaches it), no BOS and no separator;
 * texts end with EOS and start with none, and rerank pairs get the separator only where
 * the file says so (XLM-RoBERTa rerankers do); no space prefix and no merging
 * of spaces unless it asks; the precompiled charsmap, a byte array, whose header must fit
 * (its size word and a double array that ends before the replacements). Scores are the
 * model itself, so a file without them is refused. */
static ts_status read_unigram(tokenizer_vocab *v, const gguf_file *f, ts_error *err)
{
    int n = v->n_tokens;
    const gguf_value *scores, *map;
    ts_status st;
    if ((st = get_per_token(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, n, &scores, err)))
        return st;
    if (!scores)
        return ts_error_set(err, TS_ERR_FORMAT, "a t5 (Unigram) vocabulary needs "
                            "tokenizer.ggml.scores");
    if ((st = get_id(f, "tokenizer.ggml.bos_token_id", -1, n, &v->bos_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.eos_token_id", 1, n, &v->eos_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.unknown_token_id", 2, n, &v->unk_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.padding_token_id", 0, n, &v->pad_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.seperator_token_id", -1, n, &v->sep_id, err)))
        return st;
    v->eot_id = -1;
    if (v->unk_id < 0)
        return ts_error_set(err, TS_ERR_FORMAT, "a t5 (Unigram) vocabulary needs an unknown "
                            "token (tokenizer.ggml.unknown_token_id)");
    v->add_eos = true;
    if ((st = get_flag(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_sep_token", &v->add_sep, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)) ||
        (st = get_flag(f, "tokenizer.ggml.remove_extra_whitespaces",
                       &v->remove_extra_whitespaces, err)) != TS_OK)
        return st;
    static const char key[] = "tokenizer.ggml.precompiled_charsmap";
    st = gguf_get_array(f, key, GGUF_TYPE_UINT8, &map, err);
    if (st != TS_OK && st != TS_ERR_NOT_FOUND)
        st = gguf_get_array(f, key, GGUF_TYPE_INT8, &map, err);
    if (st == TS_ERR_NOT_FOUND)
        return TS_OK;
    if (st != TS_OK)
        return ts_error_set(err, TS_ERR_FORMAT, "%s must be an array of bytes", key);
    uint64_t len = map->v.arr.n;
    uint32_t blob = 0;
    if (len >= 4)
        blob = (uint32_t)map->v.arr.raw[0] | (uint32_t)map->v.arr.raw[1] << 8 |
               (uint32_t)map->v.arr.raw[2] << 16 | (uint32_t)map->v.arr.raw[3] << 24;
    if (len < 4 || len > UINT32_MAX || (uint64_t)blob + 4 >= len)
        return ts_error_set(err, TS_ERR_FORMAT, "%s: %llu bytes cannot hold its %u-byte "
                            "double array and replacements", key, (unsigned long long)len, blob);
    if (!(v->charsmap = malloc((size_t)len)))
        return ts_error_set(err, TS_ERR_NOMEM, "%s of %llu bytes", key, (unsigned long long)len);
    memcpy(v->charsmap, map->v.arr.raw, (size_t)len);
    v->charsmap_len = (uint32_t)len;
    return TS_OK;
}

static ts_status read_vocab(tokenizer_vocab *v, const gguf_file *f, ts_error *err)
{
    gguf_str model, pre;
    ts_status st = gguf_get_str(f, "tokenizer.ggml.model", &model, err);
    if (st != TS_OK)
        return st;
    if (gguf_str_eq(model, "llama"))
        v->kind = VOCAB_KIND_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        v->kind = VOCAB_KIND_BPE;
    else if (gguf_str_eq(model, "bert"))
        v->kind = VOCAB_KIND_WPM;
    else if (gguf_str_eq(model, "t5"))
        v->kind = VOCAB_KIND_UGM;
    else
        return ts_error_set(err, TS_ERR_UNSUPPORTED,
                            "tokenizer model '%.*s' is not supported (llama, gpt2, bert and t5 are)",
                            (int)(model.len > 64 ? 64 : model.len), model.ptr);
    if ((st = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err)) == TS_OK) {
        if (pre.len >= sizeof v->pre)
            return ts_error_set(err, TS_ERR_UNSUPPORTED, "tokenizer.ggml.pre '%.*s' is unknown",
                                (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
        memcpy(v->pre, pre.ptr, (size_t)pre.len);
        v->pre[pre.len] = '\0';
    } else if (st != TS_ERR_NOT_FOUND) {
        return st;
    }
    if ((st = read_tokens(v, f, err)) != TS_OK || (st = read_merges(v, f, err)) != TS_OK)
        return st;
    if (v->kind == VOCAB_KIND_WPM)
        return read_wordpiece(v, f, err);
    if (v->kind == VOCAB_KIND_UGM)
        return read_unigram(v, f, err);
    /* Missing ids take llama.cpp's defaults: SentencePiece's <unk> 0, <s> 1 and </s> 2
     * (each only if the vocabulary reaches it), none for byte-level BPE. */
    bool spm = v->kind == VOCAB_KIND_SPM;
    int n = v->n_tokens;
    if ((st = get_id(f, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n, &v->bos_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n, &v->eos_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n, &v->unk_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.padding_token_id", -1, n, &v->pad_id, err)) ||
        (st = get_id(f, "tokenizer.ggml.eot_token_id", -1, n, &v->eot_id, err)))
        return st;
    static const char *const eog_keys[] = {
        "tokenizer.ggml.eom_token_id", "tokenizer.ggml.fim_pad_token_id",
        "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
    };
    for (size_t k = 0; k < sizeof eog_keys / sizeof *eog_keys; k++) {
        int32_t id;
        if ((st = get_id(f, eog_keys[k], -1, n, &id, err)) != TS_OK)
            return st;
        if (id >= 0)
            v->eog_extra[v->n_eog_extra++] = id;
    }
    /* llama.cpp's defaults: SentencePiece adds BOS and a leading space; byte-level BPE no
     * space, and BOS only for the pre-tokenizers llama.cpp names (Llama 3's). The keys,
     * when present, override either. */
    v->add_bos = vocab_default_add_bos(v->kind, v->pre);
    v->add_space_prefix = v->kind == VOCAB_KIND_SPM;
    if ((st = get_flag(f, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) != TS_OK ||
        (st = get_flag(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)) != TS_OK)
        return st;
    return TS_OK;
}

ts_status vocab_read_gguf(tokenizer_vocab *v, const gguf_file *f, ts_error *err)
{
    memset(v, 0, sizeof *v);
    ts_status st = read_vocab(v, f, err);
    if (st != TS_OK) {
        vocab_clear(v);
        memset(v, 0, sizeof *v);
    }
    return st;
}

ts_status ts_tokenizer_load_gguf(const char *path, ts_tokenizer **out, ts_error *err)
{
    *out = NULL;
    gguf_file *f = NULL;
    tokenizer_vocab v;
    memset(&v, 0, sizeof v);
    ts_status st = gguf_open(path, &f, err);
    if (st == TS_OK)
        st = vocab_read_gguf(&v, f, err);
    if (st == TS_OK)
        st = tokenizer_create(&v, out, err);
    vocab_clear(&v);
    gguf_close(f);
    return st;
}
