/* model_pack.c: repacking a loaded model's matrices into simd/qpack.h's layout per
 * ts_pack_mode, and giving the mapped pages of each packed matrix back (model.c frees the
 * packs with the weights). */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/own_thread.h"
#include "model/model.h"
#include "qpack.h"

bool ts_pack_mode_parse(const char *s, ts_pack_mode *out)
{
    static const char *const names[] = {"auto", "off", "all", "force"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (ts_pack_mode)i;
            return true;
        }
    return false;
}

/* Whether mode packs a matrix of this type. */
static bool mode_packs(ts_pack_mode mode, uint32_t type)
{
    if (mode == TS_PACK_OFF || !simd_qpack_supports(type))
        return false;
    if (mode == TS_PACK_FORCE)
        return true;
    if (type == QT_F16 || type == QT_BF16) /* bf16 tiles round the activations to bf16 */
        return mode == TS_PACK_ALL && simd_qpack_fast(type);
    return simd_qpack_fast(type);
}

/* Gives back the whole pages inside [p, p + n) of the read-only mapping; they fault back
 * in from the file if read again. Advice: a refusal (a locked mapping) changes nothing. */
static void drop_pages(const void *p, size_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)p + page - 1) / page * page, e = ((uintptr_t)p + n) / page * page;
    if (e > b)
        (void)madvise((void *)b, e - b, MADV_DONTNEED);
}

typedef struct pack_job {
    ts_model *m;
    ts_pack_mode mode;
} pack_job;

static void pack_all(void *arg)
{
    ts_model *m = ((pack_job *)arg)->m;
    ts_pack_mode mode = ((pack_job *)arg)->mode;
    int n = model_matrices(&m->w);
    const uint8_t *map = m->file->map, *end = map + m->file->size;
    /* a NULL pack (out of memory, a shape the pack refuses) keeps the file's blocks; each
     * matrix's pages go back as soon as it is packed, so the file and the packs are never
     * all resident at once */
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        simd_qmat *w = model_matrix(&m->w, i);
        if (w->N == 0 || !mode_packs(mode, w->type) || !(w->pack = simd_qpack_make(w)))
            continue;
        const uint8_t *b = w->data, *e = b + (size_t)w->N * w->row_bytes;
        /* only a read-only file mapping's pages come back as they were; a tied output's
         * bytes are also the embedding table the lookup reads */
        if (map && b >= map && e <= end && !(i == 0 && m->cfg.tied_output))
            drop_pages(b, (size_t)(e - b));
    }
}

void model_pack(ts_model *m, ts_pack_mode mode)
{
    if (mode == TS_PACK_OFF || !m->file)
        return;
    /* On a thread of its own, whose OpenMP pool ends with it (common/own_thread.h): a pool
     * left on the loading thread made the engine's threads sleep between its regions. */
    pack_job job = {m, mode};
    if (!own_thread_run(pack_all, &job))
        pack_all(&job);
}

void ts_model_packed(const ts_model *m, int *packed, int *matrices, uint64_t *bytes)
{
    *packed = 0;
    *bytes = 0;
    *matrices = model_matrices(&m->w);
    for (int i = 0; m->w.layers && i < *matrices; i++) {
        const simd_qpack *p = model_matrix(&m->w, i)->pack;
        if (p) {
            (*packed)++;
            *bytes += simd_qpack_bytes(p);
        }
    }
}

const char *ts_pack_kernels(void)
{
    return simd_qpack_kernels();
}
