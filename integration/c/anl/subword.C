/*
 * Sub-word writes, written with the ANL macros (a test program of this
 * project, issue 37). Processes write interleaved bytes, blocks of three
 * bytes (straddling words, as a renderer's pixel blocks do) and
 * interleaved 16-bit halves of shared words between two barriers: a
 * program that is data-race-free at byte granularity. After each barrier
 * every process checks every byte. A DSM whose diffs wrote whole words
 * would write other processes' bytes back from its twin.
 *
 * Usage: subword [-p P] [-n BYTES] [-r ROUNDS]
 * Prints the bytes checked and the wrong ones; exits 1 if any was wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	LOCKDEC(sumlock)
	long next_id;
	long checked, wrong;
	long first_wrong;
	unsigned char *bytes;
	unsigned short *halves;
};

struct Global *gl;
long n = 20000, P = 1, ROUNDS = 2;

/* Byte i's value in round r and phase ph: an odd step between rounds and
 * phases, so every write changes its byte. */
static unsigned char byte_of(long r, long ph, long i)
{
	return (unsigned char)(((2 * r + ph + 1) * 0x9d) ^ (i * 0x3b));
}

static unsigned short half_of(long r, long i)
{
	return (unsigned short)(((r + 1) * 0x9e37) ^ (i * 0x79b9));
}

static long owner(long ph, long i)
{
	return ph == 0 ? i % P : (i / 3) % P;
}

void Slave(void)
{
	long id, r, ph, i, checked = 0, wrong = 0, first = -1;
	unsigned char *b = gl->bytes;
	unsigned short *h = gl->halves;
	long nh = n / 2;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	BARRIER(gl->bar, P)
	for (r = 0; r < ROUNDS; r++) {
		for (ph = 0; ph < 2; ph++) {
			for (i = 0; i < n; i++)
				if (owner(ph, i) == id)
					b[i] = byte_of(r, ph, i);
			BARRIER(gl->bar, P)
			for (i = 0; i < n; i++, checked++)
				if (b[i] != byte_of(r, ph, i) && wrong++ == 0)
					first = i;
			BARRIER(gl->bar, P)
		}
		for (i = id; i < nh; i += P)
			h[i] = half_of(r, i);
		BARRIER(gl->bar, P)
		for (i = 0; i < nh; i++, checked++)
			if (h[i] != half_of(r, i) && wrong++ == 0)
				first = 2 * i;
		BARRIER(gl->bar, P)
	}
	LOCK(gl->sumlock)
	gl->checked += checked;
	gl->wrong += wrong;
	if (first >= 0 && gl->first_wrong < 0)
		gl->first_wrong = first;
	UNLOCK(gl->sumlock)
}

int main(int argc, char **argv)
{
	long i;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-n")) n = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-r")) ROUNDS = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: subword [-p P] [-n BYTES] [-r ROUNDS]\n"); exit(2); }
	}
	MAIN_INITENV(,4000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->bytes = (unsigned char *) G_MALLOC(n);
	gl->halves = (unsigned short *) G_MALLOC(n);
	gl->next_id = 0;
	gl->checked = 0;
	gl->wrong = 0;
	gl->first_wrong = -1;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	LOCKINIT(gl->sumlock)
	memset(gl->bytes, 0, n);
	memset(gl->halves, 0, n);
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	printf("subword: n %ld rounds %ld: %ld wrong\n", n, ROUNDS, gl->wrong);
	fprintf(stderr, "subword: %ld bytes and halves checked, first wrong at %ld\n",
		gl->checked, gl->first_wrong);
	if (gl->wrong != 0)
		exit(1);
	MAIN_END
}
