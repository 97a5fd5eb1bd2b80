/*
 * Globals, written with the ANL macros (a test program of this project).
 * Main reads a parameter file (-f FILE) after MAIN_INITENV, so only node 0
 * does, and sets globals of every kind: numbers in .data and .bss, a string
 * array, a big static array, a pointer into shared memory, a pointer to a
 * string literal, a function pointer, argv itself. Every process checks
 * them all and computes its part of a result from them. After CREATE the
 * last process writes a global that every process reads after a barrier,
 * and leaves one that main prints after WAIT_FOR_END (as SPLASH-2's Water
 * leaves its energy). Node 0 prints the result and how many processes saw
 * every global.
 *
 * Usage: globals [-p P] -f FILE
 * FILE: lines "n N", "scale X", "name WORD", "coef C1 C2 ..." (up to 16)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(lock)
	long next_id;
	long good[MAX_THREADS];
};

struct Global *gl;
long P = 1;
long n = 10;                     /* .data, changed by main */
double scale;                    /* .bss */
char name[64];                   /* .bss array */
double coef[16];
long ncoef;
static long big[200000];         /* a big .bss array, mostly zero */
const char *label = "default";   /* .data pointer to a literal */
double *out;                     /* into the shared heap */
char **args;                     /* main's argv */
char *file_arg;                  /* one of its strings */
int argc_;
static double (*combine)(double, double);
double last_word;                /* written after CREATE by the last process, read by main */
long round_two;                  /* written after CREATE by the last process, read by all */

static double mul_add(double a, double b) { return a * b + 1.0; }

void Slave(void)
{
	long id, i, ok = 1;

	LOCK(gl->lock)
	id = gl->next_id++;
	UNLOCK(gl->lock)
	ok &= n > 0 && scale != 0 && ncoef > 0;
	ok &= strcmp(label, name) == 0;
	ok &= big[12345] == 12345 && big[199999] == 7;
	ok &= combine == mul_add;
	ok &= strstr(args[0], "globals") != NULL;
	ok &= strcmp(file_arg, args[argc_ - 1]) == 0;
	for (i = id; i < n; i += P)
		out[i] = combine(scale * coef[i % ncoef], (double)i) + (double)big[12345];
	if (id == P - 1)
		round_two = 1000 + P;
	BARRIER(gl->bar, P)
	ok &= round_two == 1000 + P;
	gl->good[id] = ok;
	if (id == P - 1)
		last_word = out[n - 1] + (double)id;
	if (!ok)
		fprintf(stderr, "globals: process %ld: n %ld scale %g name %s label %s big %ld/%ld args[0] %s file %s\n",
			id, n, scale, name, label, big[12345], big[199999], args[0], file_arg);
	BARRIER(gl->bar, P)
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, good = 0;
	const char *path = NULL;
	char key[32];
	FILE *f;
	double sum = 0;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-f")) path = argv[i + 1];
		else { fprintf(stderr, "usage: globals [-p P] -f FILE\n"); exit(2); }
	}
	/* From here on only node 0 runs main: what it sets, the others get at CREATE. */
	MAIN_INITENV(,4000000)
	if (path == NULL || (f = fopen(path, "r")) == NULL) {
		fprintf(stderr, "globals: cannot read the parameter file\n");
		exit(2);
	}
	while (fscanf(f, "%31s", key) == 1) {
		if (!strcmp(key, "n")) { if (fscanf(f, "%ld", &n) != 1) exit(2); }
		else if (!strcmp(key, "scale")) { if (fscanf(f, "%lf", &scale) != 1) exit(2); }
		else if (!strcmp(key, "name")) { if (fscanf(f, "%63s", name) != 1) exit(2); }
		else if (!strcmp(key, "coef")) { while (ncoef < 16 && fscanf(f, "%lf", &coef[ncoef]) == 1) ncoef++; }
	}
	fclose(f);
	args = argv;
	argc_ = argc;
	file_arg = (char *)path;
	label = name;
	combine = mul_add;
	big[12345] = 12345;
	big[199999] = 7;
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	out = (double *) G_MALLOC(n * sizeof(double));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->lock)
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "globals: %lu us\n", t1 - t0);
	for (i = 0; i < P; i++)
		good += gl->good[i];
	for (i = 0; i < n; i++)
		sum += out[i];
	printf("globals: %s: n %ld, %ld coefficients, result %.17g; %ld of %ld processes saw every global; "
	       "the last process left %.17g\n", name, n, ncoef, sum, good, P, last_word);
	MAIN_END
}
