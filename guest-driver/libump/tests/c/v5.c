/*
 * The TruCluster V5 spellings (IMC_TRUCLUSTER_V5): code written for Tru64
 * V5 compiles and links unchanged, on rail 0; another rail is a clear
 * error. Seed 004's spellings of the same calls are in calls.c of libimc.
 */
#define IMC_TRUCLUSTER_V5
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/imc.h>

#define CHECK(cond, what)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            printf("v5: FAIL %s (line %d)\n", what, __LINE__);                   \
            return 1;                                                            \
        }                                                                        \
    } while (0)

int main(void)
{
    unsigned long rails = 0;
    CHECK(imc_api_init(&rails) == IMC_SUCCESS, "imc_api_init(&rails)");
    CHECK(rails == 1, "rail 0 is the only rail");
    CHECK(imc_api_init(NULL) == IMC_SUCCESS, "imc_api_init(NULL)");
    int me = imc_node_id();

    imc_asid_t id;
    imc_size_t size = 8192;
    CHECK(imc_asalloc(0x5a5a, size, IMC_URW, 0, &id, 0) == IMC_SUCCESS, "imc_asalloc on rail 0");
    CHECK(imc_asalloc(0x5a5b, size, IMC_URW, 0, &id, 1) == IMC_BADPARM, "imc_asalloc on rail 1");
    caddr_t rx = 0, tx = 0;
    CHECK(imc_asattach(id, IMC_RECEIVE, IMC_SHARED, 0, &rx) == IMC_SUCCESS, "imc_asattach receive");
    CHECK(imc_asattach(id, IMC_TRANSMIT, IMC_SHARED, IMC_LOOPBACK, &tx) == IMC_SUCCESS,
          "imc_asattach transmit");

    int errors = imc_rderrcnt_mr(0);
    CHECK(errors >= 0, "imc_rderrcnt_mr(0)");
    CHECK(imc_rderrcnt_mr(2) == -IMC_BADPARM, "imc_rderrcnt_mr(2)");
    int count = errors;
    CHECK(imc_ckerrcnt_mr(&count, 0) == IMC_SUCCESS, "imc_ckerrcnt_mr(&count, 0)");
    CHECK(imc_ckerrcnt_mr(&count, 3) == IMC_BADPARM, "imc_ckerrcnt_mr(&count, 3)");

    imc_lkid_t lk;
    int n = 1;
    int st = imc_lkalloc(0x5a5c, &n, IMC_LKU, 0, &lk);
    CHECK(st == IMC_SUCCESS || st == IMC_EXISTS, "imc_lkalloc");
    CHECK(imc_lkacquire(lk, 0, 0, IMC_LOCKWAIT) == IMC_SUCCESS, "imc_lkacquire");
    /* A store written with loopback comes back to this node's copy. */
    volatile int *w = (volatile int *)tx;
    volatile int *r = (volatile int *)rx;
    w[me] = 100 + me;
    mb();
    do {
        CHECK(imc_ckerrcnt_mr(&count, 0) == IMC_SUCCESS, "no errors");
    } while (r[me] != 100 + me);
    CHECK(imc_lkrelease(lk, 0) == IMC_SUCCESS, "imc_lkrelease");
    printf("v5: node %d: V5 calls passed on rail 0, other rails refused\n", me);
    return 0;
}
