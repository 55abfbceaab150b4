/* model_arch.c: the table of model families (model_arch.h), as llama.cpp's converters
 * write their GGUF files. Every family may carry a fused attn_qkv or separate Q, K and V
 * matrices, with or without biases, and a tied or separate output: the reader finds those
 * from the tensors, not from this table. */
#include <string.h>

#include "model/model_arch.h"

static const model_arch ARCHS[] = {
    {.name = "llama"},
    /* Mistral Small 3.x under its own name: Llama's layers */
    {.name = "mistral3"},
    {.name = "qwen2", .rope_neox = true},
    {.name = "qwen3", .rope_neox = true, .qk_norm = true},
    {.name = "qwen3moe", .rope_neox = true, .qk_norm = true, .experts = true},
    /* Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B: Q/K/V biases as qwen2's */
    {.name = "qwen2moe", .rope_neox = true, .experts = true, .experts_unnormed = true,
     .shared_expert = true},
    {.name = "phi3", .rope_neox = true, .ffn_fused = true},
    {
        .name = "gemma2",
        .rope_neox = true,
        .post_norms = true,
        .embd_scaled = true,
        .ffn_act = TS_FFN_GELU_TANH,
        .softcaps = true,
        .attn_softcap = 50.0f,
        .final_softcap = 30.0f,
        .swa_reads = true,
        .swa_window = 4096,
        .swa_pattern = 2,
        .swa_rope_scaled = true,
        .attn_scale_dim_layers = 46,
    },
    {
        .name = "gemma3",
        .rope_neox = true,
        .qk_norm = true,
        .post_norms = true,
        .embd_scaled = true,
        .ffn_act = TS_FFN_GELU_TANH,
        .softcaps = true, /* a final soft-cap only where the file has the key */
        .swa_reads = true,
        .swa_pattern = 6,
        .rope_base_swa = 10000.0f,
        .attn_scale_dim_layers = 62,
    },
    /* encoders: BERT (bge, all-MiniLM, e5) with learned positions and a GELU
     * feed-forward; nomic-bert with rotary positions and SwiGLU */
    {.name = "bert", .encoder = true, .pos_embd = true, .ffn_act = TS_FFN_GELU},
    {.name = "nomic-bert", .encoder = true, .rope_neox = true},
};

enum { N_ARCHS = sizeof ARCHS / sizeof ARCHS[0] };

static bool name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && memcmp(name, want, n) == 0;
}

const model_arch *model_arch_find(const char *name, size_t n)
{
    for (int i = 0; i < N_ARCHS; i++)
        if (name_is(name, n, ARCHS[i].name))
            return &ARCHS[i];
    return NULL;
}

const char *model_arch_names(void)
{
    return "llama, mistral3, qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma2, gemma3, bert, nomic-bert";
}

/* Families people ask for that need an operation the forward pass does not have. */
static const struct {
    const char *name, *why;
} REFUSED[] = {
    {"mixtral", "Mixtral GGUFs are `llama` files with experts; this name is not"},
    {"deepseek2", "multi-head latent attention and mixture-of-experts layers are not supported"},
    /* mixtures of experts routed or built otherwise than the families above */
    {"deepseek", "its ungated shared experts and leading dense layers are not supported"},
    {"glm4moe", "its sigmoid routing with expert biases, shared experts and leading dense "
                "layers are not supported"},
    {"dbrx", "its layer norms, clamped QKV and expert layout are not supported"},
    {"olmoe", "its Q/K norms over whole projections are not supported"},
    {"granitemoe", "its embedding, residual, attention and logit multipliers are not supported"},
    {"grok", "its embedding and output multipliers and soft-capped attention are not supported"},
    {"arctic", "its dense residual block beside the experts is not supported"},
    {"jamba", "Mamba layers are not supported"},
    {"qwen3next", "gated delta-net (linear attention) layers are not supported"},
    {"qwen3vlmoe", "vision-language models are not supported"},
    {"ernie4_5-moe", "its shared experts and leading dense layers are not supported"},
    {"bailingmoe", "its shared experts are not supported (Qwen2-MoE's sigmoid-gated one is)"},
    {"hunyuan-moe", "its shared experts are not supported (Qwen2-MoE's sigmoid-gated one is)"},
    {"minimax-m2", "its sigmoid routing with expert biases is not supported"},
    {"lfm2moe", "its short-convolution layers are not supported"},
    {"llada-moe", "diffusion language models are not supported"},
    {"gpt-oss", "MXFP4 experts and attention sinks are not supported"},
    {"gemma3n", "per-layer embeddings and AltUp are not supported"},
    {"gemma", "Gemma 1 is not supported (Gemma 2 and 3 are)"},
    {"phimoe", "its sparse-mixer routing is not supported"},
    {"llama4", "interleaved chunked attention and shared experts are not supported"},
    {"dots1", "its sigmoid routing and shared experts are not supported"},
    {"qwen2vl", "vision-language models are not supported"},
    {"modern-bert", "alternating local attention and its GeGLU encoder are not supported"},
    {"jina-bert-v2", "ALiBi positions are not supported"},
    {"jina-bert-v3", "its LoRA adapters are not supported (bert and nomic-bert are)"},
    {"nomic-bert-moe", "mixture-of-experts encoder layers are not supported"},
    {"neo-bert", "its encoder layers are not supported (bert and nomic-bert are)"},
    {"eurobert", "its encoder layers are not supported (bert and nomic-bert are)"},
};

const char *model_arch_refusal(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (name_is(name, n, REFUSED[i].name))
            return REFUSED[i].why;
    return NULL;
}
