/*
 * An MPI program that checks what MPI programs rely on, for the `mc`
 * libfabric provider (mc-host mpirun): point-to-point, blocking and
 * non-blocking, MPI_ANY_SOURCE and MPI_ANY_TAG, sizes from 0 bytes to
 * several MiB, MPI_Probe, matched probes (MPI_Mprobe, MPI_Improbe,
 * MPI_Mrecv, MPI_Imrecv), ordering, and the collectives common benchmarks
 * use. Every byte received is checked against what its sender wrote.
 *
 *   suite [max_bytes]     (default 4 MiB)
 *
 * Prints "suite: ok (N ranks)" on rank 0; any mismatch aborts the job.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "rank %d: check failed: ", rank);   \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			MPI_Abort(MPI_COMM_WORLD, 3);                        \
		}                                                            \
	} while (0)

/* Byte i of a message from `src` with `tag`: a pattern no two messages share. */
static unsigned char pat(int src, int tag, size_t i)
{
	return (unsigned char)(i * 131u + (size_t)src * 17u + (size_t)tag * 29u + (i >> 12));
}

static void fill(unsigned char *b, size_t n, int src, int tag)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(src, tag, i);
}

static void verify(const unsigned char *b, size_t n, int src, int tag, const char *what)
{
	for (size_t i = 0; i < n; i++)
		CHECK(b[i] == pat(src, tag, i), "%s: %zu bytes from rank %d tag %d: byte %zu is %u, not %u",
		      what, n, src, tag, i, b[i], pat(src, tag, i));
}

/* Ring exchange with blocking calls (Sendrecv) at every size. */
static void ring(size_t max)
{
	unsigned char *s = malloc(max + 1), *r = malloc(max + 1);
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	for (size_t n = 0; n <= max; n = n ? n * 4 : 1) {
		int tag = (int)(n % 1000);
		MPI_Status st;
		int count;
		fill(s, n, rank, tag);
		memset(r, 0, n);
		MPI_Sendrecv(s, (int)n, MPI_BYTE, right, tag, r, (int)n, MPI_BYTE, left, tag,
			     MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK((size_t)count == n, "ring: got %d bytes, not %zu", count, n);
		verify(r, n, left, tag, "ring");
	}
	free(s);
	free(r);
}

/* Non-blocking: every rank sends to every other at once, several sizes,
 * receives posted before and after the sends (expected and unexpected). */
static void all_pairs(size_t max)
{
	size_t sizes[] = {0, 8, 1000, 1025, 65536, max};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		unsigned char *s = malloc(n + 1), *r = malloc((n + 1) * (size_t)size);
		MPI_Request *q = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
		int m = 0, tag = 100 + (int)k;
		fill(s, n, rank, tag);
		if (k % 2 == 0)
			for (int p = 0; p < size; p++)
				MPI_Irecv(r + (size_t)p * (n + 1), (int)n, MPI_BYTE, p, tag, MPI_COMM_WORLD, &q[m++]);
		for (int p = 0; p < size; p++)
			MPI_Isend(s, (int)n, MPI_BYTE, p, tag, MPI_COMM_WORLD, &q[m++]);
		if (k % 2 == 1) {
			MPI_Barrier(MPI_COMM_WORLD);
			for (int p = 0; p < size; p++)
				MPI_Irecv(r + (size_t)p * (n + 1), (int)n, MPI_BYTE, p, tag, MPI_COMM_WORLD, &q[m++]);
		}
		MPI_Waitall(m, q, MPI_STATUSES_IGNORE);
		for (int p = 0; p < size; p++)
			verify(r + (size_t)p * (n + 1), n, p, tag, "all pairs");
		free(s);
		free(r);
		free(q);
	}
}

