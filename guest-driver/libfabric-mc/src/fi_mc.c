/*
 * fi_mc.c: the `mc` libfabric provider's C surface. libfabric's provider
 * interface is C structures of function pointers (fid objects and their
 * operation tables); this file fills them in and hands every operation to
 * the Rust side (mcfi_*, src/lib.rs), which owns the state: UMP channels,
 * matching, completion queues.
 *
 * Only libfabric's public headers are used. Loaded by libfabric as
 * libmc-fi.so from FI_PROVIDER_PATH (fi_prov_ini).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#define MC_NAME "mc"
#define MC_PROV_VERSION FI_VERSION(0, 1)
#define MC_ADDRLEN 8
/* Must agree with src/wire.rs (INLINE) and src/ep/mod.rs (MAX_MSG). */
#define MC_INJECT 1024
#define MC_MAX_MSG (1ULL << 32)
#define MC_ORDER (FI_ORDER_SAS)
#define MC_PRIMARY (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV)
#define MC_SECONDARY (FI_DIRECTED_RECV | FI_SOURCE | FI_REMOTE_CQ_DATA | FI_LOCAL_COMM | FI_REMOTE_COMM)
#define MC_CAPS (MC_PRIMARY | MC_SECONDARY)

/* The Rust side (src/lib.rs, src/cq.rs). */
struct mcfi_comp {
	uint64_t context, kind, len, buf, data, tag, src;
	int64_t err;
	uint64_t olen;
};
struct mcfi_send {
	uint64_t ctx, buf, len, dest, tag, data, tagged, has_data, completion, inject;
};
struct mcfi_recv {
	uint64_t ctx, buf, cap, src, tag, ignore, tagged, completion, peek, claim, discard;
};
#define K_SEND 1
#define K_RECV 2
#define K_TAGGED 4
#define K_DATA 8
#define K_MSG 16

const void *mcfi_domain_open(char *why, size_t len);
void mcfi_domain_close(const void *d);
const void *mcfi_av_open(void);
void mcfi_av_close(const void *av);
int mcfi_av_insert(const void *av, const uint64_t *addrs, size_t count, uint64_t *out);
int mcfi_av_remove(const void *av, uint64_t fi);
int mcfi_av_lookup(const void *av, uint64_t fi, uint64_t *out);
const void *mcfi_cq_open(void);
void mcfi_cq_close(const void *cq);
ssize_t mcfi_cq_read(const void *cq, struct mcfi_comp *out, size_t count);
ssize_t mcfi_cq_readerr(const void *cq, struct mcfi_comp *out);
const void *mcfi_ep_open(const void *d);
void mcfi_ep_close(const void *ep);
int mcfi_ep_bind_cq(const void *ep, const void *cq, int transmit, int recv);
int mcfi_ep_bind_av(const void *ep, const void *av);
int mcfi_ep_enable(const void *ep);
uint64_t mcfi_ep_addr(const void *ep);
ssize_t mcfi_ep_send(const void *ep, const struct mcfi_send *s);
ssize_t mcfi_ep_recv(const void *ep, const struct mcfi_recv *r);
ssize_t mcfi_ep_cancel(const void *ep, uint64_t ctx);
void mcfi_last_error(char *buf, size_t len);

/* The API version the application asked for (struct layouts follow it). */
static uint32_t mc_api_version = FI_VERSION(1, 0);

struct mc_fabric {
	struct fid_fabric f;
};
struct mc_domain {
	struct fid_domain d;
	const void *core;
};
struct mc_av {
	struct fid_av av;
	const void *core;
};
struct mc_cq {
	struct fid_cq cq;
	const void *core;
	enum fi_cq_format format;
	char errbuf[512];
};
struct mc_ep {
	struct fid_ep ep;
	const void *core;
	uint64_t tx_op_flags, rx_op_flags;
	int tx_selective, rx_selective;
	int have_av;
};

/* ---- operations this provider does not offer ---- */

static int no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid; (void)bfid; (void)flags;
	return -FI_ENOSYS;
}
static int no_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)command; (void)arg;
	return -FI_ENOSYS;
}
static int no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}
static int no_tostr(const struct fid *fid, char *buf, size_t len)
{
	(void)fid; (void)buf; (void)len;
	return -FI_ENOSYS;
}
static int no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

/* ---- completion queues ---- */

