/*
 * Ping-pong straight on the `mc` provider (fi_tsend, fi_trecv,
 * fi_cq_read; no MPI), between the first endpoints of nodes 0 and 1: what
 * the provider and UMP cost without Open MPI's cm PML and ofi MTL above
 * them. Also the cost of one fi_cq_read that finds nothing (the
 * provider's progress on an idle endpoint).
 *
 * Run as two virtual guests:
 *   FI_PROVIDER_PATH=DIR FI_PROVIDER=mc mc-host run --nodes 2 -- ./fi_pingpong [SIZE] [ITERS]
 * Node 0 prints "fi_pingpong SIZE one_way_us_median empty_read_ns".
 *
 * The peer's address is computed, not exchanged: the provider's address
 * is a tag, the node (bits 32-39) and the endpoint's number on its node,
 * and each node opens one endpoint here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define OK(call)                                                                       \
	do {                                                                           \
		long r_ = (long)(call);                                                \
		if (r_ != 0) {                                                         \
			fprintf(stderr, "fi_pingpong: %s: %ld (%s)\n", #call, r_,       \
				fi_strerror((int)-r_));                                \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static struct fid_cq *cq;

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static struct fi_context sctx, rctx;
static int send_done, recv_done;

/* Wait until the send (`want_send`) or the receive has completed; a
 * completion of the other one that comes first is kept, not lost (a send
 * that could not finish at once completes after the reply's receive). */
static void wait_for(int want_send)
{
	struct fi_cq_tagged_entry e;
	for (;;) {
		if (want_send ? send_done : recv_done) {
			if (want_send)
				send_done = 0;
			else
				recv_done = 0;
			return;
		}
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1) {
			if (e.op_context == &sctx)
				send_done = 1;
			else if (e.op_context == &rctx)
				recv_done = 1;
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "fi_pingpong: completion error %d (%s)\n", err.err,
				fi_strerror(err.err));
			exit(1);
		}
		if (n != -FI_EAGAIN) {
			fprintf(stderr, "fi_pingpong: fi_cq_read: %zd\n", n);
			exit(1);
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 8;
	int iters = argc > 2 ? atoi(argv[2]) : 10000;
	const char *node_env = getenv("MC_NODE");
	int me = node_env ? atoi(node_env) : -1;
	if ((me != 0 && me != 1) || iters < 1) {
		fprintf(stderr, "fi_pingpong: run on 2 nodes (mc-host run --nodes 2)\n");
		return 1;
	}
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	uint64_t name, peer_name;
	size_t len = sizeof(name);
	fi_addr_t peer;

	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->fabric_attr->prov_name = strdup("mc");
	OK(fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, hints, &info));
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	OK(fi_endpoint(domain, info, &ep, NULL));
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_ep_bind(ep, &av->fid, 0));
	OK(fi_enable(ep));
	OK(fi_getname(&ep->fid, &name, &len));
	peer_name = (name & ~((uint64_t)0xff << 32)) | ((uint64_t)(1 - me) << 32);
	if (fi_av_insert(av, &peer_name, 1, &peer, 0, NULL) != 1) {
		fprintf(stderr, "fi_pingpong: fi_av_insert refused the peer's address\n");
		return 1;
	}

	char *buf = calloc(1, size ? size : 1);
	double *rt = malloc(sizeof(double) * (size_t)iters);
	/* A warm-up round trip opens the channel both ways. */
	for (int i = -100; i < iters; i++) {
		double t0 = now_us();
		if (me == 0) {
			OK(fi_tsend(ep, buf, size, NULL, peer, 1, &sctx));
			OK(fi_trecv(ep, buf, size, NULL, peer, 1, 0, &rctx));
			wait_for(1);
			wait_for(0);
		} else {
			OK(fi_trecv(ep, buf, size, NULL, peer, 1, 0, &rctx));
			wait_for(0);
			OK(fi_tsend(ep, buf, size, NULL, peer, 1, &sctx));
			wait_for(1);
		}
		if (i >= 0)
			rt[i] = now_us() - t0;
	}
	/* An idle endpoint: the cost of a read that finds nothing, before the
	 * queue's back-off starts (it yields after 2000 empty reads). */
	const int empty = 1000;
	struct fi_cq_tagged_entry e;
	double t0 = now_us();
	for (int i = 0; i < empty; i++)
		fi_cq_read(cq, &e, 1);
	double empty_ns = (now_us() - t0) * 1e3 / empty;
	/* A last exchange, so neither closes while the other still reads. */
	if (me == 0) {
		OK(fi_tsend(ep, buf, 0, NULL, peer, 2, &sctx));
		wait_for(1);
		OK(fi_trecv(ep, buf, 0, NULL, peer, 2, 0, &rctx));
		wait_for(0);
	} else {
		OK(fi_trecv(ep, buf, 0, NULL, peer, 2, 0, &rctx));
		wait_for(0);
		OK(fi_tsend(ep, buf, 0, NULL, peer, 2, &sctx));
		wait_for(1);
	}
	qsort(rt, (size_t)iters, sizeof(double), cmp_double);
	if (me == 0)
		printf("fi_pingpong %zu %.2f %.0f\n", size, rt[iters / 2] / 2, empty_ns);
	fflush(stdout);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(rt);
	free(buf);
	return 0;
}
