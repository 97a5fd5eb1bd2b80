/*
 * An Ocean-like solver (SPLASH-2's Ocean, seed 001 Table 1, reduced to its
 * core, written with the ANL macros from the published method, not from
 * SPLASH's source): Poisson's equation on an (n+2) x (n+2) grid, solved by
 * two-grid cycles of red-black SOR. A cycle smooths the fine grid, forms
 * the residual, restricts it to a grid of half the points a side, smooths
 * the correction there from zero, brings it back, and smooths again. Rows
 * are shared out among the processes, a barrier after every colour and
 * every step (nearest-neighbour sharing at the partitions' edges). Node 0
 * checks the result bit for bit against the same cycles run sequentially,
 * and that the residual fell.
 *
 * Not SPLASH's Ocean: no eddy and boundary currents, no multigrid of more
 * than two levels; the communication pattern (a row band per process,
 * neighbours' edge rows at each sweep) is the same.
 *
 * Usage: ocean [-p P] [-n N] [-c CYCLES]   (N even)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

MAIN_ENV

#define OMEGA 1.15
#define SWEEPS 2

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
	double *u, *f, *r, *uc, *fc;
};

struct Global *gl;
long n = 126, P = 1, CYCLES = 3;

#define AT(a, w, i, j) a[(i) * ((w) + 2) + (j)]

/* One colour of a red-black SOR sweep over rows [lo, hi) of an m x m grid
 * with spacing h. */
static void sweep(double *u, const double *f, long m, double h, long lo, long hi, long colour)
{
	long i, j;
	for (i = lo; i < hi; i++)
		for (j = 1 + (i + colour + 1) % 2; j <= m; j += 2) {
			double nb = AT(u, m, i - 1, j) + AT(u, m, i + 1, j) + AT(u, m, i, j - 1) + AT(u, m, i, j + 1);
			AT(u, m, i, j) = (1.0 - OMEGA) * AT(u, m, i, j) + OMEGA * 0.25 * (h * h * AT(f, m, i, j) + nb);
		}
}

static void residual(double *r, const double *u, const double *f, long m, double h, long lo, long hi)
{
	long i, j;
	for (i = lo; i < hi; i++)
		for (j = 1; j <= m; j++) {
			double nb = AT(u, m, i - 1, j) + AT(u, m, i + 1, j) + AT(u, m, i, j - 1) + AT(u, m, i, j + 1);
			AT(r, m, i, j) = AT(f, m, i, j) - (4.0 * AT(u, m, i, j) - nb) / (h * h);
		}
}

/* Coarse rows [lo, hi): the mean of the 2 x 2 fine residuals; the
 * correction starts at zero. */
static void restrict_to(double *fc, double *uc, const double *r, long m, long lo, long hi)
{
	long I, J, mc = m / 2;
	for (I = lo; I < hi; I++)
		for (J = 1; J <= mc; J++) {
			AT(fc, mc, I, J) = 0.25 * (AT(r, m, 2 * I - 1, 2 * J - 1) + AT(r, m, 2 * I - 1, 2 * J) +
						   AT(r, m, 2 * I, 2 * J - 1) + AT(r, m, 2 * I, 2 * J));
			AT(uc, mc, I, J) = 0.0;
		}
}

/* Fine rows [lo, hi): add the coarse correction of the cell they lie in. */
static void prolong(double *u, const double *uc, long m, long lo, long hi)
{
	long i, j, mc = m / 2;
	for (i = lo; i < hi; i++)
		for (j = 1; j <= m; j++)
			AT(u, m, i, j) += AT(uc, mc, (i + 1) / 2, (j + 1) / 2);
}

static void band(long m, long id, long procs, long *lo, long *hi)
{
	long rows = (m + procs - 1) / procs;
	*lo = 1 + id * rows > m + 1 ? m + 1 : 1 + id * rows;
	*hi = *lo + rows > m + 1 ? m + 1 : *lo + rows;
}