static uint64_t fi_flags(uint64_t kind)
{
	uint64_t f = 0;
	if (kind & K_SEND) f |= FI_SEND;
	if (kind & K_RECV) f |= FI_RECV;
	if (kind & K_TAGGED) f |= FI_TAGGED;
	if (kind & K_MSG) f |= FI_MSG;
	if (kind & K_DATA) f |= FI_REMOTE_CQ_DATA;
	return f;
}

static size_t entry_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED: return sizeof(struct fi_cq_tagged_entry);
	default: return sizeof(struct fi_cq_entry);
	}
}

static void write_entry(enum fi_cq_format f, void *slot, const struct mcfi_comp *c)
{
	struct fi_cq_tagged_entry e = {
		.op_context = (void *)(uintptr_t)c->context,
		.flags = fi_flags(c->kind),
		.len = c->len,
		.buf = (void *)(uintptr_t)c->buf,
		.data = c->data,
		.tag = c->tag,
	};
	/* Every format is a prefix of the tagged one. */
	memcpy(slot, &e, entry_size(f));
}

static ssize_t cq_readfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src_addr)
{
	struct mc_cq *q = (struct mc_cq *)cq;
	struct mcfi_comp c[64];
	size_t i;
	ssize_t n;

	if (!buf || count == 0)
		return -FI_EINVAL;
	if (count > 64)
		count = 64;
	n = mcfi_cq_read(q->core, c, count);
	if (n <= 0)
		return n;
	for (i = 0; i < (size_t)n; i++) {
		write_entry(q->format, (char *)buf + i * entry_size(q->format), &c[i]);
		if (src_addr)
			src_addr[i] = c[i].src;
	}
	return n;
}

static ssize_t cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	return cq_readfrom(cq, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	struct mc_cq *q = (struct mc_cq *)cq;
	struct mcfi_comp c;
	ssize_t n;

	(void)flags;
	if (!buf)
		return -FI_EINVAL;
	n = mcfi_cq_readerr(q->core, &c);
	if (n <= 0)
		return n;
	buf->op_context = (void *)(uintptr_t)c.context;
	buf->flags = fi_flags(c.kind);
	buf->len = c.len;
	buf->buf = (void *)(uintptr_t)c.buf;
	buf->data = c.data;
	buf->tag = c.tag;
	buf->olen = c.olen;
	buf->err = (int)c.err;
	buf->prov_errno = (int)c.err;
	/* Older applications' entries end before err_data (API 1.5). */
	if (FI_VERSION_GE(mc_api_version, FI_VERSION(1, 5))) {
		buf->err_data = NULL;
		buf->err_data_size = 0;
	}
	return 1;
}

static ssize_t cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src_addr,
			    const void *cond, int timeout)
{
	struct timespec start, now;
	ssize_t n;

	(void)cond;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		n = cq_readfrom(cq, buf, count, src_addr);
		if (n != -FI_EAGAIN)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (timeout >= 0 &&
		    (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= timeout)
			return -FI_EAGAIN;
	}
}

static ssize_t cq_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond, int timeout)
{
	return cq_sreadfrom(cq, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *cq)
{
	(void)cq;
	return 0;
}

static const char *cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf,
			       size_t len)
{
	struct mc_cq *q = (struct mc_cq *)cq;
	char *out = buf && len ? buf : q->errbuf;
	size_t n = buf && len ? len : sizeof(q->errbuf);
	char why[400];

	(void)err_data;
	mcfi_last_error(why, sizeof(why));
	snprintf(out, n, "%s%s%s", fi_strerror(prov_errno), why[0] ? ": " : "", why);
	return out;
}

static int cq_close(struct fid *fid)
{
	struct mc_cq *q = (struct mc_cq *)fid;
	mcfi_cq_close(q->core);
	free(q);
	return 0;
}

static struct fi_ops cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = no_tostr,
	.ops_set = no_ops_set,
};

static struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

