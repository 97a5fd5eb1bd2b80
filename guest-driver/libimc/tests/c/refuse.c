/*
 * What libimc refuses, and how: a load from a transmit address stops the
 * program with SIGSEGV and a message (transmit space is write-only, as on
 * the hardware); with "notinit", a program started outside any cluster
 * gets IMC_NOTINIT and imc_perror says why.
 */
#include <string.h>
#include "harness.h"

int main(int argc, char **argv)
{
  imc_asid_t id;
  char *tx;
  volatile long v;

  if (argc > 1 && strcmp(argv[1], "notinit") == 0) {
    int rc = imc_api_init();
    imc_perror("refuse", rc);
    printf("refuse: imc_api_init returned %d\n", rc);
    return rc == IMC_NOTINIT && imc_rderrcnt() == -IMC_NOTINIT ? 0 : 1;
  }
  harness_init();
  EXPECT(imc_asalloc(7001, 8192, IMC_URW, 0, &id), IMC_SUCCESS);
  EXPECT(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, 0, &tx), IMC_SUCCESS);
  ((long *)tx)[1] = 1;
  printf("refuse: stored, now loading from the transmit address\n");
  fflush(stdout);
  v = ((volatile long *)tx)[1];
  printf("refuse: loaded %ld from a transmit address, which must not happen\n", (long)v);
  return 0;
}
