/*
 * Coherent allocation with late attach (seed 004, "Initial Coherency"):
 * node 0 allocates a coherent region and fills it with plain stores before
 * any other node has even allocated it; the others then allocate and
 * attach it for receive and must see every byte.
 */
#include "harness.h"

#define WORDS (3 * 8192 / 8)

int main(void)
{
  imc_asid_t id;
  char *tx, *rx;
  long i;
  int errors;

  harness_init();
  if (me == 0) {
    EXPECT(imc_asalloc(5001, WORDS * 8, IMC_URW, IMC_COHERENT, &id), IMC_SUCCESS);
    EXPECT(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, 0, &tx), IMC_SUCCESS);
    errors = imc_rderrcnt();
    do {
      for (i = 0; i < WORDS; i++)
        ((long *)tx)[i] = i * 7 + 1;
      mb();
    } while (imc_ckerrcnt(&errors));   /* arrived everywhere, no error */
  }
  barrier();
  if (me != 0) {
    EXPECT(imc_asalloc(5001, WORDS * 8, IMC_URW, IMC_COHERENT, &id), IMC_SUCCESS);
    EXPECT(imc_asattach(id, IMC_RECEIVE, IMC_SHARED, 0, &rx), IMC_SUCCESS);
    for (i = 0; i < WORDS; i++)
      CHECK(((volatile long *)rx)[i] == i * 7 + 1, "word %ld is %ld", i, ((volatile long *)rx)[i]);
    printf("coherent: node %d attached late and sees all %d words node 0 wrote before\n", me, WORDS);
  }
  barrier();
  if (me == 0)
    EXPECT(imc_asdetach(id), IMC_SUCCESS);
  else
    EXPECT(imc_asdetach(id), IMC_SUCCESS);
  EXPECT(imc_asdealloc(id), IMC_SUCCESS);
  printf("coherent: %d checks passed on node %d\n", checks, me);
  return 0;
}