static int cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid,
		   void *context)
{
	struct mc_cq *q;

	(void)domain;
	if (attr) {
		switch (attr->format) {
		case FI_CQ_FORMAT_UNSPEC: case FI_CQ_FORMAT_CONTEXT: case FI_CQ_FORMAT_MSG:
		case FI_CQ_FORMAT_DATA: case FI_CQ_FORMAT_TAGGED:
			break;
		default:
			return -FI_ENOSYS;
		}
		if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
			return -FI_ENOSYS;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return -FI_ENOMEM;
	q->core = mcfi_cq_open();
	q->format = attr ? attr->format : FI_CQ_FORMAT_CONTEXT;
	if (q->format == FI_CQ_FORMAT_UNSPEC)
		q->format = FI_CQ_FORMAT_CONTEXT;
	q->cq.fid.fclass = FI_CLASS_CQ;
	q->cq.fid.context = context;
	q->cq.fid.ops = &cq_fi_ops;
	q->cq.ops = &cq_ops;
	*cq_fid = &q->cq;
	return 0;
}

/* ---- address vectors ---- */

static int av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
		     uint64_t flags, void *context)
{
	(void)context;
	if (flags & FI_EVENT)
		return -FI_ENOEQ;
	return mcfi_av_insert(((struct mc_av *)av)->core, addr, count, fi_addr);
}

static int av_insertsvc(struct fid_av *av, const char *node, const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	(void)av; (void)node; (void)service; (void)fi_addr; (void)flags; (void)context;
	return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *av, const char *node, size_t nodecnt, const char *service,
			size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	(void)av; (void)node; (void)nodecnt; (void)service; (void)svccnt; (void)fi_addr;
	(void)flags; (void)context;
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	size_t i;
	int r = 0;

	(void)flags;
	for (i = 0; i < count; i++)
		if (mcfi_av_remove(((struct mc_av *)av)->core, fi_addr[i]))
			r = -FI_EINVAL;
	return r;
}

static int av_lookup(struct fid_av *av, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	uint64_t a;
	int r = mcfi_av_lookup(((struct mc_av *)av)->core, fi_addr, &a);

	if (r)
		return r;
	if (addr && addrlen)
		memcpy(addr, &a, *addrlen < MC_ADDRLEN ? *addrlen : MC_ADDRLEN);
	if (addrlen)
		*addrlen = MC_ADDRLEN;
	return 0;
}

static const char *av_straddr(struct fid_av *av, const void *addr, char *buf, size_t *len)
{
	uint64_t a;
	char s[64];
	size_t n;

	(void)av;
	memcpy(&a, addr, sizeof(a));
	n = (size_t)snprintf(s, sizeof(s), "fi_addr_mc://node%u/%u", (unsigned)((a >> 32) & 0xff),
			     (unsigned)(a & 0xffffffff)) + 1;
	if (buf && len && *len)
		snprintf(buf, *len, "%s", s);
	if (len)
		*len = n;
	return buf;
}

static int av_set(struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **av_set_fid,
		  void *context)
{
	(void)av; (void)attr; (void)av_set_fid; (void)context;
	return -FI_ENOSYS;
}

static int av_close(struct fid *fid)
{
	struct mc_av *a = (struct mc_av *)fid;
	mcfi_av_close(a->core);
	free(a);
	return 0;
}

static struct fi_ops av_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = no_tostr,
	.ops_set = no_ops_set,
};

static struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = av_set,
};

