/*
 * What libimc's C test programs share: checks that count and stop the
 * program with the line that failed, and a barrier over a coherent region
 * written with plain stores. Every node runs the same program
 * (mc-host run --nodes N -- ./prog).
 */
#ifndef IMC_TEST_HARNESS_H
#define IMC_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/imc.h>

static int checks;
static int me, nodes;

#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      printf("FAIL node %d, %s:%d: %s: ", me, __FILE__, __LINE__, #cond);   \
      printf(__VA_ARGS__);                                                  \
      printf("\n");                                                         \
      fflush(stdout);                                                       \
      exit(1);                                                              \
    }                                                                       \
    checks++;                                                               \
  } while (0)

/* A call must return exactly `code`. */
#define EXPECT(call, code)                                                  \
  do {                                                                      \
    int rc_ = (call);                                                       \
    if (rc_ != (code))                                                      \
      imc_perror(#call, rc_);                                               \
    CHECK(rc_ == (code), "%s returned %d, wanted %s (%d)", #call, rc_,     \
          #code, (code));                                                   \
  } while (0)

static volatile long *barrier_in;
static long *barrier_out;
static long barrier_count;

/* Open the library and the barrier (key 0x7e570000). */
static inline void harness_init(void)
{
  imc_asid_t id;
  char *tx, *rx;
  EXPECT(imc_api_init(), IMC_SUCCESS);
  me = imc_node_id();
  nodes = imc_nodes();
  EXPECT(imc_asalloc(0x7e570000, 8 * IMC_MAXHOSTS, IMC_URW, IMC_COHERENT, &id), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &tx), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
  barrier_out = (long *)tx;
  barrier_in = (volatile long *)rx;
  barrier_count = barrier_in[me];
}

/* Wait until every node has arrived here as often as this one. */
static inline void barrier(void)
{
  int n, all;
  barrier_count++;
  barrier_out[me] = barrier_count; /* a plain store */
  mb();
  do {
    all = 1;
    for (n = 0; n < nodes; n++)
      if (barrier_in[n] < barrier_count)
        all = 0;
  } while (!all);
}

#endif
