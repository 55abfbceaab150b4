/* model_pack.c: how a loaded model's matrices are multiplied: each planned by simd/qmat.h
 * (repacked per ts_pack_mode where the CPU has a kernel for it), the mapped pages of each
 * packed matrix given back (model.c frees the packs with the weights), and what was chosen
 * reported. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/own_thread.h"
#include "model/model.h"
#include "qmat.h"
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

/* An embedding model's steps are whole prompts, so its F16 / BF16 matrices gain from the
 * bf16 tiles (at twice an F16 matrix's bytes) where a generative model's decode would
 * read twice the bytes: auto packs them for the former only. */
static simd_pack_policy policy_of(ts_pack_mode mode, bool embeds)
{
    switch (mode) {
    case TS_PACK_OFF:
        return SIMD_PACK_NEVER;
    case TS_PACK_ALL:
        return SIMD_PACK_FAST;
    case TS_PACK_FORCE:
        return SIMD_PACK_ALWAYS;
    default:
        return embeds ? SIMD_PACK_FAST : SIMD_PACK_FAST_INT8;
    }
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
    simd_pack_policy policy;
} pack_job;

static void pack_all(void *arg)
{
    ts_model *m = ((pack_job *)arg)->m;
    simd_pack_policy policy = ((pack_job *)arg)->policy;
    const simd_kernels *k = simd_init();
    int n = model_matrices(&m->w);
    const uint8_t *map = m->file->map, *end = map + m->file->size;
    /* a NULL pack (out of memory, a shape the pack refuses) keeps the file's blocks; each
     * matrix's pages go back as soon as it is packed, so the file and the packs are never
     * all resident at once */
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < n; i++) {
        simd_qmat *w = model_matrix(&m->w, i);
        if (!simd_qmat_plan(w, k, policy))
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
    pack_job job = {m, m->file ? policy_of(mode, m->cfg.pooling != TS_POOLING_NONE)
                               : SIMD_PACK_NEVER};
    if (m->w.enc)
        m->w.enc->att_bf16 = simd_qmat_packs(job.policy, QT_F16) && m->cfg.head_dim % 32 == 0;
    if (job.policy == SIMD_PACK_NEVER) {
        model_use_kernels(m, simd_init());
        return;
    }
    /* On a thread of its own, whose OpenMP pool ends with it (common/own_thread.h): a pool
     * left on the loading thread made the engine's threads sleep between its regions. */
    if (!own_thread_run(pack_all, &job))
        pack_all(&job);
}

void model_use_kernels(ts_model *m, const simd_kernels *k)
{
    if (m->w.enc)
        m->w.enc->att_bf16 = false;
    for (int i = 0; m->w.layers && i < model_matrices(&m->w); i++)
        simd_qmat_plan(model_matrix(&m->w, i), k, SIMD_PACK_NEVER);
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

void ts_model_kernels(const ts_model *m, void (*each)(void *arg, const char *kernel, int n),
                      void *arg)
{
    enum { MAX_KINDS = 32, LEN = 112 };
    char kind[MAX_KINDS][LEN], d[LEN];
    int count[MAX_KINDS], n_kinds = 0;
    for (int i = 0; m->w.layers && i < model_matrices(&m->w); i++) {
        const simd_qmat *w = model_matrix(&m->w, i);
        if (w->N == 0) /* the empty parts of a fused matrix */
            continue;
        simd_qmat_describe(w, d, sizeof d);
        int j = 0;
        while (j < n_kinds && strcmp(kind[j], d) != 0)
            j++;
        if (j == n_kinds && n_kinds == MAX_KINDS)
            continue;
        if (j == n_kinds) {
            memcpy(kind[j], d, sizeof d);
            count[n_kinds++] = 0;
        }
        count[j]++;
    }
    for (int j = 0; j < n_kinds; j++)
        each(arg, kind[j], count[j]);
}