static int av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av_fid,
		   void *context)
{
	struct mc_av *a;

	(void)domain;
	if (attr && attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
		return -FI_EINVAL;
	if (attr && (attr->flags & FI_EVENT))
		return -FI_ENOEQ;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -FI_ENOMEM;
	a->core = mcfi_av_open();
	a->av.fid.fclass = FI_CLASS_AV;
	a->av.fid.context = context;
	a->av.fid.ops = &av_fi_ops;
	a->av.ops = &av_ops;
	*av_fid = &a->av;
	return 0;
}

/* ---- endpoints ---- */

static const void *ep_core(struct fid_ep *ep)
{
	return ((struct mc_ep *)ep)->core;
}

static int tx_completion(struct fid_ep *ep, uint64_t flags)
{
	return !((struct mc_ep *)ep)->tx_selective || (flags & FI_COMPLETION);
}

static int rx_completion(struct fid_ep *ep, uint64_t flags)
{
	return !((struct mc_ep *)ep)->rx_selective || (flags & FI_COMPLETION);
}

/* One buffer from an iovec of at most one entry. */
static int one_iov(const struct iovec *iov, size_t count, void **buf, size_t *len)
{
	if (count > 1)
		return -FI_EINVAL;
	*buf = count ? iov[0].iov_base : NULL;
	*len = count ? iov[0].iov_len : 0;
	return 0;
}

static ssize_t do_send(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest, int tagged,
		       uint64_t tag, int has_data, uint64_t data, void *context, int completion,
		       int inject)
{
	struct mcfi_send s = {
		.ctx = (uint64_t)(uintptr_t)context,
		.buf = (uint64_t)(uintptr_t)buf,
		.len = len,
		.dest = dest,
		.tag = tag,
		.data = data,
		.tagged = (uint64_t)tagged,
		.has_data = (uint64_t)has_data,
		.completion = (uint64_t)completion,
		.inject = (uint64_t)inject,
	};
	return mcfi_ep_send(ep_core(ep), &s);
}

static ssize_t do_recv(struct fid_ep *ep, void *buf, size_t len, fi_addr_t src, int tagged,
		       uint64_t tag, uint64_t ignore, void *context, int completion, uint64_t flags)
{
	struct mcfi_recv r = {
		.ctx = (uint64_t)(uintptr_t)context,
		.buf = (uint64_t)(uintptr_t)buf,
		.cap = len,
		.src = src,
		.tag = tag,
		.ignore = ignore,
		.tagged = (uint64_t)tagged,
		.completion = (uint64_t)completion,
		.peek = !!(flags & FI_PEEK),
		.claim = !!(flags & FI_CLAIM),
		.discard = !!(flags & FI_DISCARD),
	};
	return mcfi_ep_recv(ep_core(ep), &r);
}

/* tagged */
static ssize_t t_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		      uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return do_recv(ep, buf, len, src, 1, tag, ignore, context,
		       rx_completion(ep, ((struct mc_ep *)ep)->rx_op_flags), 0);
}
static ssize_t t_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
	void *b;
	size_t l;
	int r = one_iov(iov, count, &b, &l);
	return r ? r : t_recv(ep, b, l, desc ? desc[0] : NULL, src, tag, ignore, context);
}
static ssize_t t_recvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	void *b;
	size_t l;
	int r = one_iov(msg->msg_iov, msg->iov_count, &b, &l);
	return r ? r : do_recv(ep, b, l, msg->addr, 1, msg->tag, msg->ignore, msg->context,
			       rx_completion(ep, flags), flags);
}
static ssize_t t_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
		      uint64_t tag, void *context)
{
	(void)desc;
	return do_send(ep, buf, len, dest, 1, tag, 0, 0, context,
		       tx_completion(ep, ((struct mc_ep *)ep)->tx_op_flags), 0);
}
static ssize_t t_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t dest, uint64_t tag, void *context)
{
	void *b;
	size_t l;
	int r = one_iov(iov, count, &b, &l);
	return r ? r : t_send(ep, b, l, desc ? desc[0] : NULL, dest, tag, context);
}
static ssize_t t_sendmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags)
{
	void *b;
	size_t l;
	int r = one_iov(msg->msg_iov, msg->iov_count, &b, &l);
	return r ? r : do_send(ep, b, l, msg->addr, 1, msg->tag, !!(flags & FI_REMOTE_CQ_DATA),
			       msg->data, msg->context, tx_completion(ep, flags),
			       !!(flags & FI_INJECT) && l <= MC_INJECT);
}
static ssize_t t_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	return do_send(ep, buf, len, dest, 1, tag, 0, 0, NULL, 0, 1);
}
static ssize_t t_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
			  fi_addr_t dest, uint64_t tag, void *context)
{
	(void)desc;
	return do_send(ep, buf, len, dest, 1, tag, 1, data, context,
		       tx_completion(ep, ((struct mc_ep *)ep)->tx_op_flags), 0);
}
static ssize_t t_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			    fi_addr_t dest, uint64_t tag)
{
	return do_send(ep, buf, len, dest, 1, tag, 1, data, NULL, 0, 1);
}

