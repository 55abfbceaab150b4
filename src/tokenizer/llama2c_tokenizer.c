/* llama2c_tokenizer.c: reading llama2.c's tokenizer.bin (int32 max_token_length, then
 * per token: float score, int32 len, len bytes) into a SentencePiece vocabulary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/vocab.h"

enum {
    LLAMA2C_MAX_FILE = 1 << 30,
    LLAMA2C_MAX_TOKEN_LEN = 1 << 16,
    LLAMA2C_MAX_TOKENS = 1 << 22,
};

static ts_status read_file(const char *path, unsigned char **data, size_t *size,
                           ts_error *err)
{
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_error_set(err, TS_ERR_IO, "cannot open tokenizer %s", path);
    struct stat sb;
    ts_status st = TS_OK;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = ts_error_set(err, TS_ERR_IO, "tokenizer %s is not a regular file", path);
    } else if (sb.st_size > LLAMA2C_MAX_FILE) {
        st = ts_error_set(err, TS_ERR_TOO_LONG, "tokenizer %s is larger than %d bytes", path,
                          LLAMA2C_MAX_FILE);
    } else {
        *size = (size_t)sb.st_size;
        *data = malloc(*size ? *size : 1);
        if (!*data)
            st = ts_error_set(err, TS_ERR_NOMEM, "cannot read tokenizer %s", path);
        else if (fread(*data, 1, *size, f) != *size)
            st = ts_error_set(err, TS_ERR_IO, "cannot read tokenizer %s", path);
    }
    fclose(f);
    if (st != TS_OK) {
        free(*data);
        *data = NULL;
    }
    return st;
}

/* The piece as vocab.h keeps it: U+2581 for each space; llama2.c's "\n<s>\n" and
 * "\n</s>\n" become "<s>" and "</s>". */
static char *convert_piece(const unsigned char *p, size_t len, uint32_t *out_len)
{
    if (len == 5 && memcmp(p, "\n<s>\n", 5) == 0)
        p = (const unsigned char *)"<s>", len = 3;
    else if (len == 6 && memcmp(p, "\n</s>\n", 6) == 0)
        p = (const unsigned char *)"</s>", len = 4;
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++)
        spaces += p[i] == ' ';
    char *s = malloc(len + 2 * spaces + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == ' ') {
            memcpy(s + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            s[k++] = (char)p[i];
        }
    }
    s[k] = '\0';
    *out_len = (uint32_t)k;
    return s;
}

static int is_byte_piece(const char *s, uint32_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    return len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && strchr(hex, s[3]) &&
           s[4] && strchr(hex, s[4]);
}

static ts_status parse(const unsigned char *d, size_t size, int vocab_size,
                       tokenizer_vocab *v, ts_error *err)
{
    int32_t max_len;
    if (size < 4)
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.bin: %zu bytes, no header", size);
    memcpy(&max_len, d, 4);
    if (max_len <= 0 || max_len > LLAMA2C_MAX_TOKEN_LEN)
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.bin: max token length %d out of range",
                            (int)max_len);
    /* Without a count from the model, every token in the file. */
    int cap = vocab_size > 0 ? vocab_size : LLAMA2C_MAX_TOKENS;
    size_t alloc = vocab_size > 0 ? (size_t)vocab_size : 1024;
    v->tokens = calloc(alloc, sizeof *v->tokens);
    if (!v->tokens)
        return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate %d tokens", cap);
    size_t off = 4;
    for (int i = 0; i < cap && (vocab_size > 0 || off < size); i++) {
        float score;
        int32_t len;
        if (size - off < 8)
            return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.bin: token %d truncated", i);
        memcpy(&score, d + off, 4);
        memcpy(&len, d + off + 4, 4);
        off += 8;
        if (len < 0 || len > max_len)
            return ts_error_set(err, TS_ERR_FORMAT,
                                "tokenizer.bin: token %d length %d outside 0..%d", i, (int)len,
                                (int)max_len);
        if (size - off < (size_t)len)
            return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.bin: token %d truncated", i);
        if (!isfinite(score))
            return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.bin: token %d score is not finite", i);
        if ((size_t)i == alloc) {
            vocab_token *t = realloc(v->tokens, 2 * alloc * sizeof *t);
            if (!t)
                return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate %d tokens", i + 1);
            memset(t + alloc, 0, alloc * sizeof *t);
            v->tokens = t;
            alloc *= 2;
        }
        vocab_token *t = &v->tokens[i];
        t->text = convert_piece(d + off, (size_t)len, &t->len);
        v->n_tokens = i + 1;
        if (!t->text)
            return ts_error_set(err, TS_ERR_NOMEM, "cannot allocate token %d", i);
        off += (size_t)len;
        t->score = score;
        t->type = i == 0               ? VOCAB_TOKEN_UNKNOWN
                  : i == 1 || i == 2   ? VOCAB_TOKEN_CONTROL
                  : is_byte_piece(t->text, t->len) ? VOCAB_TOKEN_BYTE
                                       : VOCAB_TOKEN_NORMAL;
    }
    if (v->n_tokens == 0)
        return ts_error_set(err, TS_ERR_FORMAT, "tokenizer.bin holds no tokens");
    if (vocab_size <= 0 && off < size)
        return ts_error_set(err, TS_ERR_TOO_LONG, "tokenizer.bin holds more than %d tokens", cap);
    return TS_OK;
}

ts_status ts_tokenizer_load_llama2c(const char *path, int vocab_size, ts_tokenizer **out,
                                    ts_error *err)
{
    if (!path || !out)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "tokenizer path and output are required");
    *out = NULL;
    if (vocab_size > LLAMA2C_MAX_TOKENS)
        return ts_error_set(err, TS_ERR_INVALID_ARG, "vocab size %d out of range", vocab_size);
    unsigned char *data = NULL;
    size_t size = 0;
    tokenizer_vocab v = {
        .kind = VOCAB_KIND_SPM,
        .bos_id = -1, .eos_id = -1, .unk_id = -1, .pad_id = -1, .eot_id = -1,
        .add_bos = true,
        .add_space_prefix = true,
    };
    ts_status st = read_file(path, &data, &size, err);
    if (st != TS_OK)
        goto done;
    if ((st = parse(data, size, vocab_size, &v, err)) != TS_OK)
        goto done;
    v.unk_id = 0;
    v.bos_id = v.n_tokens > 1 ? 1 : -1;
    v.eos_id = v.n_tokens > 2 ? 2 : -1;
    st = tokenizer_create(&v, out, err);
done:
    vocab_clear(&v);
    free(data);
    return st;
}
