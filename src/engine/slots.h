/* slots.h: the busy sequence slots as the step thread publishes them for other threads
 * (ts_engine_get_slots). */
#ifndef TESSERA_ENGINE_SLOTS_H
#define TESSERA_ENGINE_SLOTS_H

#include "engine/state.h"

/* Copies each running sequence's counts into e->shared.slots. Step thread, mu held. */
void engine_publish_slots_locked(ts_engine *e);

#endif /* TESSERA_ENGINE_SLOTS_H */