/* untagged */
static ssize_t m_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	(void)desc;
	return do_recv(ep, buf, len, src, 0, 0, 0, context,
		       rx_completion(ep, ((struct mc_ep *)ep)->rx_op_flags), 0);
}
static ssize_t m_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t src, void *context)
{
	void *b;
	size_t l;
	int r = one_iov(iov, count, &b, &l);
	return r ? r : m_recv(ep, b, l, desc ? desc[0] : NULL, src, context);
}
static ssize_t m_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	void *b;
	size_t l;
	int r = one_iov(msg->msg_iov, msg->iov_count, &b, &l);
	if (flags & (FI_PEEK | FI_CLAIM))
		return -FI_EINVAL;
	return r ? r : do_recv(ep, b, l, msg->addr, 0, 0, 0, msg->context, rx_completion(ep, flags), 0);
}
static ssize_t m_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest,
		      void *context)
{
	(void)desc;
	return do_send(ep, buf, len, dest, 0, 0, 0, 0, context,
		       tx_completion(ep, ((struct mc_ep *)ep)->tx_op_flags), 0);
}
static ssize_t m_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t dest, void *context)
{
	void *b;
	size_t l;
	int r = one_iov(iov, count, &b, &l);
	return r ? r : m_send(ep, b, l, desc ? desc[0] : NULL, dest, context);
}
static ssize_t m_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	void *b;
	size_t l;
	int r = one_iov(msg->msg_iov, msg->iov_count, &b, &l);
	return r ? r : do_send(ep, b, l, msg->addr, 0, 0, !!(flags & FI_REMOTE_CQ_DATA), msg->data,
			       msg->context, tx_completion(ep, flags),
			       !!(flags & FI_INJECT) && l <= MC_INJECT);
}
static ssize_t m_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
	return do_send(ep, buf, len, dest, 0, 0, 0, 0, NULL, 0, 1);
}
static ssize_t m_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
			  fi_addr_t dest, void *context)
{
	(void)desc;
	return do_send(ep, buf, len, dest, 0, 0, 1, data, context,
		       tx_completion(ep, ((struct mc_ep *)ep)->tx_op_flags), 0);
}
static ssize_t m_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			    fi_addr_t dest)
{
	return do_send(ep, buf, len, dest, 0, 0, 1, data, NULL, 0, 1);
}

static ssize_t ep_cancel(fid_t fid, void *context)
{
	return mcfi_ep_cancel(((struct mc_ep *)fid)->core, (uint64_t)(uintptr_t)context);
}
static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	(void)fid; (void)level; (void)optname; (void)optval; (void)optlen;
	return -FI_ENOPROTOOPT;
}
static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	(void)fid; (void)level; (void)optname; (void)optval; (void)optlen;
	return -FI_ENOPROTOOPT;
}
static int ep_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx_ep,
		     void *context)
{
	(void)sep; (void)index; (void)attr; (void)tx_ep; (void)context;
	return -FI_ENOSYS;
}
static int ep_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
		     void *context)
{
	(void)sep; (void)index; (void)attr; (void)rx_ep; (void)context;
	return -FI_ENOSYS;
}
static ssize_t ep_size_left(struct fid_ep *ep)
{
	(void)ep;
	return 4096;
}

static int cm_getname(fid_t fid, void *addr, size_t *addrlen)
{
	uint64_t a = mcfi_ep_addr(((struct mc_ep *)fid)->core);
	size_t have;

	if (!addrlen)
		return -FI_EINVAL;
	have = *addrlen;
	*addrlen = MC_ADDRLEN;
	if (have < MC_ADDRLEN || !addr)
		return -FI_ETOOSMALL;
	memcpy(addr, &a, MC_ADDRLEN);
	return 0;
}
static int cm_setname(fid_t fid, void *addr, size_t addrlen)
{
	(void)fid; (void)addr; (void)addrlen;
	return -FI_ENOSYS;
}
static int cm_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep; (void)addr; (void)addrlen;
	return -FI_ENOSYS;
}
static int cm_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen)
{
	(void)ep; (void)addr; (void)param; (void)paramlen;
	return -FI_ENOSYS;
}
static int cm_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}
static int cm_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void)ep; (void)param; (void)paramlen;
	return -FI_ENOSYS;
}
static int cm_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
	(void)pep; (void)handle; (void)param; (void)paramlen;
	return -FI_ENOSYS;
}
static int cm_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep; (void)flags;
	return -FI_ENOSYS;
}
static int cm_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context)
{
	(void)ep; (void)addr; (void)flags; (void)mc; (void)context;
	return -FI_ENOSYS;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct mc_ep *e = (struct mc_ep *)fid;

	if (!bfid)
		return -FI_EINVAL;
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		if (!(flags & (FI_TRANSMIT | FI_RECV)))
			return -FI_EINVAL;
		if (flags & FI_TRANSMIT)
			e->tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		if (flags & FI_RECV)
			e->rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		return mcfi_ep_bind_cq(e->core, ((struct mc_cq *)bfid)->core, !!(flags & FI_TRANSMIT),
				       !!(flags & FI_RECV));
	case FI_CLASS_AV:
		if (e->have_av)
			return -FI_EINVAL;
		e->have_av = 1;
		return mcfi_ep_bind_av(e->core, ((struct mc_av *)bfid)->core);
	default:
		return -FI_ENOSYS;
	}
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct mc_ep *e = (struct mc_ep *)fid;
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		if (!e->have_av)
			return -FI_ENOAV;
		return mcfi_ep_enable(e->core);
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		*flags = (*flags & FI_TRANSMIT) ? e->tx_op_flags : e->rx_op_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			e->tx_op_flags = *flags & ~(uint64_t)FI_TRANSMIT;
		else
			e->rx_op_flags = *flags & ~(uint64_t)FI_RECV;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int ep_close(struct fid *fid)
{
	struct mc_ep *e = (struct mc_ep *)fid;
	mcfi_ep_close(e->core);
	free(e);
	return 0;
}

