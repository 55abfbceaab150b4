/* fuzz_gguf.c: libFuzzer target: whole GGUF files through the reader (gguf_open_buffer),
 * every metadata value and tensor of what parses, then the model loader's path (config,
 * vocabulary, weights, chat template, tokenizer) and a little tokenizing with the result.
 *
 * Checked: every failure carries a message and its own status; lookups find every key and
 * tensor the file lists; tensor data lies inside the buffer, no two tensors on the same
 * bytes; every accepted tensor has a supported type whose rows fill its bytes exactly and
 * decodes (any of the 15 types), row by row as a whole; array getters agree with the
 * value types; a loaded model's tokenizer has the
 * config's vocabulary size and produces ids inside it. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "tokenizer_props.h"
#include "gguf/gguf.h"
#include "model/model_gguf.h"
#include "quant.h"
#include "template/chat_template.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static void check_error(ts_status st, const ts_error *err, const char *what)
{
    FUZZ_CHECK(st != TS_OK, "%s: check_error on success", what);
    FUZZ_CHECK(err->msg[0] != '\0', "%s failed (%s) without a message", what, ts_status_str(st));
    FUZZ_CHECK(err->status == st, "%s returned %s but its error says %s", what,
               ts_status_str(st), ts_status_str(err->status));
}

/* Touches every element of an array value, nested ones included. */
static void walk_value(const gguf_value *v, int depth)
{
    FUZZ_CHECK(depth <= GGUF_MAX_ARRAY_DEPTH + 1, "arrays nested %d deep were accepted", depth);
    if (v->type != GGUF_TYPE_ARRAY)
        return;
    uint64_t n = v->v.arr.n;
    gguf_type elem = v->v.arr.elem;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (elem == GGUF_TYPE_STRING) {
            gguf_str s = gguf_array_str(v, i);
            for (uint64_t k = 0; k < s.len; k++)
                sum += (uint8_t)s.ptr[k];
        } else if (elem == GGUF_TYPE_ARRAY) {
            walk_value(&v->v.arr.items[i], depth + 1);
        } else if (elem == GGUF_TYPE_FLOAT32) {
            sum += (uint64_t)(gguf_array_f32(v, i) != 0.0f);
        } else if (elem == GGUF_TYPE_INT32 || elem == GGUF_TYPE_UINT32) {
            sum += (uint32_t)gguf_array_i32(v, i);
        } else {
            size_t es = gguf_type_size(elem);
            FUZZ_CHECK(es > 0, "array of unknown element type %d accepted", (int)elem);
            for (size_t k = 0; k < es; k++)
                sum += v->v.arr.raw[i * es + k];
        }
    }
    (void)sum;
}

/* Every accepted tensor, of whichever supported type, decodes; its last row decoded
 * alone (from its own bytes) equals the same row of the whole tensor. */
static void decode_tensor(const gguf_tensor *t, size_t row_bytes)
{
    float *out = malloc((size_t)t->n_elems * sizeof *out);
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    FUZZ_CHECK(out != NULL && row != NULL, "out of memory");
    ts_error err = {0};
    ts_status st = gguf_tensor_to_f32(out, t, (size_t)t->n_elems, &err);
    FUZZ_CHECK(st == TS_OK, "an accepted %s tensor does not decode: %s",
               qtype_name(t->type), err.msg);
    uint64_t last = t->n_elems / t->ne[0] - 1;
    qtype_dequant_row(row, t->data + last * row_bytes, t->type, (int64_t)t->ne[0]);
    FUZZ_CHECK(!memcmp(row, out + last * t->ne[0], (size_t)t->ne[0] * sizeof *row),
               "the last row of a %s tensor decodes differently alone", qtype_name(t->type));
    free(row);
    free(out);
}

