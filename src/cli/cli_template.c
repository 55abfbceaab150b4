/* cli_template.c: `tessera template`: prints the prompt a model's chat template makes of a
 * chat, as the server would render it, for debugging prompts. Reads only the model's
 * metadata and vocabulary, never its weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "server/chat_family.h"
#include "server/openai.h"
#include "template/chat_jinja.h"
#include "template/chat_template.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: tessera template [-m MODEL] --messages FILE [--chat-template-file F]\n"
                 "                        [--chat-template NAME]\n"
                 "  prints the prompt the chat in FILE renders to, exactly (no newline added).\n"
                 "  FILE holds a JSON array of messages, or a chat completion request body\n"
                 "  (messages, tools, add_generation_prompt, chat_template_kwargs).\n"
                 "  The template is F, else the model's own, else the family its markers name;\n"
                 "  --chat-template forces a built-in family. strftime_now shows\n"
                 "  $SOURCE_DATE_EPOCH's date when it is set.\n");
}

long long cli_template_time(void)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    char *end;
    long long t = s && *s ? strtoll(s, &end, 10) : 0;
    return s && *s && !*end && t > 0 ? t : 0;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    if (!f)
        return NULL;
    do {
        if (cap - n < 4096) {
            char *g = realloc(buf, (cap = cap ? 2 * cap : 65536) + 1);
            if (!g) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = g;
        }
        n += (got = fread(buf + n, 1, cap - n, f));
    } while (got > 0);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The chat request in FILE's text (a messages array is wrapped as a request). */
static int read_request(const char *path, oai_request *r)
{
    size_t len;
    char *text = read_all(path, &len);
    if (!text) {
        fprintf(stderr, "tessera: cannot read %s\n", path);
        return 1;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    char *body = NULL;
    if (cJSON_IsArray(j)) {
        cJSON *req = cJSON_CreateObject();
        if (req) {
            cJSON_AddItemToObject(req, "messages", j);
            j = req;
        }
    }
    if (j)
        body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    oai_error e = {0};
    int rc = 0;
    if (!body || oai_parse_request(OAI_CHAT, body, strlen(body), r, &e) != TS_OK) {
        fprintf(stderr, "tessera: %s: %s\n", path, body ? e.message : "not JSON");
        rc = 1;
    }
    free(body);
    free(text);
    return rc;
}

/* The model's tokenizer.chat_template (malloc'd), or NULL when it has none. */
static char *model_template(const char *model)
{
    gguf_file *f = NULL;
    gguf_str t;
    char *s = NULL;
    if (gguf_open(model, &f, NULL) == TS_OK &&
        gguf_get_str(f, "tokenizer.chat_template", &t, NULL) == TS_OK && (s = malloc(t.len + 1))) {
        memcpy(s, t.ptr, t.len);
        s[t.len] = '\0';
    }
    gguf_close(f);
    return s;
}

static int render_family(chat_template_kind kind, const oai_request *r)
{
    chat_rendering chat = {0};
    ts_error err = {0};
    int rc = 1;
    if (chat_family_render(kind, r, &chat, &err) != TS_OK)
        fprintf(stderr, "tessera: %s\n", err.msg);
    else
        rc = fputs(chat.text, stdout) < 0;
    chat_rendering_free(&chat);
    return rc;
}

typedef struct template_args {
    const char *messages, *file, *family;
} template_args;

/* One of template's own options (cli_spec.own). */
static int template_option(void *ctx, const char *a, const char *v)
{
    template_args *t = ctx;
    if (!strcmp(a, "--messages"))
        t->messages = v;
    else if (!strcmp(a, "--chat-template-file"))
        t->file = v;
    else if (!strcmp(a, "--chat-template"))
        t->family = v;
    else
        return 0;
    return 1;
}

int cli_template(int argc, char **argv)
{
    const char *model = NULL;
    template_args t = {0};
    cli_spec spec = {"template", usage, NULL, &model, NULL, NULL, template_option, &t, NULL};
    int parsed = cli_parse(argc, argv, &spec);
    if (parsed >= 0)
        return parsed;
    const char *messages = t.messages, *file = t.file, *family = t.family;
    if (!messages) {
        fprintf(stderr, "tessera template: --messages is required\n");
        return 2;
    }
    if (!model)
        model = cli_default_model();
    oai_request r = {0};
    ts_tokenizer *tok = NULL;
    chat_jinja cj = {0};
    ts_error err = {0};
    size_t len = 0;
    char *src = NULL, *text = NULL;
    int rc = 1;
    chat_template_kind kind;
    if (read_request(messages, &r))
        goto out;
    if (ts_tokenizer_load_gguf(model, &tok, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s\n", err.msg);
        goto out;
    }
    src = file ? read_all(file, &len) : model_template(model);
    if (file && !src) {
        fprintf(stderr, "tessera: cannot read %s\n", file);
        goto out;
    }
    kind = chat_template_detect(file ? NULL : src);
    if (family) {
        if (chat_template_from_name(family, &kind, &err) != TS_OK) {
            fprintf(stderr, "tessera: %s\n", err.msg);
            goto out;
        }
        rc = render_family(kind, &r);
        goto out;
    }
    if (src && chat_jinja_init(&cj, src, file ? len : strlen(src), tok, &err) != TS_OK) {
        fprintf(stderr, "tessera: %s: %s\n", file ? file : "the model's chat template", err.msg);
        if (file)
            goto out;
        fprintf(stderr, "tessera: using the %s family instead\n", chat_template_name(kind));
    }
    if (!cj.t) {
        rc = render_family(kind, &r);
        goto out;
    }
    if (chat_jinja_render(&cj, r.chat_vars,
                          cli_template_time() ? (time_t)cli_template_time() : time(NULL), NULL,
                          &text, &err) != TS_OK) {
        fprintf(stderr, "tessera: the template says: %s\n", err.msg);
        goto out;
    }
    rc = fputs(text, stdout) < 0;
out:
    free(text);
    free(src);
    chat_jinja_free(&cj);
    ts_tokenizer_free(tok);
    oai_request_clear(&r);
    return rc;
}