/* CYCLES two-grid cycles; SYNC after every step. */
#define CYCLE(U, F, R, UC, FC, ID, PROCS, SYNC)                                  \
	{                                                                        \
		long c_, s_, k_, lo_, hi_, clo_, chi_;                           \
		double h_ = 1.0 / (double)(n + 1);                               \
		band(n, ID, PROCS, &lo_, &hi_);                                  \
		band(n / 2, ID, PROCS, &clo_, &chi_);                            \
		for (c_ = 0; c_ < CYCLES; c_++) {                                \
			for (s_ = 0; s_ < SWEEPS; s_++)                          \
				for (k_ = 0; k_ < 2; k_++) {                     \
					sweep(U, F, n, h_, lo_, hi_, k_); SYNC   \
				}                                                \
			residual(R, U, F, n, h_, lo_, hi_); SYNC                 \
			restrict_to(FC, UC, R, n, clo_, chi_); SYNC              \
			for (s_ = 0; s_ < 4 * SWEEPS; s_++)                      \
				for (k_ = 0; k_ < 2; k_++) {                     \
					sweep(UC, FC, n / 2, 2.0 * h_, clo_, chi_, k_); SYNC \
				}                                                \
			prolong(U, UC, n, lo_, hi_); SYNC                        \
			for (s_ = 0; s_ < SWEEPS; s_++)                          \
				for (k_ = 0; k_ < 2; k_++) {                     \
					sweep(U, F, n, h_, lo_, hi_, k_); SYNC   \
				}                                                \
		}                                                                \
	}

static double source(long i, long j)
{
	return (double)((i * 7 + j * 13) % 17) - 8.0;
}

static double max_residual(const double *u, const double *f, double *r)
{
	long i, j;
	double m = 0.0;
	residual(r, u, f, n, 1.0 / (double)(n + 1), 1, n + 1);
	for (i = 1; i <= n; i++)
		for (j = 1; j <= n; j++)
			if (fabs(AT(r, n, i, j)) > m)
				m = fabs(AT(r, n, i, j));
	return m;
}

void Slave(void)
{
	long id, lo, hi, i, j;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	band(n, id, P, &lo, &hi);
	for (i = lo; i < hi; i++)
		for (j = 1; j <= n; j++)
			AT(gl->f, n, i, j) = source(i, j);
	BARRIER(gl->bar, P)
	CYCLE(gl->u, gl->f, gl->r, gl->uc, gl->fc, id, P, BARRIER(gl->bar, P))
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, j, wrong = 0, cells, ccells;
	unsigned long long h = 1469598103934665603ULL;
	unsigned char *b;
	double *su, *sf, *sr, *suc, *sfc, r0, r1;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-c")) CYCLES = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: ocean [-p P] [-n N] [-c CYCLES]\n"); exit(2); }
	}
	if (n < 4 || n % 2 != 0 || n > 8192 || P < 1 || CYCLES < 1) {
		fprintf(stderr, "ocean: N must be even, 4 to 8192; P and CYCLES at least 1\n");
		exit(2);
	}
	cells = (n + 2) * (n + 2);
	ccells = (n / 2 + 2) * (n / 2 + 2);
	MAIN_INITENV(,64000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->u = (double *) G_MALLOC(cells * sizeof(double));
	gl->f = (double *) G_MALLOC(cells * sizeof(double));
	gl->r = (double *) G_MALLOC(cells * sizeof(double));
	gl->uc = (double *) G_MALLOC(ccells * sizeof(double));
	gl->fc = (double *) G_MALLOC(ccells * sizeof(double));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "ocean: %lu us\n", t1 - t0);
	/* The same cycles, sequentially, in private memory. */
	su = (double *) calloc(cells, sizeof(double));
	sf = (double *) calloc(cells, sizeof(double));
	sr = (double *) calloc(cells, sizeof(double));
	suc = (double *) calloc(ccells, sizeof(double));
	sfc = (double *) calloc(ccells, sizeof(double));
	for (i = 1; i <= n; i++)
		for (j = 1; j <= n; j++)
			AT(sf, n, i, j) = source(i, j);
	r0 = max_residual(su, sf, sr);
	CYCLE(su, sf, sr, suc, sfc, 0, 1, ;)
	for (i = 0; i < cells; i++)
		if (memcmp(&su[i], &gl->u[i], sizeof(double)) != 0)
			wrong++;
	r1 = max_residual(gl->u, gl->f, sr);
	b = (unsigned char *)gl->u;
	for (i = 0; i < (long)(cells * sizeof(double)); i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	printf("ocean: n %ld cycles %ld: hash %016llx\n", n, CYCLES, h);
	fprintf(stderr, "ocean: residual %g -> %g\n", r0, r1);
	if (wrong || !(r1 < 0.5 * r0)) {
		fprintf(stderr, "ocean: %ld values differ from the sequential run; residual %g -> %g\n", wrong, r0, r1);
		exit(1);
	}
	MAIN_END
}
