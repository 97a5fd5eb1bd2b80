/*
 * Parallel radix sort with prefix sums, written with the ANL macros from
 * the published algorithm (Blelloch et al.; SPLASH-2's RADIX kernel, seed
 * 001 Table 1), not from SPLASH's source. Keys are 32-bit; each pass sorts
 * by one digit of RADIX_BITS bits, stably: every process counts its own
 * slice's digits, the counts of all processes give each process, by prefix
 * sums over (digit, process), where its keys of each digit go, and each
 * process scatters its keys there. Node 0 checks the result against a
 * sequential sort of the same keys with the same passes.
 *
 * Usage: radix [-p P] [-n KEYS] [-b RADIX_BITS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

#define MAX_RADIX (1 << 12)

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
	unsigned int *a, *b;
	long *hist; /* hist[p * radix + d] */
};

struct Global *gl;
long n = 65536, P = 1, bits = 8;

static unsigned int key_of(long i)
{
	unsigned long long x = (unsigned long long)i * 6364136223846793005ULL + 1442695040888963407ULL;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return (unsigned int)x;
}

/* One pass over [lo, hi) of src by the digit at shift: the histogram. */
static void count(const unsigned int *src, long lo, long hi, long shift, long *h)
{
	long radix = 1L << bits, i;
	for (i = 0; i < radix; i++)
		h[i] = 0;
	for (i = lo; i < hi; i++)
		h[(src[i] >> shift) & (radix - 1)]++;
}

/* Where process me's keys of each digit start: the prefix sum over
 * (digit, process) of every process's histogram. */
static void offsets(const long *hist, long procs, long me, long *at)
{
	long radix = 1L << bits, d, q, sum = 0;
	for (d = 0; d < radix; d++)
		for (q = 0; q < procs; q++) {
			if (q == me)
				at[d] = sum;
			sum += hist[q * radix + d];
		}
}

static void scatter(const unsigned int *src, unsigned int *dst, long lo, long hi, long shift, long *at)
{
	long radix = 1L << bits, i;
	for (i = lo; i < hi; i++)
		dst[at[(src[i] >> shift) & (radix - 1)]++] = src[i];
}

void Slave(void)
{
	long id, shift, lo, hi, per, i;
	long at[MAX_RADIX];
	unsigned int *src, *dst, *t;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	per = (n + P - 1) / P;
	lo = id * per > n ? n : id * per;
	hi = lo + per > n ? n : lo + per;
	for (i = lo; i < hi; i++)
		gl->a[i] = key_of(i);
	src = gl->a;
	dst = gl->b;
	BARRIER(gl->bar, P)
	for (shift = 0; shift < 32; shift += bits) {
		count(src, lo, hi, shift, &gl->hist[id << bits]);
		BARRIER(gl->bar, P)
		offsets(gl->hist, P, id, at);
		scatter(src, dst, lo, hi, shift, at);
		BARRIER(gl->bar, P)
		t = src;
		src = dst;
		dst = t;
	}
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, shift, wrong = 0;
	unsigned long long h = 1469598103934665603ULL;
	unsigned int *sa, *sb, *t, *out;
	long *sh, *sat;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-b")) bits = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: radix [-p P] [-n KEYS] [-b RADIX_BITS]\n"); exit(2); }
	}
	if (bits < 1 || bits > 12 || 32 % bits != 0 || n < 1 || P < 1) {
		fprintf(stderr, "radix: RADIX_BITS must divide 32 and be 1 to 12; KEYS and P at least 1\n");
		exit(2);
	}
	MAIN_INITENV(,64000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->a = (unsigned int *) G_MALLOC(n * sizeof(unsigned int));
	gl->b = (unsigned int *) G_MALLOC(n * sizeof(unsigned int));
	gl->hist = (long *) G_MALLOC(P * (1L << bits) * sizeof(long));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "radix: %lu us\n", t1 - t0);
	/* 32 / bits passes: an even count leaves the keys in a, odd in b. */
	out = (32 / bits) % 2 == 0 ? gl->a : gl->b;
	/* The sequential sort: the same passes over private memory. */
	sa = (unsigned int *) malloc(n * sizeof(unsigned int));
	sb = (unsigned int *) malloc(n * sizeof(unsigned int));
	sh = (long *) malloc((1L << bits) * sizeof(long));
	sat = (long *) malloc((1L << bits) * sizeof(long));
	for (i = 0; i < n; i++)
		sa[i] = key_of(i);
	for (shift = 0; shift < 32; shift += bits) {
		count(sa, 0, n, shift, sh);
		offsets(sh, 1, 0, sat);
		scatter(sa, sb, 0, n, shift, sat);
		t = sa;
		sa = sb;
		sb = t;
	}
	for (i = 0; i < n; i++) {
		if (out[i] != sa[i] || (i > 0 && out[i - 1] > out[i]))
			wrong++;
		h = (h ^ out[i]) * 1099511628211ULL;
	}
	printf("radix: n %ld bits %ld: hash %016llx\n", n, bits, h);
	if (wrong) {
		fprintf(stderr, "radix: %ld keys differ from the sequential sort\n", wrong);
		exit(1);
	}
	MAIN_END
}
