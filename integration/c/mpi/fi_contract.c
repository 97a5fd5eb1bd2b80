/*
 * The `mc` provider's own contract, through libfabric's API alone (no
 * MPI): one process, two endpoints on its node (a UMP channel between
 * them), an address vector, a tagged completion queue.
 *
 * Checks: fi_getinfo finds it with Open MPI's hints and refuses what it
 * does not offer; addresses round-trip through fi_getname, fi_av_insert and
 * fi_av_lookup; tagged matching with ignore bits, in order, expected and
 * unexpected, 0 bytes to 1 MiB; directed receive; FI_MSG beside FI_TAGGED;
 * remote CQ data and the source address; FI_PEEK (FI_ENOMSG when nothing
 * matches); truncation as FI_ETRUNC; fi_cancel as FI_ECANCELED; inject.
 *
 * Run as one virtual guest: mc-host run --nodes 1 -- ./fi_contract
 * Prints "fi_contract: ok".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define CHECK(c, ...)                                                   \
	do {                                                            \
		if (!(c)) {                                             \
			fprintf(stderr, "fi_contract: line %d: ", __LINE__); \
			fprintf(stderr, __VA_ARGS__);                   \
			fprintf(stderr, "\n");                          \
			exit(1);                                        \
		}                                                       \
	} while (0)
#define OK(call)                                                                     \
	do {                                                                         \
		long r_ = (long)(call);                                              \
		CHECK(r_ == 0, "%s: %ld (%s)", #call, r_, fi_strerror((int)-r_)); \
	} while (0)

static struct fid_cq *cq;

/* Wait for one completion; returns 0 or the error's code. */
static int wait_one(struct fi_cq_tagged_entry *e, fi_addr_t *src, struct fi_cq_err_entry *err)
{
	for (long spins = 0; spins < 200000000L; spins++) {
		ssize_t n = fi_cq_readfrom(cq, e, 1, src);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			CHECK(fi_cq_readerr(cq, err, 0) == 1, "fi_cq_readerr");
			return err->err;
		}
		CHECK(n == -FI_EAGAIN, "fi_cq_read: %zd", n);
	}
	CHECK(0, "no completion");
	return -1;
}

