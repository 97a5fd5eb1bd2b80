/*
 * Producer and consumers on condition variables, written with the ANL
 * macros (a test program of this project). Process 0 produces ITEMS
 * numbers into a bounded buffer in shared memory; the other processes
 * consume them. LOCK plus CONDVARWAIT / CONDVARSIGNAL / CONDVARBCAST on
 * "not full" and "not empty"; a pause (PAUSEINIT, SETPAUSE, WAITPAUSE,
 * CLEARPAUSE, PAUSE) starts the consumers. Node 0 prints how many items
 * were consumed and their sum, which do not depend on who took which.
 *
 * Usage: prodcons [-p P] [-i ITEMS] (P at least 2)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

#define SLOTS 8

struct Global {
	LOCKDEC(lock)
	CONDVARDEC(notfull)
	CONDVARDEC(notempty)
	PAUSEDEC(go)
	PAUSEDEC(ack)
	BARDEC(bar)
	long buf[SLOTS];
	long head, count, finished, next_id;
	long consumed[MAX_THREADS];
	long sums[MAX_THREADS];
};

struct Global *gl;
long P = 2, ITEMS = 300;

static long item(long i) { return (i * i) % 1009 + 1; }

static void produce(void)
{
	long i;
	SETPAUSE(gl->go)
	for (i = 0; i < ITEMS; i++) {
		LOCK(gl->lock)
		while (gl->count == SLOTS)
			CONDVARWAIT(gl->notfull, gl->lock)
		gl->buf[(gl->head + gl->count) % SLOTS] = item(i);
		gl->count++;
		CONDVARSIGNAL(gl->notempty)
		UNLOCK(gl->lock)
	}
	LOCK(gl->lock)
	gl->finished = 1;
	CONDVARBCAST(gl->notempty)
	UNLOCK(gl->lock)
}

static void consume(long id)
{
	long v;
	WAITPAUSE(gl->go)
	for (;;) {
		LOCK(gl->lock)
		while (gl->count == 0 && !gl->finished)
			CONDVARWAIT(gl->notempty, gl->lock)
		if (gl->count == 0) {
			UNLOCK(gl->lock)
			break;
		}
		v = gl->buf[gl->head];
		gl->head = (gl->head + 1) % SLOTS;
		gl->count--;
		CONDVARSIGNAL(gl->notfull)
		UNLOCK(gl->lock)
		gl->consumed[id]++;
		gl->sums[id] += v;
	}
}

void Slave(void)
{
	long id;
	LOCK(gl->lock)
	id = gl->next_id++;
	UNLOCK(gl->lock)
	if (id == 0)
		produce();
	else
		consume(id);
	BARRIER(gl->bar, P)
	/* one more handshake: process 1 sets, process 0 takes it */
	if (id == 1)
		SETPAUSE(gl->ack)
	if (id == 0) {
		PAUSE(gl->ack)
		CLEARPAUSE(gl->go)
	}
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, n = 0, s = 0, want = 0;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-i")) ITEMS = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: prodcons [-p P] [-i ITEMS]\n"); exit(2); }
	}
	if (P < 2) {
		fprintf(stderr, "prodcons: needs at least 2 processes\n");
		exit(2);
	}
	MAIN_INITENV(,4000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	LOCKINIT(gl->lock)
	CONDVARINIT(gl->notfull)
	CONDVARINIT(gl->notempty)
	PAUSEINIT(gl->go)
	PAUSEINIT(gl->ack)
	BARINIT(gl->bar, P)
	gl->head = gl->count = gl->finished = gl->next_id = 0;
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "prodcons: %lu us\n", t1 - t0);
	for (i = 0; i < P; i++) {
		n += gl->consumed[i];
		s += gl->sums[i];
	}
	for (i = 0; i < ITEMS; i++)
		want += item(i);
	printf("prodcons: %ld items consumed, sum %ld (produced sum %ld)\n", n, s, want);
	MAIN_END
}