static struct fi_ops ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = no_ops_open,
	.tostr = no_tostr,
	.ops_set = no_ops_set,
};
static struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ep_tx_ctx,
	.rx_ctx = ep_rx_ctx,
	.rx_size_left = ep_size_left,
	.tx_size_left = ep_size_left,
};
static struct fi_ops_cm ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cm_setname,
	.getname = cm_getname,
	.getpeer = cm_getpeer,
	.connect = cm_connect,
	.listen = cm_listen,
	.accept = cm_accept,
	.reject = cm_reject,
	.shutdown = cm_shutdown,
	.join = cm_join,
};
static struct fi_ops_msg ep_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = m_recv,
	.recvv = m_recvv,
	.recvmsg = m_recvmsg,
	.send = m_send,
	.sendv = m_sendv,
	.sendmsg = m_sendmsg,
	.inject = m_inject,
	.senddata = m_senddata,
	.injectdata = m_injectdata,
};
static struct fi_ops_tagged ep_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = t_recv,
	.recvv = t_recvv,
	.recvmsg = t_recvmsg,
	.send = t_send,
	.sendv = t_sendv,
	.sendmsg = t_sendmsg,
	.inject = t_inject,
	.senddata = t_senddata,
	.injectdata = t_injectdata,
};

static int endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep_fid,
		    void *context)
{
	struct mc_ep *e;

	if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	e->core = mcfi_ep_open(((struct mc_domain *)domain)->core);
	if (!e->core) {
		free(e);
		return -FI_EINVAL;
	}
	e->tx_op_flags = info && info->tx_attr ? info->tx_attr->op_flags : 0;
	e->rx_op_flags = info && info->rx_attr ? info->rx_attr->op_flags : 0;
	e->ep.fid.fclass = FI_CLASS_EP;
	e->ep.fid.context = context;
	e->ep.fid.ops = &ep_fi_ops;
	e->ep.ops = &ep_ops;
	e->ep.cm = &ep_cm_ops;
	e->ep.msg = &ep_msg_ops;
	e->ep.tagged = &ep_tagged_ops;
	*ep_fid = &e->ep;
	return 0;
}

/* ---- domain ---- */

static int scalable_ep(struct fid_domain *domain, struct fi_info *info, struct fid_ep **sep,
		       void *context)
{
	(void)domain; (void)info; (void)sep; (void)context;
	return -FI_ENOSYS;
}
static int cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
		     void *context)
{
	(void)domain; (void)attr; (void)cntr; (void)context;
	return -FI_ENOSYS;
}
static int poll_open(struct fid_domain *domain, struct fi_poll_attr *attr, struct fid_poll **pollset)
{
	(void)domain; (void)attr; (void)pollset;
	return -FI_ENOSYS;
}
static int stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr, struct fid_stx **stx,
		   void *context)
{
	(void)domain; (void)attr; (void)stx; (void)context;
	return -FI_ENOSYS;
}
static int srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
		   void *context)
{
	(void)domain; (void)attr; (void)rx_ep; (void)context;
	return -FI_ENOSYS;
}
static int query_atomic(struct fid_domain *domain, enum fi_datatype datatype, enum fi_op op,
			struct fi_atomic_attr *attr, uint64_t flags)
{
	(void)domain; (void)datatype; (void)op; (void)attr; (void)flags;
	return -FI_ENOSYS;
}
static int query_collective(struct fid_domain *domain, enum fi_collective_op coll,
			    struct fi_collective_attr *attr, uint64_t flags)
{
	(void)domain; (void)coll; (void)attr; (void)flags;
	return -FI_ENOSYS;
}
static int endpoint2(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		     uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return endpoint(domain, info, ep, context);
}
static int mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		  uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
	(void)fid; (void)buf; (void)len; (void)access; (void)offset; (void)requested_key;
	(void)flags; (void)mr; (void)context;
	return -FI_ENOSYS;
}
static int mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		   uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		   void *context)
{
	(void)fid; (void)iov; (void)count; (void)access; (void)offset; (void)requested_key;
	(void)flags; (void)mr; (void)context;
	return -FI_ENOSYS;
}
static int mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	(void)fid; (void)attr; (void)flags; (void)mr;
	return -FI_ENOSYS;
}

