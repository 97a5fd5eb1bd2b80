/*
 * The shared heap's limit (a test program of this project): main
 * G_MALLOCs -b BYTES first, then every process writes a few words spread
 * over the whole allocation (its first and last words included), and main
 * checks every one after a barrier. The rest of the allocation is never
 * touched. Past the heap's limit the first G_MALLOC fails, and the
 * program stops there, before printing "heap: allocated".
 *
 * Usage: heap [-p P] -b BYTES
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

#define SPOTS 16

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
};

struct Global *gl;
long P = 1;
long bytes = 0;
char *big;

/* Where word k of process id goes: n = P * SPOTS words evenly over the
 * allocation, the last at its last 8 bytes. */
static long spot(long id, long k)
{
	long n = P * SPOTS, i = id * SPOTS + k;

	if (i == n - 1)
		return bytes - 8;
	return (bytes - 8) / (n - 1) * i;
}

static long value(long id, long k)
{
	return 1000 * (id + 1) + k;
}

void Slave(void)
{
	long id, k, v;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	for (k = 0; k < SPOTS; k++) {
		v = value(id, k);
		memcpy(big + spot(id, k), &v, sizeof v);
	}
	BARRIER(gl->bar, P)
}

int main(int argc, char **argv)
{
	long i, k, v, bad = 0;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-b")) bytes = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: heap [-p P] -b BYTES\n"); exit(2); }
	}
	if (P < 1 || bytes < 8 * P * SPOTS) {
		fprintf(stderr, "heap: -b must be at least %ld\n", 8 * P * SPOTS);
		exit(2);
	}
	MAIN_INITENV(,1000000)
	big = (char *) G_MALLOC(bytes);
	printf("heap: allocated %ld bytes\n", bytes);
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	for (i = 0; i < P; i++)
		for (k = 0; k < SPOTS; k++) {
			memcpy(&v, big + spot(i, k), sizeof v);
			if (v != value(i, k)) {
				printf("heap: word %ld of process %ld at %ld is %ld, not %ld\n",
				       k, i, spot(i, k), v, value(i, k));
				bad++;
			}
		}
	if (bad)
		exit(1);
	printf("heap: fine, %ld bytes, %ld words checked\n", bytes, P * SPOTS);
	MAIN_END
}
