/*
 * Cluster spinlocks under contention: THREADS threads on every node add 1
 * to a shared counter ITERS times each, under lock 0 of one set, reading
 * it from the receive mapping and writing it with a plain store; the
 * total must come out right on every node.
 */
#include <pthread.h>
#include "harness.h"

#define THREADS 2
#define ITERS 150

static imc_lkid_t lk;
static volatile long *counter_in;
static long *counter_out;

static void *adder(void *arg)
{
  int i;
  (void)arg;
  for (i = 0; i < ITERS; i++) {
    long v;
    EXPECT(imc_lkacquire(lk, 0, 0, IMC_LOCKWAIT), IMC_SUCCESS);
    v = *counter_in + 1;
    *counter_out = v;                  /* a plain store */
    mb();
    while (*counter_in != v)           /* loopback: it reached the network */
      ;
    EXPECT(imc_lkrelease(lk, 0), IMC_SUCCESS);
  }
  return NULL;
}

int main(void)
{
  imc_asid_t id;
  char *tx, *rx;
  int locks = 1, t;
  pthread_t th[THREADS];
  long want;

  harness_init();
  EXPECT(imc_asalloc(4001, 8192, IMC_URW, IMC_COHERENT, &id), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &tx), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
  counter_out = (long *)tx;
  counter_in = (volatile long *)rx;
  if (imc_lkalloc(4002, &locks, IMC_LKU, IMC_CREATOR, &lk) == IMC_SUCCESS) {
    *counter_out = 0;
    mb();
    while (*counter_in != 0)
      ;
    EXPECT(imc_lkrelease(lk, 0), IMC_SUCCESS);
  } else {
    EXPECT(imc_lkalloc(4002, &locks, IMC_LKU, 0, &lk), IMC_SUCCESS);
  }
  barrier();
  for (t = 0; t < THREADS; t++)
    pthread_create(&th[t], NULL, adder, NULL);
  for (t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  barrier();
  want = (long)ITERS * THREADS * nodes;
  CHECK(*counter_in == want, "counter %ld, want %ld", *counter_in, want);
  printf("locks: node %d counted %ld = %d x %d threads x %d nodes\n", me, *counter_in, ITERS, THREADS, nodes);
  barrier();
  EXPECT(imc_lkdealloc(lk), IMC_SUCCESS);
  return 0;
}