/* MPI_ANY_SOURCE / MPI_ANY_TAG, MPI_Probe, and order per sender. */
static void wildcards(void)
{
	const int per = 20;
	if (rank == 0) {
		int seen[64] = {0};
		for (int i = 0; i < per * (size - 1); i++) {
			MPI_Status st;
			int count, v[2];
			MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_INT, &count);
			CHECK(count == 2, "probe: %d ints, not 2", count);
			MPI_Recv(v, 2, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			CHECK(v[0] == st.MPI_SOURCE, "wildcard: from %d says %d", st.MPI_SOURCE, v[0]);
			CHECK(v[1] == seen[st.MPI_SOURCE], "order: from %d message %d came as number %d",
			      st.MPI_SOURCE, v[1], seen[st.MPI_SOURCE]);
			CHECK(st.MPI_TAG == 7 + v[1] % 3, "tag %d for message %d", st.MPI_TAG, v[1]);
			seen[st.MPI_SOURCE]++;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		/* A wildcard receive straight into the buffer. */
		for (int i = 1; i < size; i++) {
			MPI_Status st;
			int v[2];
			MPI_Recv(v, 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			CHECK(st.MPI_TAG == 99 && v[0] == st.MPI_SOURCE, "any-source receive");
		}
	} else {
		for (int i = 0; i < per; i++) {
			int v[2] = {rank, i};
			MPI_Send(v, 2, MPI_INT, 0, 7 + i % 3, MPI_COMM_WORLD);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		int v[2] = {rank, -1};
		MPI_Send(v, 2, MPI_INT, 0, 99, MPI_COMM_WORLD);
	}
}

/* Matched probes (MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv: the
 * provider's FI_PEEK | FI_CLAIM): a claimed message is no longer seen by
 * other receives, and is received whole later. Each sender sends tag 40
 * then tag 41, small and large; rank 0 claims the first of each sender,
 * receives the second with a wildcard tag, then the claimed one. */
static void matched_probes(size_t max)
{
	size_t sizes[2] = {8, max < 300000 ? max : 300000};
	unsigned char *b = malloc(sizes[1] + 1), *c = malloc(sizes[1] + 1);
	/* Rank 0's wildcard receives before this must not see these. */
	MPI_Barrier(MPI_COMM_WORLD);
	for (int k = 0; k < 2; k++) {
		size_t n = sizes[k];
		if (rank == 0) {
			for (int src = 1; src < size; src++) {
				MPI_Message m;
				MPI_Status st;
				int count, flag = 0;
				if (src % 2) {
					MPI_Mprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &m, &st);
				} else {
					while (!flag)
						MPI_Improbe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st);
				}
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK(st.MPI_TAG == 40 && (size_t)count == n,
				      "mprobe from %d: tag %d, %d bytes (not 40, %zu)", src, st.MPI_TAG, count, n);
				/* The claimed message is not this receive's. */
				MPI_Recv(c, (int)n, MPI_BYTE, src, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
				CHECK(st.MPI_TAG == 41, "after a claim from %d: tag %d, not 41", src, st.MPI_TAG);
				verify(c, n, src, 41, "receive beside a claim");
				memset(b, 0, n);
				if (src % 2) {
					MPI_Mrecv(b, (int)n, MPI_BYTE, &m, &st);
				} else {
					MPI_Request q;
					MPI_Imrecv(b, (int)n, MPI_BYTE, &m, &q);
					MPI_Wait(&q, &st);
				}
				CHECK(st.MPI_SOURCE == src && st.MPI_TAG == 40, "mrecv: from %d tag %d", st.MPI_SOURCE,
				      st.MPI_TAG);
				verify(b, n, src, 40, "mrecv");
			}
		} else {
			fill(b, n, rank, 40);
			fill(c, n, rank, 41);
			MPI_Send(b, (int)n, MPI_BYTE, 0, 40, MPI_COMM_WORLD);
			MPI_Send(c, (int)n, MPI_BYTE, 0, 41, MPI_COMM_WORLD);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	free(b);
	free(c);
}

static void collectives(size_t max)
{
	int n = (int)(max / sizeof(int) / (size_t)size);
	if (n > 65536)
		n = 65536;
	if (n < 1)
		n = 1;
	int *a = malloc(sizeof(int) * (size_t)n * (size_t)size);
	int *b = malloc(sizeof(int) * (size_t)n * (size_t)size);

	MPI_Barrier(MPI_COMM_WORLD);

	for (int root = 0; root < size; root += size > 4 ? size / 3 : 1) {
		for (int i = 0; i < n; i++)
			a[i] = rank == root ? i * 7 + root : -1;
		MPI_Bcast(a, n, MPI_INT, root, MPI_COMM_WORLD);
		for (int i = 0; i < n; i++)
			CHECK(a[i] == i * 7 + root, "bcast from %d: [%d] = %d", root, i, a[i]);

		for (int i = 0; i < n; i++)
			a[i] = rank + i;
		MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
		if (rank == root)
			for (int i = 0; i < n; i++)
				CHECK(b[i] == size * (size - 1) / 2 + size * i, "reduce to %d: [%d] = %d", root, i, b[i]);
	}

	double x = rank + 0.5, y = 0;
	MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	CHECK(y == size * (size - 1) / 2.0 + size * 0.5, "allreduce: %f", y);
	for (int i = 0; i < n; i++)
		a[i] = rank * i;
	MPI_Allreduce(a, b, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	for (int i = 0; i < n; i++)
		CHECK(b[i] == (size - 1) * i, "allreduce max: [%d] = %d", i, b[i]);

	for (int i = 0; i < n; i++)
		a[i] = rank * 1000 + i;
	MPI_Gather(a, n, MPI_INT, b, n, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0)
		for (int p = 0; p < size; p++)
			for (int i = 0; i < n; i++)
				CHECK(b[p * n + i] == p * 1000 + i, "gather: [%d][%d]", p, i);

	if (rank == 0)
		for (int p = 0; p < size; p++)
			for (int i = 0; i < n; i++)
				b[p * n + i] = p * 3 + i;
	MPI_Scatter(b, n, MPI_INT, a, n, MPI_INT, 0, MPI_COMM_WORLD);
	for (int i = 0; i < n; i++)
		CHECK(a[i] == rank * 3 + i, "scatter: [%d] = %d", i, a[i]);

	for (int p = 0; p < size; p++)
		for (int i = 0; i < n; i++)
			a[p * n + i] = rank * 100000 + p * 100 + i % 100;
	MPI_Alltoall(a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD);
	for (int p = 0; p < size; p++)
		for (int i = 0; i < n; i++)
			CHECK(b[p * n + i] == p * 100000 + rank * 100 + i % 100, "alltoall: from %d [%d]", p, i);

	MPI_Allgather(&rank, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
	for (int p = 0; p < size; p++)
		CHECK(b[p] == p, "allgather: [%d] = %d", p, b[p]);

	MPI_Barrier(MPI_COMM_WORLD);
	free(a);
	free(b);
}

int main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)4 << 20;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size <= 64, "at most 64 ranks");
	ring(max);
	if (rank == 0) printf("suite: ring ok\n");
	all_pairs(max);
	if (rank == 0) printf("suite: non-blocking all pairs ok\n");
	wildcards();
	if (rank == 0) printf("suite: wildcards, probe, order ok\n");
	matched_probes(max);
	if (rank == 0) printf("suite: matched probe and receive ok\n");
	collectives(max);
	if (rank == 0) printf("suite: collectives ok\n");
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("suite: ok (%d ranks, up to %zu bytes)\n", size, max);
	MPI_Finalize();
	return 0;
}
