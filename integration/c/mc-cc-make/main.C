/*
 * main.C: a small multi-file program with the ANL macros, built by its own
 * SPLASH-style Makefile with mc-cc as CC (integration/tests/mc_cc.rs).
 * Every process fills its share of a shared array from functions in an
 * archive, an object and a shared library, whose globals main sets after
 * the start (only node 0 runs main after it), and adds it to a shared sum. Main
 * checks every item and the sum against its own computation (with the
 * multiplier sub/work.C left) and prints "mcmake: sum S over N items, P
 * processes", or what was wrong and exits 1.
 *
 * Usage: mcmake -p P
 */
MAIN_ENV
#include "common.h"

struct Global *gl;
long P = 1;

int main(int argc, char **argv)
{
	long i, want = 0, bad = 0;

	if (argc == 3 && !strcmp(argv[1], "-p"))
		P = atol(argv[2]);
	else {
		fprintf(stderr, "usage: mcmake -p P\n");
		exit(2);
	}
	MAIN_INITENV(,1000000)
	weight_base = 10;
	scale_factor = 3;
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->next_id = 0;
	gl->sum = 0;
	LOCKINIT(gl->lock)
	BARINIT(gl->bar, P)
	for (i = 1; i < P; i++)
		CREATE(Work)
	Work();
	WAIT_FOR_END(P - 1)
	for (i = 0; i < NITEMS; i++) {
		long v = ITEM(i, gl->mul);
		want += v;
		if (gl->items[i] != v) {
			if (bad++ < 5)
				fprintf(stderr, "mcmake: item %ld is %ld, not %ld\n", i, gl->items[i], v);
		}
	}
	if (bad || gl->sum != want) {
		fprintf(stderr, "mcmake: WRONG: %ld bad items, sum %ld, not %ld\n", bad, gl->sum, want);
		exit(1);
	}
	printf("mcmake: sum %ld over %d items, %ld processes\n", gl->sum, NITEMS, P);
	MAIN_END
}
