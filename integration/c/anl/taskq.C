/*
 * A task queue under locks, written with the ANL macros (a test program of
 * this project). Tasks sit in a shared queue guarded by a lock; running a
 * task may add another. Results are counted into buckets, each under its
 * own lock of a lock array (ALOCKDEC/ALOCKINIT/ALOCK/AULOCK, and LOCK on
 * AGETL). A second phase deals rows by self-scheduling (GSDEC/GSINIT/
 * GETSUB: SPLASH's counter starts again at 0 once a process has seen
 * the end, so rows may be done more than once, with the same values).
 * Which process runs which task varies; the results do not.
 *
 * Usage: taskq [-p P] [-t TASKS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

#define BUCKETS 16
#define ROWS 64

struct Global {
	BARDEC(bar)
	LOCKDEC(qlock)
	ALOCKDEC(blocks, BUCKETS)
	GSDEC(rows)
	NLOCKDEC(nl)
	long head, tail, done, next_id;
	long bucket[BUCKETS];
	long *queue;
	long *result;
	long runs[MAX_THREADS];
	double rowsum[ROWS];
};

struct Global *gl;
long P = 1, TASKS = 200;

static long work(long t)
{
	long i, v = t;
	for (i = 0; i < 2000; i++)
		v = (v * 1103515245 + 12345) % 2147483647;
	return v;
}

void Slave(void)
{
	long id, t, v, b, row;

	LOCK(gl->qlock)
	id = gl->next_id++;
	UNLOCK(gl->qlock)
	for (;;) {
		LOCK(gl->qlock)
		if (gl->done == TASKS) {
			UNLOCK(gl->qlock)
			break;
		}
		t = gl->head < gl->tail ? gl->queue[gl->head++] : -1;
		UNLOCK(gl->qlock)
		if (t < 0)
			continue; /* others still run tasks that may add some */
		v = work(t);
		gl->result[t] = v;
		b = v % BUCKETS;
		if (b & 1) {
			ALOCK(gl->blocks, b)
			gl->bucket[b]++;
			AULOCK(gl->blocks, b)
		} else {
			LOCK(AGETL(gl->blocks, b))
			gl->bucket[b]++;
			UNLOCK(AGETL(gl->blocks, b))
		}
		LOCK(gl->qlock)
		if (gl->tail < TASKS) { /* a task adds the next one */
			gl->queue[gl->tail] = gl->tail;
			gl->tail++;
		}
		gl->done++;
		gl->runs[id]++;
		UNLOCK(gl->qlock)
	}
	BARRIER(gl->bar, P)
	for (;;) {
		GETSUB(gl->rows, row, ROWS - 1, P)
		if (row < 0)
			break;
		NLOCK(gl->nl)
		gl->rowsum[row] = (double)gl->result[row % TASKS] / 3.0 + row;
		NUNLOCK(gl->nl)
	}
	BARRIER(gl->bar, P)
}

int main(int argc, char **argv)
{
	long i, runs = 0, sum = 0;
	double rs = 0;
	unsigned long t0, t1;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-t")) TASKS = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: taskq [-p P] [-t TASKS]\n"); exit(2); }
	}
	MAIN_INITENV(,4000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->queue = (long *) G_MALLOC(TASKS * sizeof(long));
	gl->result = (long *) G_MALLOC(TASKS * sizeof(long));
	BARINIT(gl->bar, P)
	LOCKINIT(gl->qlock)
	ALOCKINIT(gl->blocks, BUCKETS)
	GSINIT(gl->rows)
	NLOCKINIT(gl->nl)
	gl->head = 0;
	gl->tail = TASKS / 4;
	for (i = 0; i < gl->tail; i++)
		gl->queue[i] = i;
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	for (i = 0; i < TASKS; i++)
		sum = (sum + gl->result[i]) % 1000000007;
	for (i = 0; i < P; i++)
		runs += gl->runs[i];
	for (i = 0; i < ROWS; i++)
		rs += gl->rowsum[i];
	printf("taskq: %ld tasks run (%ld done), result sum %ld, buckets", runs, gl->done, sum);
	for (i = 0; i < BUCKETS; i++)
		printf(" %ld", gl->bucket[i]);
	printf(", row sum %.17g\n", rs);
	fprintf(stderr, "taskq: %lu us\n", t1 - t0);
	MAIN_END
}
