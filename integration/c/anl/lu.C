/*
 * Blocked LU factorisation (no pivoting) of a diagonally dominant n x n
 * matrix, written with the ANL macros (a test program of this project).
 * Blocks are dealt to processes round robin; barriers separate the steps
 * of each diagonal block. Uses CREATE(f, P) (which runs f in main too),
 * WAIT_FOR_END(P) and the region-of-interest markers. Every element is
 * computed in the same order whatever P is: node 0 prints a hash of the
 * result's bits.
 *
 * Usage: lu [-p P] [-n N] [-b B]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
};

struct Global *gl;
double *a;
long n = 96, B = 16, P = 1, nb;

#define A(i, j) a[(i) * n + (j)]

static long owner(long bi, long bj) { return (bi * nb + bj) % P; }

static void factor_diagonal(long k)
{
	long i, j, m, k0 = k * B, k1 = k0 + B;
	for (m = k0; m < k1; m++)
		for (i = m + 1; i < k1; i++) {
			A(i, m) /= A(m, m);
			for (j = m + 1; j < k1; j++)
				A(i, j) -= A(i, m) * A(m, j);
		}
}

/* Row block (k, bj): solve with L of the diagonal block. */
static void row_block(long k, long bj)
{
	long i, j, m, k0 = k * B;
	for (m = k0; m < k0 + B; m++)
		for (i = m + 1; i < k0 + B; i++)
			for (j = bj * B; j < bj * B + B; j++)
				A(i, j) -= A(i, m) * A(m, j);
}

/* Column block (bi, k): solve with U of the diagonal block. */
static void col_block(long k, long bi)
{
	long i, j, m, k0 = k * B;
	for (m = k0; m < k0 + B; m++)
		for (i = bi * B; i < bi * B + B; i++) {
			A(i, m) /= A(m, m);
			for (j = m + 1; j < k0 + B; j++)
				A(i, j) -= A(i, m) * A(m, j);
		}
}

static void interior(long k, long bi, long bj)
{
	long i, j, m, k0 = k * B;
	for (i = bi * B; i < bi * B + B; i++)
		for (j = bj * B; j < bj * B + B; j++) {
			double s = A(i, j);
			for (m = k0; m < k0 + B; m++)
				s -= A(i, m) * A(m, j);
			A(i, j) = s;
		}
}

void Slave(void)
{
	long id, k, i, j;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	BARRIER(gl->bar, P)
	if (id == 0)
		SPLASH3_ROI_BEGIN();
	for (k = 0; k < nb; k++) {
		if (owner(k, k) == id)
			factor_diagonal(k);
		BARRIER(gl->bar, P)
		for (j = k + 1; j < nb; j++)
			if (owner(k, j) == id)
				row_block(k, j);
		for (i = k + 1; i < nb; i++)
			if (owner(i, k) == id)
				col_block(k, i);
		BARRIER(gl->bar, P)
		for (i = k + 1; i < nb; i++)
			for (j = k + 1; j < nb; j++)
				if (owner(i, j) == id)
					interior(k, i, j);
		BARRIER(gl->bar, P)
	}
	if (id == 0)
		SPLASH3_ROI_END();
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, j;
	unsigned long long h = 1469598103934665603ULL;
	unsigned char *b;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-b")) B = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: lu [-p P] [-n N] [-b B]\n"); exit(2); }
	}
	if (B < 1 || n % B != 0) {
		fprintf(stderr, "lu: n must be a multiple of the block size\n");
		exit(2);
	}
	nb = n / B;
	MAIN_INITENV(,8000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	a = (double *) G_MALLOC(n * n * sizeof(double));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			A(i, j) = i == j ? (double)n : (double)((i * 13 + j * 7) % 17) / 17.0;
	CLOCK(t0)
	CREATE(Slave, P)
	WAIT_FOR_END(P)
	CLOCK(t1)
	fprintf(stderr, "lu: %lu us\n", t1 - t0);
	b = (unsigned char *)a;
	for (i = 0; i < (long)(n * n * sizeof(double)); i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	printf("lu: n %ld block %ld: hash %016llx, a[n-1][n-1] %.17g\n", n, B, h, A(n - 1, n - 1));
	MAIN_END
}
