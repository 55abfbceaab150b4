/* cli_info.c: `tessera info`: what a model file holds: format, config, parameter count,
 * vocabulary, chat template, and for GGUF every metadata key and tensor (type, bits per
 * weight, shape, bytes) with the tensors' total size, and how each weight matrix is
 * multiplied here. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "model/model_gguf.h"
#include "quant.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera info [-m MODEL] [--tokenizer TOK]\n"
                 "  describes MODEL: a .gguf file (a model or a vocabulary only), or a llama2.c\n"
                 "  checkpoint with its tokenizer.bin. Model files are loaded in full, so what\n"
                 "  is printed is what tessera would run.\n");
}

/* Prints len bytes of s quoted, escaping what is not printable ASCII, cut at max bytes. */
static void print_quoted(const char *s, uint64_t len, uint64_t max)
{
    putchar('"');
    for (uint64_t i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            printf("\\n");
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c); /* UTF-8 bytes pass through */
    }
    printf(len > max ? "\"..." : "\"");
}

static void print_value(const gguf_value *v)
{
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        printf("%" PRIu64, v->v.u64);
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        printf("%" PRId64, v->v.i64);
        break;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        printf("%g", v->v.f64);
        break;
    case GGUF_TYPE_BOOL:
        printf("%s", v->v.b ? "true" : "false");
        break;
    case GGUF_TYPE_STRING:
        print_quoted(v->v.str.ptr, v->v.str.len, 72);
        break;
    case GGUF_TYPE_ARRAY:
        printf("%s[%" PRIu64 "]", gguf_type_name(v->v.arr.elem), v->v.arr.n);
        break;
    default:
        printf("(%s)", gguf_type_name(v->type));
        break;
    }
}

static void print_gguf(const gguf_file *f)
{
    printf("metadata (%" PRIu64 " keys):\n", f->n_kv);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        printf("  %.*s = ", (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr);
        print_value(&kv->val);
        putchar('\n');
    }
    printf("tensors (%" PRIu64 "): name, type, bits per weight, shape, bytes\n", f->n_tensors);
    uint64_t bytes = 0, elems = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const char *type = gguf_tensor_type_name(t->type);
        printf("  %-28.*s %-6s %5.2f bpw  [", (int)(t->name.len > 200 ? 200 : t->name.len),
               t->name.ptr, type ? type : "?", qtype_bits_per_weight(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++)
            printf(d ? ", %" PRIu64 : "%" PRIu64, t->ne[d]);
        printf("]  %" PRIu64 " bytes\n", t->nbytes);
        bytes += t->nbytes;
        elems += t->n_elems;
    }
    /* what the weights take in the file (and so in memory, mapped), whatever their types */
    printf("tensor bytes: %" PRIu64 " (%.2f MiB), %.2f bits per weight on average\n", bytes,
           (double)bytes / (1024.0 * 1024.0), elems ? 8.0 * (double)bytes / (double)elems : 0.0);
}