static void expect(void *ctx, uint64_t flags, size_t len, uint64_t tag)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t src;
	int r = wait_one(&e, &src, &err);
	CHECK(r == 0, "completion error %d (%s)", r, fi_strerror(r));
	CHECK(e.op_context == ctx, "context %p, not %p", e.op_context, ctx);
	CHECK((e.flags & flags) == flags, "flags %#lx lack %#lx", (unsigned long)e.flags, (unsigned long)flags);
	if (flags & FI_RECV) {
		CHECK(e.len == len, "length %zu, not %zu", e.len, len);
		CHECK(e.tag == tag, "tag %#lx, not %#lx", (unsigned long)e.tag, (unsigned long)tag);
	}
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *ep[2];
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr av_attr = {.type = FI_AV_MAP};
	fi_addr_t fa[2];
	uint64_t names[2];
	struct fi_context ctx[64];

	/* Open MPI's ofi MTL's hints. */
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->tx_attr->op_flags = FI_COMPLETION;
	hints->rx_attr->op_flags = FI_COMPLETION;
	hints->domain_attr->av_type = FI_AV_MAP;
	hints->domain_attr->resource_mgmt = FI_RM_ENABLED;
	hints->fabric_attr->prov_name = strdup("mc");
	OK(fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, hints, &info));
	CHECK(info->ep_attr->type == FI_EP_RDM && (info->caps & FI_TAGGED), "getinfo");
	CHECK(info->domain_attr->data_progress == FI_PROGRESS_MANUAL, "manual progress");

	/* What it does not offer is refused. */
	{
		struct fi_info *h = fi_dupinfo(hints), *none = NULL;
		h->caps = FI_TAGGED | FI_RMA;
		CHECK(fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, h, &none) == -FI_ENODATA, "FI_RMA refused");
		h->caps = FI_TAGGED;
		h->ep_attr->type = FI_EP_MSG;
		CHECK(fi_getinfo(FI_VERSION(1, 0), NULL, NULL, 0, h, &none) == -FI_ENODATA, "FI_EP_MSG refused");
		fi_freeinfo(h);
	}

	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	OK(fi_av_open(domain, &av_attr, &av, NULL));
	for (int i = 0; i < 2; i++) {
		size_t len = sizeof(names[i]);
		OK(fi_endpoint(domain, info, &ep[i], NULL));
		OK(fi_ep_bind(ep[i], &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
		OK(fi_ep_bind(ep[i], &av->fid, 0));
		OK(fi_enable(ep[i]));
		OK(fi_getname(&ep[i]->fid, &names[i], &len));
		CHECK(len == 8, "address length %zu", len);
	}
	{
		size_t small = 2;
		char b[2];
		CHECK(fi_getname(&ep[0]->fid, b, &small) == -FI_ETOOSMALL && small == 8, "short name buffer");
	}
	CHECK(fi_av_insert(av, names, 2, fa, 0, NULL) == 2, "fi_av_insert");
	{
		uint64_t back = 0, bogus = 42;
		size_t len = sizeof(back);
		fi_addr_t bad;
		OK(fi_av_lookup(av, fa[1], &back, &len));
		CHECK(back == names[1] && len == 8, "fi_av_lookup");
		CHECK(fi_av_insert(av, &bogus, 1, &bad, 0, NULL) == 0 && bad == FI_ADDR_NOTAVAIL,
		      "a foreign address is refused");
	}

	/* Tagged, with ignore bits, in order, sizes 0 .. 1 MiB; the receive
	 * posted first for even sizes (expected), after for odd (unexpected). */
	size_t max = 1 << 20;
	unsigned char *s = malloc(max), *r = malloc(max);
	for (size_t i = 0; i < max; i++)
		s[i] = (unsigned char)(i * 7 + 3);
	size_t sizes[] = {0, 1, 8, 1024, 1025, 65536, 300000, 1 << 20};
	for (int k = 0; k < 8; k++) {
		size_t n = sizes[k];
		uint64_t tag = 0x1234000000000000ULL | (uint64_t)k;
		memset(r, 0, n);
		if (k % 2 == 0)
			OK(fi_trecv(ep[1], r, n, NULL, FI_ADDR_UNSPEC, 0x1234000000000000ULL, 0xffff, &ctx[0]));
		OK(fi_tsend(ep[0], s, n, NULL, fa[1], tag, &ctx[1]));
		if (k % 2 == 1)
			OK(fi_trecv(ep[1], r, n, NULL, fa[0], tag, 0, &ctx[0]));
		for (int c = 0; c < 2; c++) {
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err;
			fi_addr_t src = 77;
			int rc = wait_one(&e, &src, &err);
			CHECK(rc == 0, "size %zu: error %d", n, rc);
			if (e.op_context == &ctx[0]) {
				CHECK(e.len == n && e.tag == tag && (e.flags & FI_RECV) && (e.flags & FI_TAGGED),
				      "size %zu: receive completion len %zu tag %#lx", n, e.len, (unsigned long)e.tag);
				CHECK(src == fa[0], "source address");
			} else {
				CHECK(e.op_context == &ctx[1] && (e.flags & FI_SEND), "send completion");
			}
		}
		CHECK(memcmp(r, s, n) == 0, "size %zu: data differs", n);
	}

	/* Order: three messages with one tag arrive in the order sent. */
	{
		uint32_t v[3] = {1, 2, 3}, got[3] = {0};
		for (int i = 0; i < 3; i++)
			OK(fi_tinject(ep[0], &v[i], 4, fa[1], 9));
		for (int i = 0; i < 3; i++) {
			OK(fi_trecv(ep[1], &got[i], 4, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx[2 + i]));
			expect(&ctx[2 + i], FI_RECV | FI_TAGGED, 4, 9);
			CHECK(got[i] == v[i], "order: %u where %u", got[i], v[i]);
		}
	}

	/* FI_MSG beside FI_TAGGED, with remote CQ data: an untagged receive
	 * does not take a tagged message. */
	{
		char a[16] = "untagged", b[16] = {0}, c[16] = {0};
		OK(fi_tsend(ep[0], "tagged", 7, NULL, fa[1], 5, &ctx[10]));
		OK(fi_senddata(ep[0], a, 9, NULL, 0xabcdef, fa[1], &ctx[11]));
		OK(fi_recv(ep[1], b, sizeof(b), NULL, FI_ADDR_UNSPEC, &ctx[12]));
		OK(fi_trecv(ep[1], c, sizeof(c), NULL, FI_ADDR_UNSPEC, 5, 0, &ctx[13]));
		int seen = 0;
		while (seen != 0xf) {
			struct fi_cq_tagged_entry e;
			struct fi_cq_err_entry err;
			fi_addr_t src;
			CHECK(wait_one(&e, &src, &err) == 0, "msg completion");
			for (int i = 0; i < 4; i++)
				if (e.op_context == &ctx[10 + i])
					seen |= 1 << i;
			if (e.op_context == &ctx[12])
				CHECK((e.flags & FI_MSG) && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0xabcdef,
				      "untagged with data");
		}
		CHECK(strcmp(b, "untagged") == 0 && strcmp(c, "tagged") == 0, "msg/tagged kept apart");
	}

	/* FI_PEEK: nothing there is FI_ENOMSG; a message there is reported. */
	{
		struct fi_msg_tagged m = {0};
		struct iovec iov = {0};
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		char b[32];
		m.msg_iov = &iov;
		m.iov_count = 0;
		m.addr = FI_ADDR_UNSPEC;
		m.tag = 77;
		m.context = &ctx[20];
		OK(fi_trecvmsg(ep[1], &m, FI_PEEK | FI_COMPLETION));
		CHECK(wait_one(&e, &src, &err) == FI_ENOMSG && err.op_context == &ctx[20], "peek: FI_ENOMSG");
		OK(fi_tsend(ep[0], "peekaboo", 9, NULL, fa[1], 77, &ctx[21]));
		expect(&ctx[21], FI_SEND, 0, 0);
		int got = 0;
		for (int tries = 0; tries < 1000000 && !got; tries++) {
			OK(fi_trecvmsg(ep[1], &m, FI_PEEK | FI_COMPLETION));
			int rc = wait_one(&e, &src, &err);
			got = rc == 0;
			CHECK(rc == 0 || rc == FI_ENOMSG, "peek: %d", rc);
		}
		CHECK(got && e.len == 9 && e.tag == 77, "peek reports the message");
		OK(fi_trecv(ep[1], b, sizeof(b), NULL, FI_ADDR_UNSPEC, 77, 0, &ctx[22]));
		expect(&ctx[22], FI_RECV, 9, 77);
		CHECK(strcmp(b, "peekaboo") == 0, "peeked message still received");
	}

	/* Truncation: FI_ETRUNC with the bytes that did not fit. */
	{
		char b[4];
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		OK(fi_trecv(ep[1], b, 4, NULL, FI_ADDR_UNSPEC, 8, 0, &ctx[30]));
		OK(fi_tsend(ep[0], s, 100000, NULL, fa[1], 8, &ctx[31]));
		int errors = 0, done = 0;
		while (done < 2) {
			int rc = wait_one(&e, &src, &err);
			done++;
			if (rc) {
				CHECK(rc == FI_ETRUNC && err.op_context == &ctx[30] && err.olen == 100000 - 4,
				      "truncation: err %d olen %zu", rc, err.olen);
				errors++;
			}
		}
		CHECK(errors == 1 && memcmp(b, s, 4) == 0, "truncated receive");
	}

	/* Cancel: a posted receive completes with FI_ECANCELED; a second
	 * cancel finds nothing. */
	{
		char b[8];
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		fi_addr_t src;
		OK(fi_trecv(ep[1], b, 8, NULL, FI_ADDR_UNSPEC, 1000, 0, &ctx[40]));
		OK(fi_cancel(&ep[1]->fid, &ctx[40]));
		CHECK(wait_one(&e, &src, &err) == FI_ECANCELED && err.op_context == &ctx[40], "cancel");
		CHECK(fi_cancel(&ep[1]->fid, &ctx[40]) == -FI_ENOENT, "cancel twice");
	}

	/* Bad use gets an error, not a crash. */
	CHECK(fi_tsend(ep[0], s, 8, NULL, (fi_addr_t)999, 1, &ctx[50]) == -FI_EINVAL, "unknown fi_addr");
	CHECK(fi_tinject(ep[0], s, 1 << 20, fa[1], 1) < 0, "inject beyond inject_size");

	for (int i = 0; i < 2; i++)
		OK(fi_close(&ep[i]->fid));
	OK(fi_close(&av->fid));
	OK(fi_close(&cq->fid));
	OK(fi_close(&domain->fid));
	OK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(s);
	free(r);
	printf("fi_contract: ok\n");
	return 0;
}
