/* hf_vocab.c: a Hugging Face tokenizer.json as a GGUF vocabulary (hf_convert.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_convert.h"

enum { HF_MAX_JSON = 64 << 20 };

/* dir/name parsed as JSON into *out; TS_ERR_NOT_FOUND when the file is missing. */
ts_status model_hf__read_json(cJSON **out, const char *dir, const char *name, ts_error *err);

ts_status model_hf__read_json(cJSON **out, const char *dir, const char *name, ts_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_error_set(err, TS_ERR_NOT_FOUND, "no %s in %s", name, dir);
    char *text = malloc(HF_MAX_JSON + 1);
    size_t len = text ? fread(text, 1, HF_MAX_JSON + 1, f) : 0;
    bool bad = !text || ferror(f);
    fclose(f);
    if (bad || len > HF_MAX_JSON) {
        free(text);
        return ts_error_set(err, TS_ERR_FORMAT, "%s: %s", path,
                            !text ? "out of memory" : bad ? "cannot read it" : "over 64 MiB");
    }
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return ts_error_set(err, TS_ERR_FORMAT, "%s is not a JSON object", path);
    }
    return TS_OK;
}

/* True when some normalizer or pre-tokenizer of t (recursively through Sequences) is of
 * type kind, and, for Replace, replaces " " by "▁". */
static bool has_step(const cJSON *t, const char *kind)
{
    if (!cJSON_IsObject(t))
        return false;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, kind)) {
        if (strcmp(kind, "Replace"))
            return true;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(t, "pattern");
        const cJSON *s = pat ? cJSON_GetObjectItemCaseSensitive(pat, "String") : NULL;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "content");
        return cJSON_IsString(s) && !strcmp(s->valuestring, " ") && cJSON_IsString(c) &&
               !strcmp(c->valuestring, "\xe2\x96\x81");
    }
    const cJSON *list[] = {cJSON_GetObjectItemCaseSensitive(t, "normalizers"),
                           cJSON_GetObjectItemCaseSensitive(t, "pretokenizers")};
    for (int k = 0; k < 2; k++)
        if (cJSON_IsArray(list[k]))
            for (const cJSON *e = list[k]->child; e; e = e->next)
                if (has_step(e, kind))
                    return true;
    return false;
}

/* "left right" or ["left", "right"] into one "left right" string (malloc'd). */
static char *merge_text(const cJSON *m)
{
    if (cJSON_IsString(m))
        return strdup(m->valuestring);
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
        cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
        const char *a = cJSON_GetArrayItem(m, 0)->valuestring;
        const char *b = cJSON_GetArrayItem(m, 1)->valuestring;
        char *s = malloc(strlen(a) + strlen(b) + 2);
        if (s)
            sprintf(s, "%s %s", a, b);
        return s;
    }
    return NULL;
}

static bool is_byte_token(const char *s)
{
    return strlen(s) == 6 && !strncmp(s, "<0x", 3) && s[5] == '>' &&
           strspn(s + 3, "0123456789ABCDEF") == 2;
}

static int32_t id_of(const cJSON *vocab, const char *text)
{
    const cJSON *id = text ? cJSON_GetObjectItemCaseSensitive(vocab, text) : NULL;
    return cJSON_IsNumber(id) ? (int32_t)id->valuedouble : -1;
}

