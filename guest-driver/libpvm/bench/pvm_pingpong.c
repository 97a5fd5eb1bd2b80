/*
 * pvm_pingpong: PVM one-way time (half a pvm_send/pvm_recv round trip) and
 * bandwidth, for seed 004's Table 4 (docs/pvm.md, "Costs"). Plain PVM 3:
 * builds against Debian's pvm3.h and links with -lpvm3 (Debian's PVM, over
 * its daemon) or, as a shared object, runs on libpvm-mc under mc-host pvm.
 *
 *   pvm_pingpong [ITERS] [HOST]   the first task spawns its echo partner
 *                                 (on HOST if given) and prints, per size,
 *                                 the median one-way time and the bandwidth
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pvm3.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const int sizes[] = {8, 65536, 1048576};

static void echo(int parent)
{
    char *buf = malloc(1048576);
    for (;;) {
        int bufid = pvm_recv(parent, -1), len, tag, src;
        pvm_bufinfo(bufid, &len, &tag, &src);
        if (tag == 99)
            break;
        pvm_upkbyte(buf, len, 1);
        pvm_initsend(PvmDataRaw);
        pvm_pkbyte(buf, len, 1);
        pvm_send(parent, tag);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 1000;
    int me = pvm_mytid(), parent = pvm_parent(), peer, s, i;
    if (parent > 0) {
        echo(parent);
        pvm_exit();
        return 0;
    }
    if (pvm_spawn(argv[0], NULL, argc > 2 ? PvmTaskHost : 0, argc > 2 ? argv[2] : "", 1, &peer) != 1) {
        fprintf(stderr, "pvm_pingpong: cannot spawn the echo task\n");
        pvm_exit();
        return 1;
    }
    printf("pvm_pingpong: t%x <-> t%x (host t%x and t%x)\n", me, peer, pvm_tidtohost(me),
           pvm_tidtohost(peer));
    char *buf = malloc(1048576);
    memset(buf, 7, 1048576);
    for (s = 0; s < 3; s++) {
        int len = sizes[s], n = len >= 1048576 ? iters / 20 + 5 : len >= 65536 ? iters / 4 + 5 : iters;
        double *t = malloc(n * sizeof *t), total = 0;
        for (i = -10; i < n; i++) {
            double t0 = now_us();
            pvm_initsend(PvmDataRaw);
            pvm_pkbyte(buf, len, 1);
            pvm_send(peer, 1);
            pvm_recv(peer, 1);
            pvm_upkbyte(buf, len, 1);
            double dt = (now_us() - t0) / 2;
            if (i >= 0) {
                t[i] = dt;
                total += dt;
            }
        }
        qsort(t, n, sizeof *t, cmp);
        printf("pvm_pingpong: %8d B: one-way median %9.2f us, bandwidth %8.1f MB/s (%d round trips)\n",
               len, t[n / 2], len / t[n / 2], n);
        free(t);
    }
    pvm_initsend(PvmDataRaw);
    pvm_send(peer, 99);
    pvm_exit();
    return 0;
}
