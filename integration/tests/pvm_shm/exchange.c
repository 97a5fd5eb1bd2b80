/*
 * pvm_shm exchange: two PVM tasks (the first spawns the second on the host
 * argv[1] names) exchange messages of 1 B to 1 MiB, one at a time and then
 * in a burst larger than a shared-memory ring, each byte checked on both
 * sides. With argv[2] "wait", the first task says "waiting" and reads a
 * line from stdin before it ends, so the test can look at the cluster's
 * counters while both tasks are still enrolled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pvm3.h>

static const int sizes[] = {8, 1, 100, 465, 4096, 65536, 262151, 1048576};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define ROUNDS 3

static unsigned char byte_at(int size, int round, int who, long i)
{
    unsigned long x = (unsigned long)size * 2654435761ul + (unsigned long)round * 40503ul
                      + (unsigned long)who * 7919ul + (unsigned long)i;
    x ^= x >> 7;
    x *= 0x9e3779b97f4a7c15ul;
    return (unsigned char)(x >> 56);
}

static unsigned char *buf;

static void send_one(int to, int size, int round, int who)
{
    long i;
    for (i = 0; i < size; i++)
        buf[i] = byte_at(size, round, who, i);
    pvm_initsend(PvmDataRaw);
    pvm_pkbyte((char *)buf, size, 1);
    if (pvm_send(to, size) < 0) {
        printf("send of %d bytes failed\n", size);
        exit(1);
    }
}

static void recv_one(int from, int size, int round, int who)
{
    int len, tag, src;
    long i;
    int id = pvm_recv(from, -1);
    pvm_bufinfo(id, &len, &tag, &src);
    if (tag != size || len != size || src != from) {
        printf("round %d: expected %d bytes with tag %d from t%x, got %d bytes with tag %d from t%x\n",
               round, size, size, from, len, tag, src);
        exit(1);
    }
    memset(buf, 0, size);
    pvm_upkbyte((char *)buf, size, 1);
    for (i = 0; i < size; i++)
        if (buf[i] != byte_at(size, round, who, i)) {
            printf("round %d: byte %ld of a %d-byte message is %d, not %d\n", round, i, size,
                   buf[i], byte_at(size, round, who, i));
            exit(1);
        }
}

int main(int argc, char **argv)
{
    int parent = pvm_parent(), peer, r, s, n = 0;
    buf = malloc(1 << 20);
    if (parent > 0) {
        for (r = 0; r < ROUNDS; r++)
            for (s = 0; s < NSIZES; s++) {
                recv_one(parent, sizes[s], r, 0);
                send_one(parent, sizes[s], r, 1);
            }
        /* The burst: everything arrives before anything goes back. */
        for (s = 0; s < NSIZES; s++)
            recv_one(parent, sizes[s], ROUNDS, 0);
        for (s = 0; s < NSIZES; s++)
            send_one(parent, sizes[s], ROUNDS, 1);
        pvm_exit();
        return 0;
    }
    if (pvm_spawn(argv[0], NULL, PvmTaskHost, argc > 1 ? argv[1] : "", 1, &peer) != 1) {
        printf("cannot spawn the peer\n");
        return 1;
    }
    printf("peer t%x on %s\n", peer, argc > 1 ? argv[1] : "");
    for (r = 0; r < ROUNDS; r++)
        for (s = 0; s < NSIZES; s++) {
            send_one(peer, sizes[s], r, 0);
            recv_one(peer, sizes[s], r, 1);
            n += 2;
        }
    for (s = 0; s < NSIZES; s++)
        send_one(peer, sizes[s], ROUNDS, 0);
    for (s = 0; s < NSIZES; s++)
        recv_one(peer, sizes[s], ROUNDS, 1);
    n += 2 * NSIZES;
    printf("verified %d messages\n", n);
    if (argc > 2 && strcmp(argv[2], "wait") == 0) {
        char line[16];
        printf("waiting\n");
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
            printf("stdin closed\n");
    }
    pvm_exit();
    return 0;
}