/* The special token's text from tokenizer_config.json: "<s>" or {"content": "<s>"}. */
static const char *config_token(const cJSON *tc, const char *key)
{
    const cJSON *t = tc ? cJSON_GetObjectItemCaseSensitive(tc, key) : NULL;
    if (cJSON_IsObject(t))
        t = cJSON_GetObjectItemCaseSensitive(t, "content");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* What a byte-level pre-tokenizer's steps add up to. */
typedef struct pre_steps {
    const char *split;  /* the last Split regex, or NULL */
    bool byte_level_regex; /* a ByteLevel step with its own (GPT-2) regex */
    bool digits;        /* a Digits step with individual_digits */
} pre_steps;

static void collect_pre(const cJSON *t, pre_steps *s)
{
    if (!cJSON_IsObject(t))
        return;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    const char *k = cJSON_IsString(type) ? type->valuestring : "";
    if (!strcmp(k, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(t, "pretokenizers");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            collect_pre(e, s);
    } else if (!strcmp(k, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(t, "pattern");
        const cJSON *re = pat ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
        if (cJSON_IsString(re))
            s->split = re->valuestring;
    } else if (!strcmp(k, "ByteLevel")) {
        const cJSON *use = cJSON_GetObjectItemCaseSensitive(t, "use_regex");
        s->byte_level_regex |= !use || cJSON_IsTrue(use);
    } else if (!strcmp(k, "Digits")) {
        s->digits |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "individual_digits"));
    }
}

/* The tokenizer.ggml.pre name of a byte-level pre-tokenizer, by its expression: Llama 3's
 * (digits in threes), Qwen2's (digits one by one), SmolLM's (Digits, then GPT-2's), GPT-2's;
 * NULL for any other. */
static const char *pre_name(const cJSON *pre)
{
    pre_steps s = {NULL, false, false};
    collect_pre(pre, &s);
    if (s.split && strstr(s.split, "(?i:'s|'t|'re|'ve|'m|'ll|'d)")) {
        if (strstr(s.split, "\\p{N}{1,3}"))
            return "llama-bpe";
        if (strstr(s.split, "|\\p{N}|"))
            return "qwen2";
        return NULL;
    }
    if (s.split)
        return NULL;
    if (s.byte_level_regex)
        return s.digits ? "smollm" : "gpt2";
    return NULL;
}

ts_status model_hf_read_vocab(tokenizer_vocab *v, const ts_model_config *c, const char *dir,
                              ts_error *err)
{
    cJSON *tj = NULL, *tc = NULL;
    ts_status st = model_hf__read_json(&tj, dir, "tokenizer.json", err);
    if (st != TS_OK)
        return st;
    if (model_hf__read_json(&tc, dir, "tokenizer_config.json", err) == TS_ERR_FORMAT)
        goto fail_err;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model");
    const cJSON *type = model ? cJSON_GetObjectItemCaseSensitive(model, "type") : NULL;
    const cJSON *vocab = model ? cJSON_GetObjectItemCaseSensitive(model, "vocab") : NULL;
    const cJSON *merges = model ? cJSON_GetObjectItemCaseSensitive(model, "merges") : NULL;
    const cJSON *fallback = model ? cJSON_GetObjectItemCaseSensitive(model, "byte_fallback")
                                  : NULL;
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE")) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED, "tokenizer.json: a %s tokenizer is not "
                          "converted (BPE is)", cJSON_IsString(type) ? type->valuestring : "?");
        goto fail;
    }
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(tj, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(tj, "pre_tokenizer");
    bool metaspace = has_step(norm, "Replace") || has_step(pre, "Metaspace");
    bool byte_level = has_step(pre, "ByteLevel");
    const char *pname = byte_level ? pre_name(pre) : NULL;
    if (byte_level && !pname) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                          "tokenizer.json: a byte-level pre-tokenizer other than GPT-2's, Llama "
                          "3's, Qwen2's and SmolLM's is not converted");
        goto fail;
    }
    if (!byte_level && (!metaspace || !cJSON_IsTrue(fallback))) {
        st = ts_error_set(err, TS_ERR_UNSUPPORTED,
                          "tokenizer.json: a BPE neither byte-level nor SentencePiece-style "
                          "with byte fallback is not converted");
        goto fail;
    }
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        st = ts_error_set(err, TS_ERR_FORMAT, "tokenizer.json: no model.vocab or model.merges");
        goto fail;
    }
    int n = c->vocab_size;
    v->kind = byte_level ? VOCAB_KIND_BPE : VOCAB_KIND_SPM;
    if (byte_level)
        snprintf(v->pre, sizeof v->pre, "%s", pname);
    v->n_tokens = n;
    if (!(v->tokens = calloc((size_t)n, sizeof *v->tokens)))
        goto nomem;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        int id = cJSON_IsNumber(e) ? (int)e->valuedouble : -1;
        if (id < 0 || id >= n || v->tokens[id].text) {
            st = ts_error_set(err, TS_ERR_FORMAT, "tokenizer.json: token %s has id %d (the "
                              "model has %d, each once)", e->string, id, n);
            goto fail;
        }
        if (!(v->tokens[id].text = strdup(e->string)))
            goto nomem;
        v->tokens[id].len = (uint32_t)strlen(e->string);
        v->tokens[id].type = !byte_level && is_byte_token(e->string) ? VOCAB_TOKEN_BYTE
                                                                     : VOCAB_TOKEN_NORMAL;
    }
    if (byte_level && !(v->merges = calloc((size_t)cJSON_GetArraySize(merges) + 1,
                                           sizeof *v->merges)))
        goto nomem;
    /* Scores: a merged token gets minus the rank of the first merge that makes it. */
    int rank = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++) {
        char *text = merge_text(m), *space = text ? strchr(text, ' ') : NULL;
        if (!space) {
            free(text);
            st = ts_error_set(err, TS_ERR_FORMAT, "tokenizer.json: merge %d is malformed", rank);
            goto fail;
        }
        if (byte_level) { /* GGUF keeps the merges themselves, in rank order */
            v->merges[v->n_merges++] = text;
            continue;
        }
        memmove(space, space + 1, strlen(space + 1) + 1);
        int32_t id = id_of(vocab, text);
        free(text);
        if (id >= 0 && v->tokens[id].score == 0.0f)
            v->tokens[id].score = -(float)(rank + 1);
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
    for (const cJSON *a = cJSON_IsArray(added) ? added->child : NULL; a; a = a->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        const cJSON *special = cJSON_GetObjectItemCaseSensitive(a, "special");
        int i = cJSON_IsNumber(id) ? (int)id->valuedouble : -1;
        if (i < 0 || i >= n || !cJSON_IsString(content)) {
            st = ts_error_set(err, TS_ERR_FORMAT, "tokenizer.json: a malformed added token");
            goto fail;
        }
        if (!v->tokens[i].text) {
            if (!(v->tokens[i].text = strdup(content->valuestring)))
                goto nomem;
            v->tokens[i].len = (uint32_t)strlen(content->valuestring);
        }
        v->tokens[i].type = cJSON_IsTrue(special) ? VOCAB_TOKEN_CONTROL
                                                  : VOCAB_TOKEN_USER_DEFINED;
    }
    for (int i = 0; i < n; i++)
        if (!v->tokens[i].text) { /* ids the files leave out: padding */
            char pad[32];
            snprintf(pad, sizeof pad, "<unused_%d>", i);
            if (!(v->tokens[i].text = strdup(pad)))
                goto nomem;
            v->tokens[i].len = (uint32_t)strlen(pad);
            v->tokens[i].type = VOCAB_TOKEN_UNUSED;
        }
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    v->unk_id = cJSON_IsString(unk) ? id_of(vocab, unk->valuestring) : -1;
    if (v->unk_id >= 0)
        v->tokens[v->unk_id].type = VOCAB_TOKEN_UNKNOWN;
    v->bos_id = id_of(vocab, config_token(tc, "bos_token"));
    v->eos_id = id_of(vocab, config_token(tc, "eos_token"));
    v->pad_id = id_of(vocab, config_token(tc, "pad_token"));
    v->eot_id = -1;
    const cJSON *add_bos = tc ? cJSON_GetObjectItemCaseSensitive(tc, "add_bos_token") : NULL;
    v->add_bos = cJSON_IsBool(add_bos) ? cJSON_IsTrue(add_bos)
                                       : vocab_default_add_bos(v->kind, v->pre);
    v->add_space_prefix = !byte_level && (has_step(norm, "Prepend") || has_step(pre, "Metaspace"));
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    return TS_OK;
nomem:
    st = ts_error_set(err, TS_ERR_NOMEM, "out of memory reading tokenizer.json");
    goto fail;
fail_err:
    st = err->status;
fail:
    cJSON_Delete(tj);
    cJSON_Delete(tc);
    vocab_clear(v);
    return st;
}
