/* template.c: the server's chat templates: each model's pick at ts_server_add_model (a
 * forced family, else the --chat-template-file or the model's own Jinja template, else the
 * family its markers name), a chat request's rendering, and POST /apply-template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "server/chat_family.h"
#include "server/server_internal.h"
#include "server/toolcall.h"

ts_status srv_template_load(ts_server *srv, const char *path, ts_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_error_set(err, TS_ERR_IO, "cannot open chat template file '%s'", path);
    strbuf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        strbuf_add(&b, buf, n);
    bool bad = ferror(f) || b.failed;
    fclose(f);
    if (bad) {
        strbuf_free(&b);
        return ts_error_set(err, TS_ERR_IO, "cannot read chat template file '%s'", path);
    }
    srv->template_src = b.s ? b.s : strdup("");
    srv->template_len = b.len;
    return srv->template_src ? TS_OK : ts_error_set(err, TS_ERR_NOMEM, "out of memory");
}

static void log_line(ts_server *srv, const char *fmt, const char *a, const char *b, const char *c)
{
    char line[512];
    snprintf(line, sizeof line, fmt, a, b, c);
    if (srv->opts.log)
        srv->opts.log(srv->opts.log_user, line);
}

ts_status srv_template_setup(ts_server *srv, srv_model *m, ts_error *err)
{
    const ts_model *model = ts_engine_get_model(m->engine);
    const char *own = ts_model_get_chat_template(model);
    m->template = chat_template_detect(own);
    m->template_time = srv->opts.template_time;
    m->stopping = &srv->stopping;
    ts_status fst = srv->template_name
                        ? chat_template_from_name(srv->template_name, &m->template, err)
                        : TS_OK;
    m->tool_marker = toolcall_marker_token(ts_model_get_tokenizer(model),
                                           toolcall_syntax_for(m->template));
    if (srv->template_name)
        return fst;
    const char *src = srv->template_src ? srv->template_src : own;
    if (!src || !*src)
        return TS_OK;
    ts_error terr = {0};
    ts_status st =
        chat_jinja_init(&m->jinja, src, srv->template_src ? srv->template_len : strlen(src),
                        ts_model_get_tokenizer(model), &terr);
    if (st == TS_OK)
        return TS_OK;
    if (srv->template_src) /* a template the user named must work */
        return ts_error_set(err, st, "chat template file: %s", terr.msg);
    log_line(srv, "model %s: its chat template is not used (%s); the %s family renders its chats",
             m->name, terr.msg, chat_template_name(m->template));
    return TS_OK;
}

void srv_template_free(srv_model *m) { chat_jinja_free(&m->jinja); }

ts_status srv_template_render(const srv_model *m, const oai_request *r, char **text, oai_error *e)
{
    ts_error err = {0};
    time_t now = m->template_time ? (time_t)m->template_time : time(NULL);
    ts_status st = chat_jinja_render(&m->jinja, r->chat_vars, now, m->stopping, text, &err);
    if (st == TS_OK)
        return TS_OK;
    return oai_error_set(e, st == TS_ERR_NOMEM ? 500 : 400, "messages", "template_error", "%s",
                         err.msg);
}

enum MHD_Result routes_apply_template(struct MHD_Connection *mc, srv_conn *c)
{
    oai_request r;
    oai_error e = {0};
    if (oai_parse_request(OAI_CHAT, c->body.s, c->body.len, &r, &e) != TS_OK)
        return srv_send_error(mc, c, &e);
    srv_model *m = srv_find_model(c->srv, r.model, &e);
    char *text = NULL;
    if (m && m->jinja.t) {
        srv_template_render(m, &r, &text, &e);
    } else if (m) {
        chat_rendering chat = {0};
        ts_error err = {0};
        ts_status st = chat_family_render(m->template, &r, &chat, &err);
        if (st != TS_OK)
            oai_error_set(&e, st == TS_ERR_NOMEM ? 500 : 400, "messages", NULL, "%s", err.msg);
        text = chat.text;
        chat.text = NULL;
        chat_rendering_free(&chat);
    }
    oai_request_clear(&r);
    if (!text)
        return srv_send_error(mc, c, &e);
    /* A template's text may hold ill-formed UTF-8 (its own bytes, or a request's): the
     * answer is JSON, so those sequences go out as U+FFFD, never raw. */
    cJSON *j = cJSON_CreateObject(), *prompt = oai_bytes_string(text, strlen(text));
    if (j && prompt && cJSON_AddItemToObject(j, "prompt", prompt)) {
        prompt = NULL; /* j owns it */
    } else {
        cJSON_Delete(j);
        j = NULL;
    }
    cJSON_Delete(prompt);
    free(text);
    return srv_send_json(mc, c, 200, j);
}
