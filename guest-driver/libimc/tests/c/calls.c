/*
 * Every call of seed 004 Table 1 (and libimc's own), used rightly and
 * wrongly, on 2 or more nodes: each misuse must return its IMC_* code.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "harness.h"

static volatile sig_atomic_t got_usr1;
static void on_usr1(int sig) { (void)sig; got_usr1 = 1; }

int main(void)
{
  imc_asid_t rid, rid2, priv;
  imc_lkid_t lk, lk2;
  int n, count, errors, i;
  char *tx, *rx, *tx2;
  imc_hostname_t names[IMC_MAXHOSTS];
  char name[16];

  harness_init();
  CHECK(nodes >= 2, "run on 2 or more nodes (%d)", nodes);

  /* imc_gethosts: every node, named node<N> in a virtual guest */
  EXPECT(imc_gethosts(&n, names), IMC_SUCCESS);
  CHECK(n == nodes, "%d hosts", n);
  for (i = 0; i < n; i++) {
    snprintf(name, sizeof name, "node%d", i);
    CHECK(strcmp(names[i], name) == 0, "host %d is %s", i, names[i]);
  }
  EXPECT(imc_gethosts(&n, NULL), IMC_SUCCESS);
  EXPECT(imc_gethosts(NULL, NULL), IMC_BADPARM);

  /* imc_asalloc */
  EXPECT(imc_asalloc(1001, 0, IMC_URW, 0, &rid), IMC_BADPARM);
  EXPECT(imc_asalloc(1001, 8192, IMC_URW, 0, NULL), IMC_BADPARM);
  EXPECT(imc_asalloc(1001, 8192, IMC_URW, 0x80, &rid), IMC_BADPARM);
  EXPECT(imc_asalloc(1001, 8192, 01000, 0, &rid), IMC_BADPARM);
  EXPECT(imc_asalloc(1001, 16384, IMC_URW, 0, &rid), IMC_SUCCESS);
  EXPECT(imc_asalloc(1001, 16384, IMC_URW, 0, &rid2), IMC_SUCCESS);
  CHECK(rid == rid2, "the same key gives the same id (%d, %d)", rid, rid2);
  EXPECT(imc_asalloc(1001, 100, IMC_URW, 0, &rid2), IMC_SIZEMISMATCH);
  EXPECT(imc_asalloc(1002, 1 << 30, IMC_URW, 0, &rid2), IMC_MCFULL);

  /* imc_asattach */
  EXPECT(imc_asattach(rid, 3, IMC_SHARED, 0, &tx), IMC_BADPARM);
  EXPECT(imc_asattach(rid, IMC_TRANSMIT, 7, 0, &tx), IMC_BADPARM);
  EXPECT(imc_asattach(rid, IMC_RECEIVE, IMC_SHARED, IMC_LOOPBACK, &rx), IMC_BADPARM);
  EXPECT(imc_asattach(rid, IMC_TRANSMIT, IMC_SHARED, 0, NULL), IMC_BADPARM);
  EXPECT(imc_asattach(99999, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_BADREGION);
  EXPECT(imc_asattach(rid, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &tx), IMC_SUCCESS);
  EXPECT(imc_asattach(rid, IMC_TRANSMIT, IMC_SHARED, 0, &tx2), IMC_ATTACHED);
  EXPECT(imc_asattach(rid, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
  barrier();
  /* loopback: this node's plain stores come back to its receive mapping */
  ((volatile long *)tx)[me] = 1000 + me;
  mb();
  while (((volatile long *)rx)[me] != 1000 + me)
    ;
  checks++;
  /* imc_write, and its misuse */
  {
    long v = 2000 + me;
    EXPECT(imc_write(tx + 8 * 64 + 8 * me, &v, sizeof v), IMC_SUCCESS);
    while (((volatile long *)rx)[64 + me] != v)
      ;
    EXPECT(imc_write(rx, &v, sizeof v), IMC_BADPARM);
    EXPECT(imc_write(tx + 16384 - 4, &v, sizeof v), IMC_BADPARM);
    EXPECT(imc_write(NULL, &v, sizeof v), IMC_BADPARM);
  }
  barrier();
  /* every node's write arrived at every node (ordinary region, broadcast) */
  for (i = 0; i < nodes; i++) {
    errors = imc_rderrcnt();
    EXPECT(imc_ckerrcnt(&errors), IMC_SUCCESS);
    CHECK(((volatile long *)rx)[i] == 1000 + i, "node %d's store: %ld", i, ((volatile long *)rx)[i]);
  }
  barrier();

  /* imc_asdetach / imc_asdealloc */
  EXPECT(imc_asdealloc(rid), IMC_ATTACHED);
  EXPECT(imc_asdetach(rid), IMC_SUCCESS);
  EXPECT(imc_asdetach(rid), IMC_NOTATTACHED);
  EXPECT(imc_asdealloc(rid), IMC_SUCCESS);
  EXPECT(imc_asdealloc(rid), IMC_BADREGION);

  /* exclusive attachment and permissions: node 0 creates, node 1 tries */
  if (me == 0) {
    EXPECT(imc_asalloc(1003, 8192, IMC_UR | IMC_GR | IMC_OR, 0, &priv), IMC_SUCCESS);
    EXPECT(imc_asattach(priv, IMC_RECEIVE, IMC_EXCLUSIVE, 0, &rx), IMC_SUCCESS);
  }
  barrier();
  if (me == 1) {
    EXPECT(imc_asalloc(1003, 8192, IMC_URW, 0, &priv), IMC_SUCCESS);
    EXPECT(imc_asattach(priv, IMC_TRANSMIT, IMC_SHARED, 0, &tx), IMC_NOPERM);
    EXPECT(imc_asattach(priv, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_BUSY);
  }
  barrier();
  if (me == 0)
    EXPECT(imc_asdetach(priv), IMC_SUCCESS);
  barrier();
  if (me == 1) {
    EXPECT(imc_asattach(priv, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
    EXPECT(imc_asdetach(priv), IMC_SUCCESS);
  }
  barrier();

  /* imc_lkalloc */
  count = 0;
  EXPECT(imc_lkalloc(2001, &count, IMC_LKU, 0, &lk), IMC_BADPARM);
  count = 2;
  EXPECT(imc_lkalloc(2001, NULL, IMC_LKU, 0, &lk), IMC_BADPARM);
  EXPECT(imc_lkalloc(2001, &count, IMC_LKU, 0x40, &lk), IMC_BADPARM);
  if (me == 0)
    EXPECT(imc_lkalloc(2001, &count, IMC_LKU, IMC_CREATOR, &lk), IMC_SUCCESS);
  barrier();
  if (me != 0) {
    EXPECT(imc_lkalloc(2001, &count, IMC_LKU, IMC_CREATOR, &lk), IMC_EXISTS);
    count = 5; /* the set has 2: joining it reports its real size */
    EXPECT(imc_lkalloc(2001, &count, IMC_LKU, 0, &lk), IMC_SUCCESS);
    CHECK(count == 2, "the set has %d locks", count);
    EXPECT(imc_lkacquire(lk, 0, 0, IMC_LOCKNOWAIT), IMC_LOCKBUSY);
  }
  barrier();
  /* imc_lkacquire / imc_lkrelease misuse */
  EXPECT(imc_lkacquire(lk, 0, 1, IMC_LOCKWAIT), IMC_BADPARM);
  EXPECT(imc_lkacquire(lk, 0, 0, 5), IMC_BADPARM);
  EXPECT(imc_lkacquire(lk, 2, 0, IMC_LOCKWAIT), IMC_BADLOCK);
  EXPECT(imc_lkacquire(lk, -1, 0, IMC_LOCKWAIT), IMC_BADLOCK);
  EXPECT(imc_lkacquire(4242, 0, 0, IMC_LOCKWAIT), IMC_BADLOCK);
  EXPECT(imc_lkrelease(lk, 1), IMC_NOTHELD);
  if (me == 0) {
    EXPECT(imc_lkacquire(lk, 0, 0, IMC_LOCKWAIT), IMC_HELD); /* IMC_CREATOR took it */
    EXPECT(imc_lkdealloc(lk), IMC_LOCKACTIVE);
    EXPECT(imc_lkrelease(lk, 0), IMC_SUCCESS);
  }
  barrier();
  EXPECT(imc_lkacquire(lk, 1, 0, IMC_LOCKWAIT), IMC_SUCCESS);
  EXPECT(imc_lkrelease(lk, 1), IMC_SUCCESS);
  EXPECT(imc_lkrelease(lk, 1), IMC_NOTHELD);
  barrier();
  EXPECT(imc_lkdealloc(lk), IMC_SUCCESS);
  EXPECT(imc_lkdealloc(lk), IMC_BADLOCK);
  (void)lk2;

  /* imc_rderrcnt / imc_ckerrcnt */
  errors = imc_rderrcnt();
  CHECK(errors == 0, "error count %d", errors);
  EXPECT(imc_ckerrcnt(&errors), IMC_SUCCESS);
  EXPECT(imc_ckerrcnt(NULL), IMC_BADPARM);
  errors = 12345;
  EXPECT(imc_ckerrcnt(&errors), IMC_ERRORS);
  CHECK(errors == imc_rderrcnt(), "imc_ckerrcnt updates the count (%d)", errors);

  /* imc_kill through the command relay */
  {
    imc_asid_t pid_region;
    volatile long *pids;
    long *pids_out;
    pid_t target;
    char node1[] = "node1";
    EXPECT(imc_asalloc(1004, 8192, IMC_URW, IMC_COHERENT, &pid_region), IMC_SUCCESS);
    EXPECT(imc_asattach(pid_region, IMC_TRANSMIT, IMC_SHARED, 0, (char **)&pids_out), IMC_SUCCESS);
    EXPECT(imc_asattach(pid_region, IMC_RECEIVE, IMC_SHARED, 0, (char **)&pids), IMC_SUCCESS);
    signal(SIGUSR1, on_usr1);
    pids_out[me] = getpid();
    barrier();
    target = (pid_t)pids[1];
    EXPECT(imc_kill("nosuchhost", target, SIGUSR1), IMC_BADHOST);
    EXPECT(imc_kill("node64", target, SIGUSR1), IMC_BADHOST);
    EXPECT(imc_kill(NULL, target, SIGUSR1), IMC_BADPARM);
    EXPECT(imc_kill(node1, 0, SIGUSR1), IMC_BADPARM);
    EXPECT(imc_kill(node1, -1, SIGUSR1), IMC_BADPARM);
    EXPECT(imc_kill(node1, target, 999), IMC_EINVAL);
    EXPECT(imc_kill(node1, 0x3ffffff0, SIGUSR1), IMC_ESRCH);
    barrier();
    if (me == 0) {
      EXPECT(imc_kill(node1, target, SIGUSR1), IMC_SUCCESS);
      /* As another user, node 1's process (ours, or root's) is not ours to signal. */
      if (geteuid() == 0) {
        CHECK(setresuid(65534, 65534, 0) == 0, "setresuid");
        EXPECT(imc_kill(node1, target, 0), IMC_EPERM);
        CHECK(setresuid(0, 0, 0) == 0, "setresuid back");
      } else {
        EXPECT(imc_kill(node1, 1, 0), IMC_EPERM);
      }
      EXPECT(imc_kill(node1, target, 0), IMC_SUCCESS);
    }
    if (me == 1) {
      while (!got_usr1)
        ;
      checks++;
      printf("calls: node 1 got SIGUSR1 from node 0 through the relay\n");
    }
    barrier();
    EXPECT(imc_asdetach(pid_region), IMC_SUCCESS);
    EXPECT(imc_asdealloc(pid_region), IMC_SUCCESS);
  }

  printf("calls: %d checks passed on node %d\n", checks, me);
  return 0;
}
