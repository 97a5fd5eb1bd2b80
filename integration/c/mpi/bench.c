/*
 * Ping-pong latency and streaming bandwidth between ranks 0 and 1, 8 B to
 * 4 MiB (the measurements of seed 004's "Performance" section for MPI).
 *
 *   bench [max_bytes] [iterations]
 *
 * Prints one line per size: "bench SIZE one_way_us MB/s" (rank 0). The
 * one-way time is half the median round trip (a mean would let a few
 * descheduled round trips on a busy host decide it).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int rank, size;
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)4 << 20;
	int iters = argc > 2 ? atoi(argv[2]) : 200;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "bench: needs 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	char *buf = malloc(max);
	double *rt = malloc(sizeof(double) * (size_t)(iters > 4 ? iters : 4));
	memset(buf, 1, max);
	const int window = 16;
	MPI_Request q[16];
	if (rank == 0)
		printf("bench size_bytes one_way_us bandwidth_MBps\n");
	for (size_t n = 8; n <= max; n *= 2) {
		int it = n >= (1 << 20) ? (iters / 10 > 4 ? iters / 10 : 4) : iters;
		double lat = 0, bw = 0;
		if (rank < 2) {
			int peer = 1 - rank;
			/* warm up, then ping-pong */
			for (int w = 0; w < 2; w++) {
				int reps = w ? it : 2;
				for (int i = 0; i < reps; i++) {
					double t0 = MPI_Wtime();
					if (rank == 0) {
						MPI_Send(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
						MPI_Recv(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					} else {
						MPI_Recv(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
						MPI_Send(buf, (int)n, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
					}
					rt[i] = MPI_Wtime() - t0;
				}
				qsort(rt, (size_t)reps, sizeof(double), cmp_double);
				lat = rt[reps / 2] / 2 * 1e6;
			}
			/* streaming: windows of non-blocking sends, one ack each */
			int wins = it / 4 > 2 ? it / 4 : 2;
			double t0 = MPI_Wtime();
			for (int k = 0; k < wins; k++) {
				for (int i = 0; i < window; i++) {
					if (rank == 0)
						MPI_Isend(buf, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &q[i]);
					else
						MPI_Irecv(buf, (int)n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &q[i]);
				}
				MPI_Waitall(window, q, MPI_STATUSES_IGNORE);
				if (rank == 0)
					MPI_Recv(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				else
					MPI_Send(NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
			}
			double t = MPI_Wtime() - t0;
			bw = (double)n * window * wins / t / 1e6;
		}
		if (rank == 0)
			printf("bench %zu %.2f %.1f\n", n, lat, bw);
		fflush(stdout);
		MPI_Barrier(MPI_COMM_WORLD);
	}
	free(rt);
	free(buf);
	MPI_Finalize();
	return 0;
}
