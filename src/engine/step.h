/* step.h: one engine step (step.c), run by the step thread in api.c. */
#ifndef TESSERA_ENGINE_STEP_H
#define TESSERA_ENGINE_STEP_H

#include "engine/state.h"

/* One engine step: cancel, admit, plan, pack, forward, publish, sample, emit, free.
 * Returns false when there was nothing to do. */
bool engine_step(ts_engine *e);

/* Copies the counters and gauges into the snapshot others read. Called with mu held. */
void engine_publish_stats_locked(ts_engine *e);

#endif /* TESSERA_ENGINE_STEP_H */
