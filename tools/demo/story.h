/* story.h: what paged-demo tells: who made and shares the pool and its prefix, then how each worker did. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TOOLS_DEMO_STORY_H
#define PAGED_TOOLS_DEMO_STORY_H

#include <stdint.h>

#include "tools/demo/crew.h"
#include "tools/demo/model.h"

/*
 * From the reports the workers sent with their prompts built: the pool (name, id, backend,
 * size, geometry), which worker created it and which attached to it (with their pids and
 * client ids, the ids pactl shows as HOLDERS), and the shared prefix of prefix_len tokens:
 * how many blocks, who published them and how many sequences adopted them.
 */
void demo_story_pool(const struct demo_crew *c, const char *pool, const struct demo_model *m,
                     uint32_t prefix_len);

/*
 * From the final reports: a line per worker (its decode rate and check, or how it failed:
 * its error, exit status or signal), the total over the workers that finished, and whether
 * every output matched. Returns 1 when every worker finished and every output matched.
 */
int demo_story_results(const struct demo_crew *c);

#endif
