/*
 * The six-step FFT (Bailey, "FFTs in external or hierarchical memory";
 * SPLASH-2's FFT kernel, seed 001 Table 1), written with the ANL macros from
 * the published algorithm, not from SPLASH's source. N = 2^M complex
 * points as an n x n matrix (n = 2^(M/2)), rows shared out among the
 * processes: transpose, FFT the rows, multiply by the twiddles, transpose,
 * FFT the rows, transpose; a barrier after each step (the transposes are
 * all-to-all). Node 0 checks the result bit for bit against the same six
 * steps run sequentially, and a few points against the DFT's definition.
 *
 * Usage: fft [-p P] [-m M]   (M even)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
	double *x, *y; /* complex: re, im */
};

struct Global *gl;
long M = 12, P = 1;

static double input(long i, int im)
{
	unsigned long long v = (unsigned long long)(2 * i + im) * 2862933555777941757ULL + 3037000493ULL;
	return (double)((v >> 11) % 2001) / 1000.0 - 1.0;
}

/* dst[i][j] = src[j][i] for rows [lo, hi) of dst. */
static void transpose(double *dst, const double *src, long n, long lo, long hi)
{
	long i, j, bj;
	for (bj = 0; bj < n; bj += 8)
		for (i = lo; i < hi; i++)
			for (j = bj; j < bj + 8 && j < n; j++) {
				dst[2 * (i * n + j)] = src[2 * (j * n + i)];
				dst[2 * (i * n + j) + 1] = src[2 * (j * n + i) + 1];
			}
}

/* In-place radix-2 FFT of one row of n complex points; w holds
 * exp(-2 pi i k / n) for k < n / 2. */
static void fft_row(double *r, long n, const double *w)
{
	long i, j, k, len, half, step;
	double tr, ti, ur, ui, vr, vi;
	for (i = 1, j = 0; i < n; i++) {
		long bit = n >> 1;
		for (; j & bit; bit >>= 1)
			j ^= bit;
		j ^= bit;
		if (i < j) {
			tr = r[2 * i]; ti = r[2 * i + 1];
			r[2 * i] = r[2 * j]; r[2 * i + 1] = r[2 * j + 1];
			r[2 * j] = tr; r[2 * j + 1] = ti;
		}
	}
	for (len = 2; len <= n; len <<= 1) {
		half = len >> 1;
		step = n / len;
		for (i = 0; i < n; i += len)
			for (k = 0; k < half; k++) {
				double wr = w[2 * k * step], wi = w[2 * k * step + 1];
				ur = r[2 * (i + k)]; ui = r[2 * (i + k) + 1];
				vr = r[2 * (i + k + half)] * wr - r[2 * (i + k + half) + 1] * wi;
				vi = r[2 * (i + k + half)] * wi + r[2 * (i + k + half) + 1] * wr;
				r[2 * (i + k)] = ur + vr; r[2 * (i + k) + 1] = ui + vi;
				r[2 * (i + k + half)] = ur - vr; r[2 * (i + k + half) + 1] = ui - vi;
			}
	}
}

static void fft_rows(double *a, long n, long lo, long hi, const double *w)
{
	long i;
	for (i = lo; i < hi; i++)
		fft_row(&a[2 * i * n], n, w);
}

/* a[j1][k2] *= exp(-2 pi i j1 k2 / N) for rows [lo, hi). */
static void twiddle(double *a, long n, long lo, long hi)
{
	long j1, k2;
	double N = (double)n * (double)n;
	for (j1 = lo; j1 < hi; j1++)
		for (k2 = 0; k2 < n; k2++) {
			double t = -2.0 * M_PI * (double)(j1 * k2) / N;
			double c = cos(t), s = sin(t);
			double re = a[2 * (j1 * n + k2)], im = a[2 * (j1 * n + k2) + 1];
			a[2 * (j1 * n + k2)] = re * c - im * s;
			a[2 * (j1 * n + k2) + 1] = re * s + im * c;
		}
}