static void walk_file(const gguf_file *f, const uint8_t *data, size_t size)
{
    FUZZ_CHECK(f->base == data && f->size == size, "the file does not describe its buffer");
    char key[256];
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        walk_value(&kv->val, 1);
        if (kv->key.len >= sizeof key || memchr(kv->key.ptr, 0, (size_t)kv->key.len))
            continue;
        memcpy(key, kv->key.ptr, (size_t)kv->key.len);
        key[kv->key.len] = '\0';
        const gguf_kv *found = gguf_find_kv(f, key);
        FUZZ_CHECK(found && found->key.len == kv->key.len, "key %zu not found by name", (size_t)i);
        int64_t i64;
        double f64;
        bool b;
        gguf_str s;
        const gguf_value *arr;
        ts_error err = {0};
        ts_status st;
        if ((st = gguf_get_i64(f, key, &i64, &err)) != TS_OK)
            check_error(st, &err, "gguf_get_i64");
        if ((st = gguf_get_f64(f, key, &f64, &err)) != TS_OK)
            check_error(st, &err, "gguf_get_f64");
        if ((st = gguf_get_bool(f, key, &b, &err)) != TS_OK)
            check_error(st, &err, "gguf_get_bool");
        if ((st = gguf_get_str(f, key, &s, &err)) != TS_OK)
            check_error(st, &err, "gguf_get_str");
        gguf_type elem = found->val.type == GGUF_TYPE_ARRAY ? found->val.v.arr.elem
                                                            : GGUF_TYPE_UINT8;
        st = gguf_get_array(f, key, elem, &arr, &err);
        FUZZ_CHECK((st == TS_OK) == (found->val.type == GGUF_TYPE_ARRAY),
                   "gguf_get_array answered %s for a value of type %d", ts_status_str(st),
                   (int)found->val.type);
        if (st != TS_OK)
            check_error(st, &err, "gguf_get_array");
    }
    char name[256];
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        FUZZ_CHECK(t->data >= data && t->nbytes <= size && t->data - data <= (ptrdiff_t)(size - t->nbytes),
                   "tensor %zu's data lies outside the buffer", (size_t)i);
        for (uint64_t j = 0; j < i; j++) /* quadratic, but fuzz inputs hold few tensors */
            FUZZ_CHECK(f->tensors[j].data + f->tensors[j].nbytes <= t->data ||
                           t->data + t->nbytes <= f->tensors[j].data,
                       "tensors %zu and %zu share bytes", (size_t)j, (size_t)i);
        uint64_t elems = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
            elems *= t->ne[d];
        FUZZ_CHECK(elems == t->n_elems, "tensor %zu: %llu elements, its shape says %llu",
                   (size_t)i, (unsigned long long)t->n_elems, (unsigned long long)elems);
        if (t->name.len < sizeof name && !memchr(t->name.ptr, 0, (size_t)t->name.len)) {
            memcpy(name, t->name.ptr, (size_t)t->name.len);
            name[t->name.len] = '\0';
            FUZZ_CHECK(gguf_find_tensor(f, name) != NULL, "tensor %zu not found by name",
                       (size_t)i);
        }
        const qtype_info *type = qtype_get(t->type);
        FUZZ_CHECK(type != NULL, "tensor %zu of type %u was accepted", (size_t)i, t->type);
        size_t row_bytes = qtype_row_bytes(t->type, (int64_t)t->ne[0]);
        FUZZ_CHECK(row_bytes > 0 && t->nbytes == row_bytes * (t->n_elems / t->ne[0]),
                   "tensor %zu: %llu bytes for %llu rows of %llu %s elements", (size_t)i,
                   (unsigned long long)t->nbytes, (unsigned long long)(t->n_elems / t->ne[0]),
                   (unsigned long long)t->ne[0], type->name);
        if (t->n_elems <= (1u << 16))
            decode_tensor(t, row_bytes);
    }
}

/* Tokenizes a few texts with tok: ids must stay inside its vocabulary. */
static void use_tokenizer(const ts_tokenizer *tok)
{
    static const char *const texts[] = {"Hello world", " a  b\n\tc", "\xe2\x82\xac\xff\xc3",
                                        "<s></s><|endoftext|>"};
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
        fuzz_tokenizer_use(tok, texts[k], strlen(texts[k]));
}

static void use_model(const ts_model *m)
{
    const ts_model_config *c = ts_model_get_config(m);
    const ts_tokenizer *tok = ts_model_get_tokenizer(m);
    FUZZ_CHECK(ts_tokenizer_vocab_size(tok) == c->vocab_size,
               "a model of %d tokens has a tokenizer of %d", c->vocab_size,
               ts_tokenizer_vocab_size(tok));
    use_tokenizer(tok);
    chat_template_detect(m->chat_template);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *f = NULL;
    ts_error err = {0};
    ts_status st = gguf_open_buffer(data, size, &f, &err);
    if (st != TS_OK) {
        check_error(st, &err, "gguf_open_buffer");
        FUZZ_CHECK(f == NULL, "gguf_open_buffer failed but returned a file");
        return 0;
    }
    walk_file(f, data, size);

    ts_model *m = NULL;
    memset(&err, 0, sizeof err);
    st = model_gguf_load_parsed(f, "fuzz", &m, &err);
    if (st == TS_OK) {
        use_model(m);
        ts_model_free(m);
    } else {
        check_error(st, &err, "model_gguf_load_parsed");
        FUZZ_CHECK(m == NULL, "the model loader failed but returned a model");
        /* A vocabulary-only file still has a tokenizer to build. */
        tokenizer_vocab v;
        memset(&err, 0, sizeof err);
        if ((st = vocab_read_gguf(&v, f, &err)) != TS_OK) {
            check_error(st, &err, "vocab_read_gguf");
        } else {
            ts_tokenizer *tok = NULL;
            if ((st = tokenizer_create(&v, &tok, &err)) != TS_OK)
                check_error(st, &err, "tokenizer_create");
            else
                use_tokenizer(tok);
            vocab_clear(&v);
            ts_tokenizer_free(tok);
        }
    }
    gguf_close(f);
    return 0;
}
