/* own_thread.c: parallel work on a thread of its own (own_thread.h). */
#include <omp.h>
#include <pthread.h>

#include "common/own_thread.h"

typedef struct own_job {
    void (*fn)(void *);
    void *arg;
    int threads;
} own_job;

static void *own_main(void *p)
{
    const own_job *j = p;
    omp_set_num_threads(j->threads);
    j->fn(j->arg);
    return NULL;
}

bool own_thread_run(void (*fn)(void *), void *arg)
{
    own_job j = {.fn = fn, .arg = arg, .threads = omp_get_max_threads()};
    pthread_t t;
    if (pthread_create(&t, NULL, own_main, &j) != 0)
        return false;
    pthread_join(t, NULL);
    return true;
}
