/* ui.c: answers the chat page's files (GET or HEAD) from the bytes embedded at build time,
 * with the headers that keep a browser to same-origin scripts and styles. */
#include <string.h>

#include "server/server_internal.h"
#include "server/ui.h"

/* Only the page's own files run or style it; it talks to this origin only; nothing may
 * frame it. The favicon is an inline "data:," so img-src allows data:. */
static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

const ui_asset *ui_find(const char *path)
{
    if (!strcmp(path, "/"))
        path = "/index.html";
    for (int i = 0; i < ui_n_assets; i++)
        if (!strcmp(ui_assets[i].path, path))
            return &ui_assets[i];
    return NULL;
}

enum MHD_Result ui_handle(struct MHD_Connection *mc, srv_conn *c, const char *method)
{
    const ui_asset *a = ui_find(c->path);
    if (!a)
        return MHD_NO;
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        oai_error e;
        oai_error_set(&e, 405, NULL, "method_not_allowed", "%s wants GET, not %.10s", c->path,
                      method);
        return srv_send_error(mc, c, &e);
    }
    /* The bytes are static: MHD only reads them (and skips them for HEAD). */
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data,
                                                             MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    bool ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->content_type) &&
              MHD_add_response_header(r, "Content-Security-Policy", csp) &&
              MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") &&
              MHD_add_response_header(r, "X-Frame-Options", "DENY") &&
              MHD_add_response_header(r, "Referrer-Policy", "no-referrer") &&
              MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result res = ok ? MHD_queue_response(mc, MHD_HTTP_OK, r) : MHD_NO;
    MHD_destroy_response(r);
    if (res == MHD_YES)
        c->status = MHD_HTTP_OK;
    return res;
}
