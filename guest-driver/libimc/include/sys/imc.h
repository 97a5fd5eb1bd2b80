/*
 * <sys/imc.h>: the TruCluster MEMORY CHANNEL API for C programs, as this
 * emulator's libimc implements it (guest-driver/libimc; docs/c-api.md).
 *
 * The calls are those of seed 004, Table 1 (Lawton et al., "Building a
 * High-performance Message-passing System for MEMORY CHANNEL Clusters"),
 * with the argument lists of its Figure 6. After
 *     imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, 0, &p)
 * the program writes with ordinary stores (p[i] = v;), and each store
 * becomes a Memory Channel write, in program order. Reads come from a
 * receive mapping (imc_asattach(id, IMC_RECEIVE, ...)). Transmit addresses
 * are write-only, as on the hardware: a load from one is a segmentation
 * violation.
 *
 * Every call returns IMC_SUCCESS (0) or one of the IMC_* codes below
 * (imc_rderrcnt returns the count; imc_perror prints a code's meaning).
 * The first call opens this node's adapter: over vhost-user when MC_SOCKET
 * names a socket (a virtual guest under `mc-host run`), else the adapter's
 * PCI function (as root in a QEMU guest).
 *
 * Hand-kept: libimc's tests check that every value here matches the
 * library (guest-driver/libimc/src/abi.rs).
 */
#ifndef _SYS_IMC_H_
#define _SYS_IMC_H_

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types -------------------------------------------------------------- */

typedef int imc_key_t;   /* cluster-wide key of a region or lock set */
typedef int imc_asid_t;  /* cluster-wide id of a region */
typedef int imc_lkid_t;  /* cluster-wide id of a lock set */
typedef int imc_perm_t;  /* IMC_U*, IMC_G*, IMC_O* (regions), IMC_LK* (locks) */
typedef int imc_dir_t;   /* IMC_TRANSMIT or IMC_RECEIVE */

#define IMC_MAXHOSTS 64     /* nodes in a cluster, at most */
#define IMC_HOSTNAMELEN 64  /* bytes of a host name, its NUL included */
typedef char imc_hostname_t[IMC_HOSTNAMELEN];

/* ---- return codes --------------------------------------------------------- */

#define IMC_SUCCESS      0   /* done */
#define IMC_EXISTS       1   /* imc_lkalloc with IMC_CREATOR: the set exists already */
#define IMC_BADPARM      2   /* an argument is out of range, a pointer NULL, a flag unknown */
#define IMC_NOTINIT      3   /* this node's adapter could not be opened (see imc_perror) */
#define IMC_BADREGION    4   /* no region with that id, or not allocated by this process */
#define IMC_BADLOCK      5   /* no lock set with that id in this process, or index out of range */
#define IMC_ATTACHED     6   /* attached already (imc_asattach), or still attached (imc_asdealloc) */
#define IMC_NOTATTACHED  7   /* imc_asdetach of a region this process has not attached */
#define IMC_SIZEMISMATCH 8   /* the key exists with another size */
#define IMC_MCFULL       9   /* no room left in Memory Channel space (or lock space) */
#define IMC_NOPERM       10  /* the creator's permissions forbid this attachment */
#define IMC_BUSY         11  /* another node holds the region exclusively, or is attached */
#define IMC_LOCKBUSY     12  /* IMC_LOCKNOWAIT and the lock is held elsewhere */
#define IMC_NOTHELD      13  /* imc_lkrelease of a lock this process does not hold */
#define IMC_HELD         14  /* imc_lkacquire of a lock this thread already holds */
#define IMC_LOCKACTIVE   15  /* imc_lkdealloc while this process holds a lock of the set */
#define IMC_BADHOST      16  /* imc_kill: no cluster member by that name */
#define IMC_EINVAL       17  /* imc_kill: not a signal number */
#define IMC_EPERM        18  /* imc_kill: the sender may not signal that process (kill(2) rules) */
#define IMC_ESRCH        19  /* imc_kill: no such process on that host */
#define IMC_TIMEOUT      20  /* the cluster did not answer in time (a node gone, a link down) */
#define IMC_OFFLINE      21  /* this node's adapter is offline (crashed) */
#define IMC_MCERROR      22  /* the adapter or its driver failed (see imc_perror) */
#define IMC_NOMEM        23  /* out of process memory for a mapping */
#define IMC_ERRORS       24  /* imc_ckerrcnt: errors since the count given (it is updated) */

/* ---- imc_asalloc: permissions and flags ----------------------------------- */

/* Permissions, as UNIX modes without execute. The cluster's nodes share no
 * user database, so libimc applies them per node: the creator's node may
 * always attach; other nodes may attach for receive if any read bit is
 * set, for transmit if any write bit is set. */
#define IMC_UR   0400
#define IMC_UW   0200
#define IMC_URW  0600
#define IMC_GR   0040
#define IMC_GW   0020
#define IMC_GRW  0060
#define IMC_OR   0004
#define IMC_OW   0002
#define IMC_ORW  0006

/* flag: a coherent region is received by every node from its allocation
 * on, so a process that attaches late sees every earlier write ("Initial
 * Coherency", seed 004). */