static int domain_close(struct fid *fid)
{
	struct mc_domain *d = (struct mc_domain *)fid;
	mcfi_domain_close(d->core);
	free(d);
	return 0;
}

static struct fi_ops domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = domain_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = no_tostr,
	.ops_set = no_ops_set,
};
static struct fi_ops_domain domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = av_open,
	.cq_open = cq_open,
	.endpoint = endpoint,
	.scalable_ep = scalable_ep,
	.cntr_open = cntr_open,
	.poll_open = poll_open,
	.stx_ctx = stx_ctx,
	.srx_ctx = srx_ctx,
	.query_atomic = query_atomic,
	.query_collective = query_collective,
	.endpoint2 = endpoint2,
};
static struct fi_ops_mr domain_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = mr_reg,
	.regv = mr_regv,
	.regattr = mr_regattr,
};

static int domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
		       void *context)
{
	struct mc_domain *d;
	char why[512];

	(void)fabric;
	if (info && info->domain_attr && info->domain_attr->name &&
	    strcmp(info->domain_attr->name, MC_NAME))
		return -FI_EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	d->core = mcfi_domain_open(why, sizeof(why));
	if (!d->core) {
		free(d);
		return -FI_ENODEV;
	}
	d->d.fid.fclass = FI_CLASS_DOMAIN;
	d->d.fid.context = context;
	d->d.fid.ops = &domain_fi_ops;
	d->d.ops = &domain_ops;
	d->d.mr = &domain_mr_ops;
	*dom = &d->d;
	return 0;
}

/* ---- fabric ---- */

static int passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
		      void *context)
{
	(void)fabric; (void)info; (void)pep; (void)context;
	return -FI_ENOSYS;
}
static int eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
		   void *context)
{
	(void)fabric; (void)attr; (void)eq; (void)context;
	return -FI_ENOSYS;
}
static int wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr, struct fid_wait **waitset)
{
	(void)fabric; (void)attr; (void)waitset;
	return -FI_ENOSYS;
}
static int trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	(void)fabric; (void)fids; (void)count;
	return 0;
}
static int domain2(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
		   uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return domain_open(fabric, info, dom, context);
}

static int fabric_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static struct fi_ops fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = fabric_close,
	.bind = no_bind,
	.control = no_control,
	.ops_open = no_ops_open,
	.tostr = no_tostr,
	.ops_set = no_ops_set,
};
static struct fi_ops_fabric fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = domain_open,
	.passive_ep = passive_ep,
	.eq_open = eq_open,
	.wait_open = wait_open,
	.trywait = trywait,
	.domain2 = domain2,
};

static int fabric(struct fi_fabric_attr *attr, struct fid_fabric **fab, void *context)
{
	struct mc_fabric *f;

	if (attr && attr->name && strcmp(attr->name, MC_NAME))
		return -FI_EINVAL;
	if (attr && attr->api_version)
		mc_api_version = attr->api_version;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -FI_ENOMEM;
	f->f.fid.fclass = FI_CLASS_FABRIC;
	f->f.fid.context = context;
	f->f.fid.ops = &fabric_fi_ops;
	f->f.ops = &fabric_ops;
	f->f.api_version = mc_api_version;
	*fab = &f->f;
	return 0;
}

/* ---- fi_getinfo ---- */

