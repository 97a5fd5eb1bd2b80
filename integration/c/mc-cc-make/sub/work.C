/*
 * sub/work.C: the work of each process, in a subdirectory: its quoted includes
 * are relative to this directory, as in the source tree.
 */
EXTERN_ENV
#include "../common.h"
#include "stage.h"

void Work(void)
{
	long id, i, mine = 0;

	LOCK(gl->lock)
	id = gl->next_id++;
	UNLOCK(gl->lock)
	if (id == 0)
		gl->mul = STAGE_MUL;
	for (i = id; i < NITEMS; i += P) {
		gl->items[i] = ITEM(i, STAGE_MUL);
		mine += gl->items[i];
	}
	LOCK(gl->lock)
	gl->sum += mine;
	UNLOCK(gl->lock)
	BARRIER(gl->bar, P)
}