#define IMC_COHERENT 0x1

/* ---- imc_asattach ---------------------------------------------------------- */

#define IMC_TRANSMIT 1
#define IMC_RECEIVE  2

/* mode */
#define IMC_SHARED    0
#define IMC_EXCLUSIVE 1  /* no other node may attach in the same direction */
#define IMC_NONSHARED IMC_EXCLUSIVE

/* flag (transmit only): this node's writes also reach its own receive
 * mapping. Coherent regions always loop back. */
#define IMC_LOOPBACK 0x1

/* ---- imc_lkalloc / imc_lkacquire ------------------------------------------ */

#define IMC_LKU 0600
#define IMC_LKG 0060
#define IMC_LKO 0006

/* flag of imc_lkalloc: create the set only if it does not exist (else
 * IMC_EXISTS) and return holding lock 0. */
#define IMC_CREATOR 0x1

/* last argument of imc_lkacquire */
#define IMC_LOCKWAIT   0  /* spin until the lock is free */
#define IMC_LOCKNOWAIT 1  /* return IMC_LOCKBUSY if it is held */

#define IMC_MAXNUMLOCKS 1024

/* ---- TruCluster V5 spellings ------------------------------------------------ */
/*
 * Code written for Tru64 V5 (a rail argument on imc_asalloc and the error
 * counts, an argument to imc_api_init) defines IMC_TRUCLUSTER_V5 before
 * including this header. The two names that clash with seed 004's
 * spellings are then mapped to distinct symbols (imc_api_init_v5,
 * imc_asalloc_v5), so both ABIs live in one library and neither is called
 * through the other's prototype. Rail 0 is this adapter; another rail is
 * IMC_BADPARM. imc_asattach, imc_lkalloc, imc_lkacquire and imc_lkrelease
 * are the same in both.
 */
#ifdef IMC_TRUCLUSTER_V5
typedef size_t imc_size_t;
#define imc_api_init imc_api_init_v5
#define imc_asalloc imc_asalloc_v5
/* Open the adapter; *rails (if not NULL) gets the set of rails: 1, rail 0. */
int imc_api_init(unsigned long *rails);
int imc_asalloc(imc_key_t key, imc_size_t size, imc_perm_t perm, int flag, imc_asid_t *id,
                int rail);
int imc_rderrcnt_mr(int rail);
int imc_ckerrcnt_mr(int *count, int rail);
#endif

/* ---- the calls (seed 004, Table 1) ----------------------------------------- */

#ifndef IMC_TRUCLUSTER_V5
int imc_asalloc(imc_key_t key, size_t size, imc_perm_t perm, int flag, imc_asid_t *id);
#endif
int imc_asattach(imc_asid_t id, imc_dir_t dir, int mode, int flag, char **address);
int imc_asdetach(imc_asid_t id);
int imc_asdealloc(imc_asid_t id);

int imc_lkalloc(imc_key_t key, int *nlocks, imc_perm_t perm, int flag, imc_lkid_t *lock_id);
int imc_lkacquire(imc_lkid_t lock_id, int index, int flag, int wait);
int imc_lkrelease(imc_lkid_t lock_id, int index);
int imc_lkdealloc(imc_lkid_t lock_id);

/* The cluster error count: one load, not guaranteed current for errors on
 * other nodes. A negative value is -(an IMC_* code): the adapter could not
 * be opened. */
int imc_rderrcnt(void);
/* Check every adapter through this node's ACK page: when it returns, every
 * store this process made before it has reached every node. IMC_SUCCESS if
 * the count still equals *errors; else IMC_ERRORS with *errors updated (or
 * the code of a check that failed). */
int imc_ckerrcnt(int *errors);

/* Send signal sig to process pid on the cluster member named host (a name
 * from imc_gethosts, or "node<N>"), through the command relay. */
int imc_kill(const char *host, pid_t pid, int sig);
/* The members now in the cluster: their number in *nhosts and, if names is
 * not NULL, their host names in node order (names must hold IMC_MAXHOSTS). */
int imc_gethosts(int *nhosts, imc_hostname_t *names);

/* ---- beyond Table 1 -------------------------------------------------------- */

#ifndef IMC_TRUCLUSTER_V5
/* Open the adapter now (every other call does it on first use). */
int imc_api_init(void);
#endif
/* Copy len bytes from src to the transmit address dst as one posted write:
 * what plain stores do, without a trap per store (docs/c-api.md, "Costs"). */
int imc_write(void *dst, const void *src, size_t len);
/* Print "s: <what code means>[: <detail of this thread's last failure>]". */
void imc_perror(const char *s, int code);
/* This node's number and the cluster's size. */
int imc_node_id(void);
int imc_nodes(void);
/* The memory barrier the API defines (mb): a CPU fence. Stores already
 * reach the network in program order (the adapter's FIFO); mb() orders
 * the program's own loads and stores around it. */
void imc_mb(void);

#ifndef mb
#define mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

#ifdef __cplusplus
}
#endif

#endif /* _SYS_IMC_H_ */
