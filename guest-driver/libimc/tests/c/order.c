/*
 * Plain stores arrive in program order at every receiver. Node 0 runs
 * WRITERS threads, all storing into the same page; thread t writes, for
 * k = 1..ROUNDS, its lane's data with several kinds of store (a 4-byte mov,
 * a byte, a 16-byte SSE store, an imc_write), then the lane's sequence word
 * k. A SIGALRM handler, every 500 us on writer 0, does the same on a lane
 * of its own: it interrupts stores between their fault and their trap.
 * Every node (node 0 through loopback) watches every lane: whenever it sees
 * sequence k, the data written before it must be there (k or a later
 * round's value).
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <stdint.h>
#include <string.h>
#include "harness.h"

#define WRITERS 3
#define ROUNDS 400
#define SLOTS 32
#define ALARM_LANE WRITERS
#define ALARM_DONE (1 << 30)

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

static void put(struct lane *w, int k)
{
  int s = k % SLOTS;
  int64_t b = k;
  w->word[s] = k;                                          /* emulated mov */
  w->byte[s] = (uint8_t)k;                                 /* emulated byte mov */
  _mm_storeu_si128((__m128i *)&w->wide[s][0], _mm_set1_epi32(k)); /* redirected, stepped */
  imc_write((void *)&w->block[s], &b, sizeof b);           /* explicit */
  w->seq = k;                                              /* last: the sequence word */
}

static volatile int alarms;

static void on_alarm(int sig)
{
  (void)sig;
  put(&out[ALARM_LANE], ++alarms);
}

static void *writer(void *arg)
{
  int t = (int)(intptr_t)arg, k;
  if (t == 0) {
    /* Only this thread takes the alarms: one lane, one writer. */
    struct itimerval every = {{0, 500}, {0, 500}}, stop = {{0, 0}, {0, 0}};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    signal(SIGALRM, on_alarm);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    setitimer(ITIMER_REAL, &every, NULL);
    for (k = 1; k <= ROUNDS; k++)
      put(&out[t], k);
    setitimer(ITIMER_REAL, &stop, NULL);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    put(&out[ALARM_LANE], ALARM_DONE);
    return NULL;
  }
  for (k = 1; k <= ROUNDS; k++)
    put(&out[t], k);
  return NULL;
}

int main(void)
{
  imc_asid_t id;
  char *tx, *rx;
  pthread_t th[WRITERS];
  long seen[WRITERS + 1] = {0}, observations = 0;
  int t, done;
  sigset_t set;

  /* Blocked before the library starts its threads, so that only writer 0
   * takes the alarms. */
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  harness_init();
  EXPECT(imc_asalloc(3001, sizeof(struct lane) * (WRITERS + 1), IMC_URW, 0, &id), IMC_SUCCESS);
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
    for (t = 0; t <= WRITERS; t++) {
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
      if (seen[t] < (t == ALARM_LANE ? ALARM_DONE : ROUNDS))
        done = 0;
    }
  } while (!done);
  if (me == 0)
    for (t = 0; t < WRITERS; t++)
      pthread_join(th[t], NULL);
  barrier();
  if (me == 0)
    printf("order: node 0 took %d alarms that stored while writer 0 stored\n", alarms);
  printf("order: node %d saw %d lanes in program order (%ld observations, %d checks)\n",
         me, WRITERS + 1, observations, checks);
  return 0;
}
