/*
 * FFT-style all-to-all transpose, written with the ANL macros (a test
 * program of this project). Each process owns a band of rows of two n x n
 * matrices; a round transposes x into y (each process writes its rows of
 * y from columns every process wrote), applies a row operation on its own
 * rows, and transposes back. Arrays come from NU_MALLOC and G_MALLOC_F.
 * Deterministic: node 0 prints a hash of the result.
 *
 * Usage: transpose [-p P] [-n N] [-r ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
	double *x, *y;
};

struct Global *gl;
long n = 64, P = 1, ROUNDS = 3;

static void transpose(double *dst, const double *src, long first, long last)
{
	long i, j, bj;
	/* blocked, as an FFT's transpose is */
	for (bj = 0; bj < n; bj += 8)
		for (i = first; i < last; i++)
			for (j = bj; j < bj + 8 && j < n; j++)
				dst[i * n + j] = src[j * n + i];
}

void Slave(void)
{
	long id, r, i, j, rows, first, last;
	double *x = gl->x, *y = gl->y;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	rows = (n + P - 1) / P;
	first = id * rows;
	last = first + rows > n ? n : first + rows;
	BARRIER(gl->bar, P)
	for (r = 0; r < ROUNDS; r++) {
		transpose(y, x, first, last);
		BARRIER(gl->bar, P)
		for (i = first; i < last; i++)
			for (j = 1; j < n; j++)
				y[i * n + j] = 0.5 * y[i * n + j] + 0.25 * y[i * n + j - 1] + (double)r;
		BARRIER(gl->bar, P)
		transpose(x, y, first, last);
		BARRIER(gl->bar, P)
	}
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i;
	unsigned long long h = 1469598103934665603ULL;
	unsigned char *b;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-r")) ROUNDS = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: transpose [-p P] [-n N] [-r ROUNDS]\n"); exit(2); }
	}
	MAIN_INITENV(,8000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->x = (double *) NU_MALLOC(n * n * sizeof(double));
	gl->y = (double *) G_MALLOC_F(n * n * sizeof(double));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	for (i = 0; i < n * n; i++)
		gl->x[i] = (double)((i * 31) % 97) / 7.0;
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "transpose: %lu us\n", t1 - t0);
	b = (unsigned char *)gl->x;
	for (i = 0; i < (long)(n * n * sizeof(double)); i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	printf("transpose: n %ld rounds %ld: hash %016llx\n", n, ROUNDS, h);
	G_FREE(gl->y)
	MAIN_END
}
