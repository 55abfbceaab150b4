/* ui.h: the browser chat page, embedded at build time from web/ (cmake/embed_web.cmake
 * writes ui_assets[]) and served at GET / by http.c unless --no-ui. */
#ifndef TESSERA_SERVER_UI_H
#define TESSERA_SERVER_UI_H

#include <stddef.h>

#include "server/server_internal.h"

typedef struct ui_asset {
    const char *path;         /* "/index.html", "/app.js", ... */
    const char *content_type; /* with charset for text */
    const unsigned char *data;
    size_t len;
} ui_asset;

extern const ui_asset ui_assets[]; /* generated */
extern const int ui_n_assets;

/* The asset served at path ("/" is /index.html), or NULL. */
const ui_asset *ui_find(const char *path);

/* Answers c's path from the embedded files: 200 with the page's security headers for GET
 * and HEAD, 405 for other methods; MHD_NO where ui_find has no file for it. */
enum MHD_Result ui_handle(struct MHD_Connection *mc, srv_conn *c, const char *method);

#endif /* TESSERA_SERVER_UI_H */
