/*
 * Plain stores arrive in program order at every receiver. Node 0 runs
 * WRITERS threads; thread t writes, for k = 1..ROUNDS, its lane's data
 * with several kinds of store (a 4-byte mov, a byte, a 16-byte SSE store,
 * an imc_write), then the lane's sequence word k. Every node (node 0
 * through loopback) watches every lane: whenever it sees sequence k, the
 * data written before it must be there (k or a later round's value).
 */
#include <emmintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "harness.h"

#define WRITERS 3
#define ROUNDS 1000
#define SLOTS 32

struct lane {
  volatile int32_t word[SLOTS];
  volatile uint8_t byte[SLOTS];
  volatile int32_t wide[SLOTS][4];
  volatile int64_t block[SLOTS];
  volatile int64_t seq;
  char pad[64];
};

static struct lane *out;
static volatile struct lane *in;

static void *writer(void *arg)
{
  int t = (int)(intptr_t)arg, k;
  struct lane *w = &out[t];
  for (k = 1; k <= ROUNDS; k++) {
    int s = k % SLOTS;
    int64_t b = k;
    w->word[s] = k;                                        /* emulated mov */
    w->byte[s] = (uint8_t)k;                               /* emulated byte mov */
    _mm_storeu_si128((__m128i *)&w->wide[s][0], _mm_set1_epi32(k)); /* redirected, stepped */
    imc_write((void *)&w->block[s], &b, sizeof b);         /* explicit */
    w->seq = k;                                            /* last: the sequence word */
  }
  return NULL;
}

int main(void)
{
  imc_asid_t id;
  char *tx, *rx;
  pthread_t th[WRITERS];
  long seen[WRITERS] = {0}, observations = 0;
  int t, done;

  harness_init();
  EXPECT(imc_asalloc(3001, sizeof(struct lane) * WRITERS, IMC_URW, 0, &id), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
  if (me == 0)
    EXPECT(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &tx), IMC_SUCCESS);
  in = (volatile struct lane *)rx;
  barrier();
  if (me == 0) {
    out = (struct lane *)tx;
    for (t = 0; t < WRITERS; t++)
      pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t);
  }
  do {
    done = 1;
    for (t = 0; t < WRITERS; t++) {
      volatile struct lane *l = &in[t];
      int64_t k = l->seq;
      int s;
      if (k < seen[t])
        CHECK(0, "lane %d: sequence went back from %ld to %ld", t, seen[t], (long)k);
      if (k > seen[t]) {
        s = (int)(k % SLOTS);
        observations++;
        CHECK(l->word[s] >= k, "lane %d: sequence %ld seen before its word (%d)", t, (long)k, l->word[s]);
        CHECK(l->byte[s] == (uint8_t)l->word[s] || l->word[s] > k,
              "lane %d: sequence %ld seen before its byte", t, (long)k);
        CHECK(l->wide[s][0] >= k && l->wide[s][3] >= k,
              "lane %d: sequence %ld seen before its 16-byte store (%d %d)", t, (long)k, l->wide[s][0], l->wide[s][3]);
        CHECK(l->block[s] >= k, "lane %d: sequence %ld seen before its imc_write (%ld)", t, (long)k, (long)l->block[s]);
        seen[t] = k;
      }
      if (seen[t] < ROUNDS)
        done = 0;
    }
  } while (!done);
  if (me == 0)
    for (t = 0; t < WRITERS; t++)
      pthread_join(th[t], NULL);
  barrier();
  printf("order: node %d saw %d lanes in program order (%ld observations, %d checks)\n",
         me, WRITERS, observations, checks);
  return 0;
}