static double *roots(long n)
{
	long k;
	double *w = (double *) malloc(n * sizeof(double));
	for (k = 0; k < n / 2; k++) {
		w[2 * k] = cos(-2.0 * M_PI * (double)k / (double)n);
		w[2 * k + 1] = sin(-2.0 * M_PI * (double)k / (double)n);
	}
	return w;
}

/* The six steps over rows [lo, hi); SYNC between steps. Returns the
 * array that holds the result. */
#define SIX_STEPS(X, Y, SYNC)                \
	transpose(Y, X, n, lo, hi); SYNC     \
	fft_rows(Y, n, lo, hi, w);           \
	twiddle(Y, n, lo, hi); SYNC          \
	transpose(X, Y, n, lo, hi); SYNC     \
	fft_rows(X, n, lo, hi, w); SYNC      \
	transpose(Y, X, n, lo, hi); SYNC

void Slave(void)
{
	long id, lo, hi, rows, i;
	long n = 1L << (M / 2);
	double *w = roots(n);
	double *x = gl->x, *y = gl->y;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	rows = (n + P - 1) / P;
	lo = id * rows > n ? n : id * rows;
	hi = lo + rows > n ? n : lo + rows;
	for (i = 2 * lo * n; i < 2 * hi * n; i++)
		x[i] = input(i / 2, (int)(i % 2));
	BARRIER(gl->bar, P)
	SIX_STEPS(x, y, BARRIER(gl->bar, P))
	free(w);
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, k, wrong = 0, n, N, lo, hi;
	unsigned long long h = 1469598103934665603ULL;
	unsigned char *b;
	double *sx, *sy, *w, err = 0.0;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-m")) M = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: fft [-p P] [-m M]\n"); exit(2); }
	}
	if (M < 2 || M > 28 || M % 2 != 0 || P < 1) {
		fprintf(stderr, "fft: M must be even, 2 to 28; P at least 1\n");
		exit(2);
	}
	n = 1L << (M / 2);
	N = n * n;
	MAIN_INITENV(,64000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->x = (double *) G_MALLOC(2 * N * sizeof(double));
	gl->y = (double *) G_MALLOC(2 * N * sizeof(double));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "fft: %lu us\n", t1 - t0);
	/* The same six steps, sequentially, in private memory. */
	sx = (double *) malloc(2 * N * sizeof(double));
	sy = (double *) malloc(2 * N * sizeof(double));
	w = roots(n);
	for (i = 0; i < 2 * N; i++)
		sx[i] = input(i / 2, (int)(i % 2));
	lo = 0;
	hi = n;
	SIX_STEPS(sx, sy, ;)
	for (i = 0; i < 2 * N; i++)
		if (memcmp(&sy[i], &gl->y[i], sizeof(double)) != 0)
			wrong++;
	/* A few points against the definition X[k] = sum x[j] e^(-2 pi i jk/N). */
	for (k = 0; k < N; k += N / 8 + 3) {
		double re = 0.0, im = 0.0, mag = 0.0;
		long j;
		for (j = 0; j < N; j++) {
			double t = -2.0 * M_PI * (double)((j * k) % N) / (double)N;
			re += input(j, 0) * cos(t) - input(j, 1) * sin(t);
			im += input(j, 0) * sin(t) + input(j, 1) * cos(t);
			mag += fabs(input(j, 0)) + fabs(input(j, 1));
		}
		re -= gl->y[2 * k];
		im -= gl->y[2 * k + 1];
		if (sqrt(re * re + im * im) / (mag + 1.0) > err)
			err = sqrt(re * re + im * im) / (mag + 1.0);
	}
	b = (unsigned char *)gl->y;
	for (i = 0; i < (long)(2 * N * sizeof(double)); i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	printf("fft: m %ld: hash %016llx\n", M, h);
	if (wrong || err > 1e-9) {
		fprintf(stderr, "fft: %ld values differ from the sequential run; DFT error %g\n", wrong, err);
		exit(1);
	}
	MAIN_END
}
