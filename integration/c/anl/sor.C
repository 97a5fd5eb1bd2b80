/*
 * Red-black successive over-relaxation on an N x N grid, written with the
 * ANL macros (a test program of this project, not SPLASH's). Every process
 * takes a band of rows; a barrier separates the colours. The result does
 * not depend on the number of processes, so node 0 prints a hash of the
 * grid's bits that the pthreads build of the same source must match.
 *
 * Usage: sor [-p P] [-n N] [-i ITERS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
	double *grid; /* the same pointer as the global below */
};

struct Global *gl;
double *grid;     /* set by main before CREATE: every node must see it */
long P = 1;
long N = 130;
long ITERS = 10;
const double OMEGA = 1.25;

#define AT(r, c) grid[(r) * (N + 2) + (c)]

static void sweep(long first, long last, long colour)
{
	long r, c;
	for (r = first; r <= last; r++)
		for (c = 1 + ((r + colour) & 1); c <= N; c += 2)
			AT(r, c) += OMEGA * (0.25 * (AT(r - 1, c) + AT(r + 1, c) + AT(r, c - 1) + AT(r, c + 1)) - AT(r, c));
}

void Slave(void)
{
	long id, it, first, last, rows;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	if (gl->grid != grid) {
		fprintf(stderr, "sor: process %ld sees the grid at %p, main put it at %p\n", id, (void *)grid, (void *)gl->grid);
		exit(1);
	}
	rows = (N + P - 1) / P;
	first = 1 + id * rows;
	last = first + rows - 1;
	if (last > N)
		last = N;
	BARRIER(gl->bar, P)
	for (it = 0; it < ITERS; it++) {
		sweep(first, last, 0);
		BARRIER(gl->bar, P)
		sweep(first, last, 1);
		BARRIER(gl->bar, P)
	}
}

int main(int argc, char **argv)
{
	long i, r, c;
	unsigned long long h = 1469598103934665603ULL;
	unsigned char *b;
	unsigned long t0, t1;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) N = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-i")) ITERS = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: sor [-p P] [-n N] [-i ITERS]\n"); exit(2); }
	}
	MAIN_INITENV(,16000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	grid = (double *) G_MALLOC((N + 2) * (N + 2) * sizeof(double));
	gl->grid = grid;
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	for (r = 0; r < N + 2; r++)
		for (c = 0; c < N + 2; c++)
			AT(r, c) = (r == 0 || c == 0) ? 1.0 : (double)((r * 7 + c * 3) % 11) / 11.0;
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	b = (unsigned char *)grid;
	for (i = 0; i < (long)((N + 2) * (N + 2) * sizeof(double)); i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	printf("sor: n %ld iterations %ld: grid hash %016llx, centre %.17g\n", N, ITERS, h, AT(N / 2, N / 2));
	fprintf(stderr, "sor: %lu us\n", t1 - t0);
	MAIN_END
}