static void print_config(const ts_model_config *c)
{
    printf("architecture: %s\nname: %s\nconfig:\n", c->arch, c->name);
    printf("  %-16s %d\n", "dim", c->dim);
    printf("  %-16s %d\n", "hidden_dim", c->hidden_dim);
    printf("  %-16s %d\n", "n_layers", c->n_layers);
    printf("  %-16s %d\n", "n_heads", c->n_heads);
    printf("  %-16s %d\n", "n_kv_heads", c->n_kv_heads);
    printf("  %-16s %d\n", "head_dim", c->head_dim);
    printf("  %-16s %d\n", "vocab_size", c->vocab_size);
    printf("  %-16s %d\n", "context_len", c->context_len);
    printf("  %-16s %g\n", "rope_freq_base", (double)c->rope_freq_base);
    printf("  %-16s %g\n", "rope_scale", (double)c->rope_scale);
    printf("  %-16s %g\n", "rms_eps", (double)c->rms_eps);
    printf("  %-16s %s\n", "rope_neox", c->rope_neox ? "true" : "false");
    printf("  %-16s %s\n", "rope_factors", c->rope_factors ? "true" : "false");
    printf("  %-16s %s\n", "tied_output", c->tied_output ? "true" : "false");
    /* the family's features (model_arch.c), those it has */
    printf("  %-16s", "features");
    const struct {
        bool on;
        const char *name;
    } feats[] = {
        {c->qkv_fused, "fused-qkv"},   {c->ffn_fused, "fused-gate-up"},
        {c->qkv_bias, "qkv-bias"},     {c->qk_norm, "qk-norm"},
        {c->post_norms, "post-norms"}, {c->embd_scaled, "embedding-scale"},
        {c->ffn_act == TS_FFN_GELU_TANH, "geglu"},
        {c->encoder, "encoder"},       {c->pos_embd, "learned-positions"},
        {c->ffn_act == TS_FFN_GELU, "gelu"},
    };
    int shown = 0;
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
        if (feats[i].on)
            printf(" %s", feats[i].name), shown++;
    if (c->attn_softcap > 0.0f || c->final_softcap > 0.0f)
        printf(" soft-caps=%g/%g", (double)c->attn_softcap, (double)c->final_softcap), shown++;
    if (c->swa_window > 0)
        printf(" sliding-window=%d/pattern-%d", c->swa_window, c->swa_pattern), shown++;
    if (c->rope_freq_base_swa > 0.0f)
        printf(" rope-base-swa=%g", (double)c->rope_freq_base_swa), shown++;
    if (c->n_experts > 0)
        printf(" experts=%d/used-%d%s", c->n_experts, c->n_experts_used,
               c->experts_unnormed ? "-unnormed" : ""), shown++;
    if (c->shared_ffn_dim > 0)
        printf(" shared-expert=%d", c->shared_ffn_dim), shown++;
    printf("%s\n", shown ? "" : " none (Llama's layers)");
}

/* Weights as model.h lays them out: the tied LM head is not counted twice. */
static uint64_t param_count(const ts_model_config *c)
{
    uint64_t dim = (uint64_t)c->dim, ffn = (uint64_t)c->hidden_dim;
    uint64_t vocab = (uint64_t)c->vocab_size, q_dim = (uint64_t)c->n_heads * c->head_dim;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * c->head_dim;
    uint64_t experts = c->n_experts > 0 ? (uint64_t)c->n_experts : 1;
    uint64_t layer = 2 * dim + (q_dim + 2 * kv_dim) * dim + dim * q_dim +
                     experts * 3 * ffn * dim + (c->n_experts > 0 ? experts * dim : 0) +
                     (3 * (uint64_t)c->shared_ffn_dim + 1) * dim * (c->shared_ffn_dim > 0);
    return vocab * dim * (c->tied_output ? 1 : 2) + dim + (uint64_t)c->n_layers * layer;
}

static void print_token(const tokenizer_vocab *v, const char *what, int32_t id)
{
    printf("  %-16s ", what);
    if (id < 0) {
        printf("none\n");
        return;
    }
    printf("%d ", id);
    print_quoted(v->tokens[id].text, v->tokens[id].len, 40);
    putchar('\n');
}

static void print_vocab(const tokenizer_vocab *v)
{
    printf("vocabulary:\n");
    printf("  %-16s %s\n", "kind", v->kind == VOCAB_KIND_BPE   ? "gpt2 (byte-level BPE)"
                                  : v->kind == VOCAB_KIND_WPM ? "bert (WordPiece)"
                                  : v->kind == VOCAB_KIND_UGM ? "t5 (Unigram)"
                                                              : "llama (SentencePiece BPE)");
    printf("  %-16s %d\n", "size", v->n_tokens);
    if (v->kind == VOCAB_KIND_BPE)
        printf("  %-16s %d\n", "merges", v->n_merges);
    if (v->pre[0])
        printf("  %-16s %s\n", "pre", v->pre);
    print_token(v, "bos", v->bos_id);
    print_token(v, "eos", v->eos_id);
    print_token(v, "unk", v->unk_id);
    if (v->eot_id >= 0)
        print_token(v, "eot", v->eot_id);
    printf("  %-16s %s\n", "add_bos", v->add_bos ? "true" : "false");
    printf("  %-16s %s\n", "add_space_prefix", v->add_space_prefix ? "true" : "false");
    if (v->kind == VOCAB_KIND_WPM) {
        print_token(v, "sep", v->sep_id);
        printf("  %-16s %s\n", "add_sep", v->add_sep ? "true" : "false");
        printf("  %-16s %s\n", "lowercase", v->lowercase ? "true" : "false");
        printf("  %-16s %s\n", "strip_accents", v->strip_accents ? "true" : "false");
    }
}

