/*
 * <ump.h>: UMP, Universal Message Passing (seed 004, "Universal Message
 * Passing" and Table 3), for C programs on this emulator's Memory Channel
 * (guest-driver/libump; docs/ump.md).
 *
 * Duplex channels between endpoints named by 64-bit handles: over Memory
 * Channel between nodes, over shared memory between the tasks (threads)
 * of one node, behind the same calls. Messages of any size; a message is
 * written once into the reader's memory and read once out of it; a
 * damaged or lost message is reported (UMP_EDAMAGED), never returned.
 *
 * Link with -lump alone: the library contains libimc (<sys/imc.h>), and
 * both share the process's adapter. The first call opens it: over
 * vhost-user when MC_SOCKET names a socket (`mc-host run`), else the PCI
 * function (as root in a QEMU guest). MC_UMP_RING_KIB, MC_UMP_SHM_RING_KIB,
 * MC_UMP_REGION_KIB, MC_UMP_FRAGMENT_KIB, MC_UMP_CHECKSUM,
 * MC_UMP_RECEIVER_CHECK, MC_UMP_WRITER_CHECK, MC_UMP_TIMEOUT_S, MC_UMP_SPINS
 * and MC_UMP_OUTBUF configure it (docs/ump.md).
 *
 * Every call returns UMP_SUCCESS (0) or a UMP_E* code; ump_perror prints
 * it with the reason of this thread's last failure.
 */
#ifndef _UMP_H_
#define _UMP_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned long long ump_handle_t; /* an endpoint */
typedef int ump_channel_t;               /* a channel, as its task names it */
typedef struct ump_task ump_task_t;      /* a task (ump_init) */
typedef struct ump_request ump_request_t; /* a started ump_nbwrite */

/* transports of ump_open / ump_listen */
#define UMP_AUTO 0   /* shared memory if the peer is on this node, else Memory Channel */
#define UMP_SHM  1   /* shared memory only */
#define UMP_MC   2   /* Memory Channel only */

/* ump_wait: any channel of the task; wait as long as the configured timeout */
#define UMP_ANY     (-1)
#define UMP_FOREVER (-1L)

/* events */
#define UMP_EV_OPENED  1 /* the peer opened its end */
#define UMP_EV_MESSAGE 2 /* a message is there to read */
#define UMP_EV_CLOSED  3 /* the peer closed its end */

typedef struct {
    int type;              /* UMP_EV_* */
    ump_channel_t channel;
} ump_event_t;

/* return codes */
#define UMP_SUCCESS      0
#define UMP_EBADPARM     1  /* a NULL pointer, a bad transport, a bad configuration */
#define UMP_ENOINIT      2  /* the adapter or UMP could not be brought up */
#define UMP_ENOCHANNEL   3  /* no such channel in this task */
#define UMP_EEXISTS      4  /* the channel or registered endpoint exists already */
#define UMP_ECLOSED      5  /* the peer closed the channel */
#define UMP_ETOOSMALL    6  /* the buffer is smaller than the message (it stays) */
#define UMP_EDAMAGED     7  /* a message was damaged or lost on the network: the channel is failed */
#define UMP_ETIMEOUT     8  /* nothing in time */
#define UMP_ENOSPACE     9  /* no room for another ring or directory record */
#define UMP_EUNREACHABLE 10 /* the transport cannot reach the peer */
#define UMP_EMC          11 /* the Memory Channel failed under UMP */
#define UMP_EAGAIN       12 /* ump_nbread with min 0: no message yet; ump_test: not done */

typedef struct {
    int node, nodes, task, channels;
    size_t ring_bytes, shm_ring_bytes, fragment_bytes;
    unsigned long long region_bytes, region_used, error_count;
    int checksum, receiver_check, writer_check;
} ump_info_t;

int ump_init(ump_task_t **task);
int ump_exit(ump_task_t *task);
int ump_open(ump_task_t *task, ump_handle_t local, ump_handle_t remote, int transport,
             ump_channel_t *channel);
int ump_close(ump_task_t *task, ump_channel_t channel);
int ump_listen(ump_task_t *task, ump_handle_t local, int transport);
int ump_wait(ump_task_t *task, ump_channel_t channel, long timeout_us, ump_event_t *event);
int ump_read(ump_task_t *task, ump_channel_t channel, void *buf, size_t size, size_t *len);
int ump_write(ump_task_t *task, ump_channel_t channel, const void *buf, size_t len);
/* Copies at least min bytes of the next message (all of it if shorter);
 * *remaining says what is left of it (0: complete and checked). */
int ump_nbread(ump_task_t *task, ump_channel_t channel, void *buf, size_t size, size_t min,
               size_t *copied, size_t *remaining);
/* buf must stay valid and unchanged until ump_test says done or
 * ump_complete returns. */
int ump_nbwrite(ump_task_t *task, ump_channel_t channel, const void *buf, size_t len,
                ump_request_t **request);
int ump_test(ump_request_t *request);      /* UMP_SUCCESS when done, UMP_EAGAIN if not */
int ump_complete(ump_request_t *request);  /* waits, frees the request, returns its outcome */
/* One message to every channel of the list; to 2+ channels on other nodes,
 * 1 to 4 KiB, written once into the node's outbuf (docs/ump.md). */
int ump_mcast(ump_task_t *task, const ump_channel_t *channels, int count, const void *buf,
              size_t len);
int ump_info(ump_task_t *task, ump_info_t *info);
const char *ump_strerror(int code);
void ump_perror(const char *prefix, int code);

#ifdef __cplusplus
}
#endif

#endif /* _UMP_H_ */
