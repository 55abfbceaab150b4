/* own_thread.h: parallel work on a thread of its own, so that the OpenMP thread pool its
 * parallel regions create ends with it.
 *
 * libgomp keeps a pool of threads for every thread that ever ran a parallel region, for
 * the life of that thread. While two pools exist (the loader's and the engine's, say), it
 * manages more threads than there are CPUs, and then every idle thread spins only 100
 * times before it sleeps, whatever GOMP_SPINCOUNT says: each of the engine's parallel
 * regions must wake its threads from sleep. Load-time and one-off parallel work (packing
 * the weights, the bandwidth probe) therefore runs here, on a thread that is joined and
 * gone before the engine starts. */
#ifndef TESSERA_COMMON_OWN_THREAD_H
#define TESSERA_COMMON_OWN_THREAD_H

#include <stdbool.h>

/* Runs fn(arg) on a new thread with the caller's OpenMP thread count
 * (omp_get_max_threads(); a new thread would otherwise start from the defaults) and waits
 * for it. False, with nothing run, when no thread could be created. */
bool own_thread_run(void (*fn)(void *), void *arg);

#endif
