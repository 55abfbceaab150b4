/* run_delay.h: how long the calling thread has waited for a CPU while it could run: the
 * kernel's run delay (/proc/thread-self/schedstat), the time other threads, ours or
 * another process's, held the core it was queued on. Time it slept of its own accord
 * (a futex wait, a read) does not count. */
#ifndef TESSERA_COMMON_RUN_DELAY_H
#define TESSERA_COMMON_RUN_DELAY_H

/* Seconds the calling thread has waited on a run queue since it started; negative where
 * the kernel does not say (no schedstat file). The file stays open for the thread's next
 * calls (a read, ~1-3 us) and closes when the thread ends. */
double run_delay_s(void);

/* The calling thread's run delay since its previous call of this function (since it
 * started, the first time), seconds; negative where the kernel does not say. Each thread
 * keeps its own mark, so a caller that asks from whichever thread runs a task gets that
 * thread's own waiting. */
double run_delay_since_s(void);

#endif
