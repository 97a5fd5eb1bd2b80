/*
 * api.c: libpvm-mc's calls beyond the pvm-examples programs, against
 * Debian's pvm3.h: spawn on a named host, the task and host tables, groups
 * (bcast, scatter, reduce with PvmSum/PvmMax/PvmMin, gather, barrier),
 * psend/precv, nrecv/trecv/probe, in-place packing, buffers, options,
 * pvm_notify on exit and pvm_kill, PvmNotImpl. Prints "api: ok" when every
 * check holds, "FAIL ..." for each that does not.
 *
 *   cc -shared -fPIC -o api api.c && mc-host pvm -n 2 -- ./api
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <pvm3.h>

static int fails;
#define CHECK(c)                                                              \
    do {                                                                      \
        if (!(c)) {                                                           \
            printf("FAIL t%x line %d: %s\n", pvm_mytid(), __LINE__, #c);     \
            fails++;                                                          \
        }                                                                     \
    } while (0)

#define N 3 /* children in the group */

static void group_work(int inst)
{
    int v = -1, part[2] = {-1, -1}, all[2 * (N + 1)], i;
    /* bcast from instance 0 */
    if (inst == 0) {
        v = 42;
        pvm_initsend(PvmDataDefault);
        pvm_pkint(&v, 1, 1);
        CHECK(pvm_bcast("g", 10) == 0);
    } else {
        CHECK(pvm_recv(-1, 10) > 0);
        CHECK(pvm_upkint(&v, 1, 1) == 0 && v == 42);
    }
    /* scatter */
    for (i = 0; i < 2 * (N + 1); i++)
        all[i] = i;
    CHECK(pvm_scatter(part, all, 2, PVM_INT, 11, "g", 0) == 0);
    CHECK(part[0] == 2 * inst && part[1] == 2 * inst + 1);
    /* reduce */
    int s[2] = {inst, 1};
    CHECK(pvm_reduce(PvmSum, s, 2, PVM_INT, 12, "g", 0) == 0);
    if (inst == 0)
        CHECK(s[0] == N * (N + 1) / 2 && s[1] == N + 1);
    double d = 1.5 + inst;
    CHECK(pvm_reduce(PvmMax, &d, 1, PVM_DOUBLE, 13, "g", 0) == 0);
    if (inst == 0)
        CHECK(d == 1.5 + N);
    short m = (short)(10 - inst);
    CHECK(pvm_reduce(PvmMin, &m, 1, PVM_SHORT, 14, "g", 0) == 0);
    if (inst == 0)
        CHECK(m == 10 - N);
    /* gather */
    int mine = inst * 10, got[N + 1];
    memset(got, 0xff, sizeof got);
    CHECK(pvm_gather(got, &mine, 1, PVM_INT, 15, "g", 0) == 0);
    if (inst == 0)
        for (i = 0; i <= N; i++)
            CHECK(got[i] == 10 * i);
    CHECK(pvm_barrier("g", -1) == 0);
}

