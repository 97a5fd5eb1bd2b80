/*
 * Seed 004, Figure 6 (Lawton et al., "Building a High-performance
 * Message-passing System for MEMORY CHANNEL Clusters"): a global process
 * counter in coherent Memory Channel space, protected by a cluster
 * spinlock, written with plain stores and checked with imc_ckerrcnt.
 * Run a copy on every node:
 *
 *     mc-host run --nodes 4 -- ./figure6
 *
 * Kept as close to the figure as it allows. Where it differs, and why:
 * - The figure's first three lines define mb() with DEC C's asm intrinsic
 *   for the Alpha; <sys/imc.h> defines mb() (a CPU fence, the meaning the
 *   API gives it) and these lines are left out.
 * - The figure assigns region_read from write_ptr and region_write from
 *   read_ptr; read through the transmit mapping, the loops below would
 *   wait on this node's own writes (and transmit space is write-only: the
 *   load faults, as it did on the hardware). Swapped back.
 * - As printed, the increment sits in the else branch and the clean-up
 *   lost its acquire and decrement; the text says "each copy in turn
 *   acquires the lock itself, increments the process counter, and releases
 *   the lock" and later decrements it, which is what is written here.
 * - "(Body of program goes here)": the body waits until every copy has
 *   counted itself (two arrival counts in the pattern words, so no copy
 *   decrements before all have looked) and prints what it saw.
 */
#include <sys/types.h>
#include <sys/imc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
  int status, i, locks = 4, temp, errors;
  imc_asid_t region_id;                       /* MC region ID */
  imc_lkid_t lock_id;                         /* MC spinlock set ID */
  typedef struct {                            /* Shared data structure */
    volatile int processes;
    volatile int pattern[2047];
  } shared_region;
  shared_region *region_read, *region_write;
  caddr_t read_ptr = 0, write_ptr = 0;
  int copies, round;

  /* Allocate a region of coherent MC address space and attach to */
  /* process VA */
  imc_asalloc(123, 8192, IMC_URW, IMC_COHERENT, &region_id);
  imc_asattach(region_id, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &write_ptr);
  imc_asattach(region_id, IMC_RECEIVE, IMC_SHARED, 0, &read_ptr);
  region_read = (shared_region *)read_ptr;
  region_write = (shared_region *)write_ptr;

  /* Allocate a set of spinlocks and atomically acquire the first lock */
  status = imc_lkalloc(456, &locks, IMC_LKU, IMC_CREATOR, &lock_id);
  errors = imc_rderrcnt();
  if (status == IMC_SUCCESS) {
    do {
      region_write->processes = 0;            /* Initialize the global region */
      for (i = 0; i < 2047; i++)
        region_write->pattern[i] = i;
      i--;
      mb();
    } while (imc_ckerrcnt(&errors) || region_read->pattern[i] != i);
    printf("figure6: node %d created the lock set and initialised the region\n", imc_node_id());
    imc_lkrelease(lock_id, 0);
  } else if (status == IMC_EXISTS) {
    imc_lkalloc(456, &locks, IMC_LKU, 0, &lock_id);
  } else {
    imc_perror("figure6: imc_lkalloc", status);
    return 1;
  }
  imc_lkacquire(lock_id, 0, 0, IMC_LOCKWAIT);
  temp = region_read->processes + 1;          /* Increment the process counter */
  errors = imc_rderrcnt();
  do {
    region_write->processes = temp;
    mb();
  } while (imc_ckerrcnt(&errors) || region_read->processes != temp);
  imc_lkrelease(lock_id, 0);
  printf("figure6: node %d incremented the process counter to %d\n", imc_node_id(), temp);

  /* (Body of program goes here) */
  imc_gethosts(&copies, NULL);
  for (round = 0; round < 2; round++) {
    /* pattern[round] counted the arrivals of this round (it started at round) */
    imc_lkacquire(lock_id, 0, 0, IMC_LOCKWAIT);
    temp = region_read->pattern[round] + 1;
    errors = imc_rderrcnt();
    do {
      region_write->pattern[round] = temp;
      mb();
    } while (imc_ckerrcnt(&errors) || region_read->pattern[round] != temp);
    imc_lkrelease(lock_id, 0);
    while (region_read->pattern[round] != round + copies)
      ;
    if (round == 0)
      printf("figure6: node %d sees %d processes counted, %d copies running\n",
             imc_node_id(), region_read->processes, copies);
  }

  /* clean up */
  imc_lkacquire(lock_id, 0, 0, IMC_LOCKWAIT);
  temp = region_read->processes - 1;          /* Decrement the process counter */
  errors = imc_rderrcnt();
  do {
    region_write->processes = temp;
    mb();
  } while (imc_ckerrcnt(&errors) || region_read->processes != temp);
  imc_lkrelease(lock_id, 0);
  printf("figure6: node %d decremented the process counter to %d\n", imc_node_id(), temp);
  imc_lkdealloc(lock_id);                     /* Deallocate spinlock set */
  imc_asdetach(region_id);                    /* Detach shared region */
  imc_asdealloc(region_id);                   /* Deallocate MC address space */
  return 0;
}