static int hints_ok(const struct fi_info *h)
{
	if (h->caps & ~(uint64_t)MC_CAPS)
		return 0;
	if (h->addr_format != FI_FORMAT_UNSPEC)
		return 0;
	if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
		return 0;
	if (h->ep_attr && h->ep_attr->max_msg_size > MC_MAX_MSG)
		return 0;
	if (h->tx_attr && (h->tx_attr->msg_order & ~(uint64_t)MC_ORDER))
		return 0;
	if (h->rx_attr && (h->rx_attr->msg_order & ~(uint64_t)MC_ORDER))
		return 0;
	if (h->tx_attr && h->tx_attr->inject_size > MC_INJECT)
		return 0;
	if (h->domain_attr) {
		const struct fi_domain_attr *d = h->domain_attr;
		if (d->name && strcmp(d->name, MC_NAME))
			return 0;
		if (d->control_progress == FI_PROGRESS_AUTO || d->data_progress == FI_PROGRESS_AUTO)
			return 0;
		if (d->av_type != FI_AV_UNSPEC && d->av_type != FI_AV_MAP && d->av_type != FI_AV_TABLE)
			return 0;
		if (d->cq_data_size > 8)
			return 0;
	}
	if (h->fabric_attr && h->fabric_attr->name && strcmp(h->fabric_attr->name, MC_NAME))
		return 0;
	return 1;
}

static int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	struct fi_info *i;

	(void)node; (void)service; (void)flags;
	*info = NULL;
	if (hints && !hints_ok(hints))
		return -FI_ENODATA;
	i = fi_allocinfo();
	if (!i)
		return -FI_ENOMEM;
	i->caps = hints && hints->caps ? (hints->caps | MC_SECONDARY) : MC_CAPS;
	i->mode = 0;
	i->addr_format = FI_FORMAT_UNSPEC;

	i->tx_attr->caps = i->caps & ~(uint64_t)(FI_RECV | FI_DIRECTED_RECV | FI_SOURCE);
	i->tx_attr->op_flags = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
	i->tx_attr->msg_order = MC_ORDER;
	i->tx_attr->comp_order = FI_ORDER_NONE;
	i->tx_attr->inject_size = MC_INJECT;
	i->tx_attr->size = 4096;
	i->tx_attr->iov_limit = 1;
	i->tx_attr->rma_iov_limit = 0;

	i->rx_attr->caps = i->caps & ~(uint64_t)FI_SEND;
	i->rx_attr->op_flags = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
	i->rx_attr->msg_order = MC_ORDER;
	i->rx_attr->comp_order = FI_ORDER_NONE;
	i->rx_attr->total_buffered_recv = 0;
	i->rx_attr->size = 4096;
	i->rx_attr->iov_limit = 1;

	i->ep_attr->type = FI_EP_RDM;
	i->ep_attr->protocol = FI_PROTO_UNSPEC;
	i->ep_attr->protocol_version = 1;
	i->ep_attr->max_msg_size = MC_MAX_MSG;
	i->ep_attr->msg_prefix_size = 0;
	i->ep_attr->mem_tag_format = ~0ULL;
	i->ep_attr->tx_ctx_cnt = 1;
	i->ep_attr->rx_ctx_cnt = 1;

	i->domain_attr->name = strdup(MC_NAME);
	i->domain_attr->threading = FI_THREAD_SAFE;
	i->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	i->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	i->domain_attr->resource_mgmt = FI_RM_ENABLED;
	i->domain_attr->av_type = hints && hints->domain_attr &&
					  hints->domain_attr->av_type != FI_AV_UNSPEC
				  ? hints->domain_attr->av_type
				  : FI_AV_MAP;
	i->domain_attr->mr_mode = 0;
	i->domain_attr->cq_data_size = 8;
	i->domain_attr->cq_cnt = 64;
	i->domain_attr->ep_cnt = 64;
	i->domain_attr->tx_ctx_cnt = 64;
	i->domain_attr->rx_ctx_cnt = 64;
	i->domain_attr->max_ep_tx_ctx = 1;
	i->domain_attr->max_ep_rx_ctx = 1;
	i->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;

	i->fabric_attr->name = strdup(MC_NAME);
	i->fabric_attr->prov_version = MC_PROV_VERSION;
	i->fabric_attr->api_version = version;
	if (!i->domain_attr->name || !i->fabric_attr->name) {
		fi_freeinfo(i);
		return -FI_ENOMEM;
	}
	*info = i;
	return 0;
}

static void cleanup(void)
{
}

static struct fi_provider mc_prov = {
	.version = MC_PROV_VERSION,
	.fi_version = FI_VERSION(1, 17),
	.name = MC_NAME,
	.getinfo = getinfo,
	.fabric = fabric,
	.cleanup = cleanup,
};

/* Exported by the Rust side as fi_prov_ini (a cdylib exports Rust's
 * symbols only). */
struct fi_provider *mc_fi_prov_ini(void);
struct fi_provider *mc_fi_prov_ini(void)
{
	return &mc_prov;
}