/* The template family by its markers; a guess to orient the reader, not a parser. */
static const char *template_family(gguf_str t)
{
    static const struct {
        const char *marker, *family;
    } known[] = {
        {"<|start_header_id|>", "llama3"}, {"<|im_start|>", "chatml"},
        {"<start_of_turn>", "gemma"},      {"[INST]", "llama2"},
        {"<|user|>", "zephyr"},
    };
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        if (memmem(t.ptr, (size_t)t.len, known[k].marker, strlen(known[k].marker)))
            return known[k].family;
    return "unknown";
}

static void print_template(const gguf_file *f)
{
    gguf_str t;
    if (!f || gguf_get_str(f, "tokenizer.chat_template", &t, NULL) != TS_OK) {
        printf("chat template: none\n");
        return;
    }
    const char *nl = memchr(t.ptr, '\n', (size_t)t.len);
    printf("chat template: %s, first line: ", template_family(t));
    print_quoted(t.ptr, nl ? (uint64_t)(nl - t.ptr) : t.len, 100);
    putchar('\n');
}

static void print_kernel(void *arg, const char *kernel, int n)
{
    (void)arg;
    printf("  %s: %d matri%s\n", kernel, n, n == 1 ? "x" : "ces");
}

static void print_model(const ts_model *m)
{
    const ts_model_config *c = ts_model_get_config(m);
    print_config(c);
    uint64_t n = param_count(c);
    printf("parameters: %" PRIu64 " (%.1f M); f32 weights %.1f MiB\n", n, (double)n / 1e6,
           (double)n * 4.0 / (1024.0 * 1024.0));
    uint64_t bytes, weights;
    ts_model_weight_bytes(m, &bytes, &weights);
    printf("weight matrices as loaded: %.1f MiB, %.2f bits per weight\n",
           (double)bytes / (1024.0 * 1024.0),
           weights ? 8.0 * (double)bytes / (double)weights : 0.0);
    int packed, matrices;
    ts_model_packed(m, &packed, &matrices, &bytes);
    printf("packed matrices: %d of %d (%s), %.1f MiB\n", packed, matrices, ts_pack_kernels(),
           (double)bytes / (1024.0 * 1024.0));
    printf("kernels:\n");
    ts_model_kernels(m, print_kernel, NULL);
    print_vocab(tokenizer_get_vocab(ts_model_get_tokenizer(m)));
}

/* A vocabulary-only GGUF: no config or weights, just what the tokenizer reads. */
static int print_vocab_only(const gguf_file *f)
{
    tokenizer_vocab v;
    ts_error err = {0};
    if (vocab_read_gguf(&v, f, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        return 1;
    }
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch, NULL) == TS_OK)
        printf("architecture: %.*s\n", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
    printf("weights: none (vocabulary-only file)\n");
    print_vocab(&v);
    vocab_clear(&v);
    return 0;
}

int cli_info(int argc, char **argv)
{
    const char *model = NULL, *tokenizer = NULL;
    cli_spec spec = {"info", usage, NULL, &model, &tokenizer, NULL, NULL, NULL, NULL};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    if (!model && !(model = cli_default_model()))
        return 1;

    /* GGUF files parse first: their metadata is printed even when the model won't load. */
    gguf_file *f = NULL;
    ts_error err = {0};
    FILE *probe = fopen(model, "rb");
    char magic[4] = {0};
    bool is_gguf = probe && fread(magic, 1, 4, probe) == 4 && !memcmp(magic, "GGUF", 4);
    if (probe)
        fclose(probe);
    if (is_gguf && gguf_open(model, &f, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        return 1;
    }
    printf("file: %s\n", model);
    if (f)
        printf("format: GGUF v%u (alignment %u, %" PRIu64 " metadata keys, %" PRIu64 " tensors)\n",
               f->version, f->alignment, f->n_kv, f->n_tensors);
    else
        printf("format: llama2.c checkpoint (tokenizer %s)\n", tokenizer ? tokenizer : "none");

    int rc = 0;
    if (f && f->n_tensors == 0) {
        rc = print_vocab_only(f);
    } else {
        ts_model *m = cli_load_model(model, tokenizer, NULL);
        if (m)
            print_model(m);
        else
            rc = 1;
        ts_model_free(m);
    }
    print_template(f);
    if (f)
        print_gguf(f);
    gguf_close(f);
    return rc;
}