static int child(int parent, const char *role)
{
    if (strcmp(role, "sleeper") == 0) {
        for (;;)
            pvm_recv(-1, -1);
    }
    int inst = pvm_joingroup("g");
    CHECK(inst >= 1 && inst <= N);
    CHECK(pvm_freezegroup("g", N + 1) == 0);
    CHECK(pvm_gsize("g") == N + 1);
    CHECK(pvm_getinst("g", pvm_mytid()) == inst);
    group_work(inst);
    if (inst == 1) {
        int a[4], rt, rtag, rc;
        CHECK(pvm_precv(parent, 20, a, 4, PVM_INT, &rt, &rtag, &rc) == 0);
        CHECK(rt == parent && rtag == 20 && rc == 4 && a[0] == 7 && a[3] == 10);
        double back = a[0] + a[3];
        CHECK(pvm_psend(parent, 21, &back, 1, PVM_DOUBLE) == 0);
    }
    CHECK(pvm_recv(parent, 99) > 0);
    pvm_exit();
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int me = pvm_mytid(), parent = pvm_parent(), tids[N], t, i, n;
    if (parent > 0)
        return child(parent, argc > 1 ? argv[1] : "");
    CHECK(me == 0x40001);
    CHECK(parent == PvmNoParent);
    CHECK(pvm_tidtohost(me) == 0x40000);
    int nhost, narch;
    struct pvmhostinfo *hosts;
    CHECK(pvm_config(&nhost, &narch, &hosts) == 0 && nhost == 2 && narch == 1);
    CHECK(strcmp(hosts[1].hi_name, "node1") == 0 && hosts[1].hi_tid == 0x80000);

    /* the group: this task is instance 0 */
    CHECK(pvm_joingroup("g") == 0);
    CHECK(pvm_joingroup("g") == PvmDupGroup);
    char *args[] = {"child", NULL};
    CHECK(pvm_spawn(argv[0], args, 0, "", N, tids) == N);
    CHECK(pvm_spawn("no-such-program", NULL, 0, "", 1, &t) < 0 && t == PvmNoFile);
    CHECK(pvm_freezegroup("g", N + 1) == 0);
    CHECK(pvm_gettid("g", 0) == me);
    group_work(0);

    /* psend / precv with instance 1 */
    int one = pvm_gettid("g", 1), a[4] = {7, 8, 9, 10};
    CHECK(pvm_psend(one, 20, a, 4, PVM_INT) == 0);
    double back = 0;
    int rt, rtag, rc;
    CHECK(pvm_precv(one, 21, &back, 1, PVM_DOUBLE, &rt, &rtag, &rc) == 0 && back == 17.0);

    /* nothing waiting: nrecv, trecv and probe say so */
    struct timeval tv = {0, 100000};
    CHECK(pvm_nrecv(-1, 55) == 0);
    CHECK(pvm_trecv(-1, 55, &tv) == 0);
    CHECK(pvm_probe(-1, 55) == 0);

    /* in place: the data as it is when sent; to oneself */
    int ip[3] = {1, 2, 3}, back3[3];
    int old = pvm_setsbuf(pvm_mkbuf(PvmDataInPlace));
    CHECK(old > 0);
    pvm_pkint(ip, 3, 1);
    ip[1] = 20;
    CHECK(pvm_send(me, 30) == 0);
    CHECK(pvm_probe(me, 30) > 0);
    int bid = pvm_recv(me, 30), len, tag, src;
    CHECK(pvm_bufinfo(bid, &len, &tag, &src) == 0 && len == 12 && tag == 30 && src == me);
    CHECK(pvm_upkint(back3, 3, 1) == 0 && back3[1] == 20);
    CHECK(pvm_upkint(back3, 1, 1) == PvmNoData);
    CHECK(pvm_freebuf(pvm_getsbuf()) == 0 && pvm_getsbuf() == 0);
    CHECK(pvm_freebuf(old) == 0);

    /* strings and strides, through the raw encoding */
    double dv[6] = {0, 1, 2, 3, 4, 5}, du[6] = {0};
    char s[32];
    pvm_initsend(PvmDataRaw);
    pvm_pkstr("hello, pvm");
    pvm_pkdouble(dv, 3, 2);
    pvm_send(me, 31);
    pvm_recv(me, 31);
    CHECK(pvm_upkstr(s) == 0 && strcmp(s, "hello, pvm") == 0);
    CHECK(pvm_upkdouble(du, 3, 2) == 0 && du[0] == 0 && du[2] == 2 && du[4] == 4 && du[1] == 0);

    /* options, errors */
    CHECK(pvm_setopt(PvmRoute, PvmRouteDirect) >= 0 && pvm_getopt(PvmRoute) == PvmRouteDirect);
    int was = pvm_setopt(PvmAutoErr, 0);
    CHECK(was == 1);
    CHECK(pvm_send(me, -5) == PvmBadParam);
    CHECK(pvm_freebuf(12345) == PvmNoSuchBuf);
    CHECK(pvm_addhosts(NULL, 0, NULL) == PvmNotImpl);
    CHECK(pvm_addhosts(NULL, 0, NULL) == PvmNotImpl);

    /* the task table, notices on exit, and kill */
    struct pvmtaskinfo *ti;
    CHECK(pvm_tasks(0, &n, &ti) == 0 && n == N + 1);
    CHECK(pvm_notify(PvmTaskExit, 77, N, tids) == 0);
    pvm_initsend(PvmDataDefault);
    CHECK(pvm_mcast(tids, N, 99) == 0);
    for (i = 0; i < N; i++) {
        int gone = 0, j, known = 0;
        CHECK(pvm_recv(-1, 77) > 0);
        pvm_upkint(&gone, 1, 1);
        for (j = 0; j < N; j++)
            known |= gone == tids[j];
        CHECK(known);
    }
    char *sl[] = {"sleeper", NULL};
    CHECK(pvm_spawn(argv[0], sl, PvmTaskHost, "node1", 1, &t) == 1);
    CHECK(pvm_tidtohost(t) == 0x80000);
    CHECK(pvm_notify(PvmTaskExit, 78, 1, &t) == 0);
    CHECK(pvm_kill(t) == 0);
    CHECK(pvm_recv(-1, 78) > 0);
    int k;
    pvm_upkint(&k, 1, 1);
    CHECK(k == t);
    CHECK(pvm_kill(t) == PvmNoTask);

    printf(fails ? "api: %d checks failed\n" : "api: ok\n", fails);
    pvm_exit();
    return fails ? 1 : 0;
}
