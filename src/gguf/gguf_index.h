/* gguf_index.h: the sorted-name indices of a parsed GGUF file (inside src/gguf only). The
 * reader builds them; gguf_find_kv and gguf_find_tensor (gguf.h) search them. */
#ifndef TS_GGUF_INDEX_H
#define TS_GGUF_INDEX_H

#include "gguf/gguf.h"

/* Sorts the n names found stride bytes apart from names into a new *order (malloc'd, the
 * caller frees it); a duplicate name is a format error naming it (what: "metadata key"). */
ts_status gguf_build_order(uint64_t **order, const gguf_str *names, size_t stride, uint64_t n,
                           const char *what, ts_error *err);

#endif
