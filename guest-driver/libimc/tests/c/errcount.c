/*
 * imc_ckerrcnt under corruption (seed 004, "Error Management"): node 0
 * sends messages with the seed's sequence (save the count, write, check),
 * while the test corrupts packets from node 0 to node 1
 * (`mc-host fault ... corrupt 5% link 0 1`, after "ready"). Checks that
 * the corruption is detected, then that the seed's retry loop gets a
 * message through whole: when imc_ckerrcnt comes back clean, every packet
 * written before it reached node 1 unharmed. Node 0 then says so (a flag,
 * sent with the same loop), and node 1 checks the message.
 */
#include <string.h>
#include <time.h>
#include "harness.h"

#define WORDS 32

struct message {
  volatile long word[WORDS];
  volatile long errors;       /* the count saved before writing, at the end */
  volatile long seq;          /* last */
  volatile long done;         /* node 0: the final message went through clean */
};

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void put(struct message *m, long seq, int errors)
{
  int i;
  for (i = 0; i < WORDS; i++)
    m->word[i] = seq * 1000 + i;
  m->errors = errors;
  m->seq = seq;
}

int main(void)
{
  imc_asid_t id;
  char *tx, *rx;
  struct message *out;
  volatile struct message *in;
  int errors, rc, detected = 0, clean = 0, i;
  long seq = 0;
  double start;

  harness_init();
  EXPECT(imc_asalloc(6001, sizeof(struct message), IMC_URW, 0, &id), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
  if (me == 0)
    EXPECT(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &tx), IMC_SUCCESS);
  in = (volatile struct message *)rx;
  barrier();
  if (me == 0) {
    out = (struct message *)tx;
    printf("errcount: ready\n");
    fflush(stdout);
    /* 1. Errors are detected: save, write, check. */
    start = now();
    while (detected < 3) {
      CHECK(now() - start < 60, "no error detected in 60 s (%d clean checks): is the fault injected?", clean);
      errors = imc_rderrcnt();
      put(out, ++seq, errors);
      mb();
      rc = imc_ckerrcnt(&errors);
      if (rc == IMC_ERRORS)
        detected++;
      else
        CHECK(rc == IMC_SUCCESS, "imc_ckerrcnt returned %d", rc);
      if (rc == IMC_SUCCESS)
        clean++;
    }
    printf("errcount: node 0 detected %d corrupted messages in %ld (%d checks clean)\n", detected, seq, clean);
    /* 2. The seed's loop gets the final message through whole. */
    seq = 1000000;
    errors = imc_rderrcnt();
    do {
      put(out, seq, errors);
      mb();
    } while (imc_ckerrcnt(&errors) || in->seq != seq);
    printf("errcount: node 0 sent message %ld clean\n", seq);
    do {
      out->done = 1;
      mb();
    } while (imc_ckerrcnt(&errors) || in->done != 1);
  } else {
    while (in->done != 1)
      ;
    for (i = 0; i < WORDS; i++)
      CHECK(in->word[i] == 1000000L * 1000 + i, "word %d of the final message is %ld", i, in->word[i]);
    printf("errcount: node 1 got the final message whole (saved count %ld, count now %d)\n",
           in->errors, imc_rderrcnt());
  }
  barrier();
  printf("errcount: %d checks passed on node %d\n", checks, me);
  return 0;
}
