/*
 * The C bench of UMP (ump.h): seed 004's Figures 8 and 9 at a few sizes,
 * from C. Node 0 and node 1 over Memory Channel, then two threads of node
 * 0 over shared memory: the one-way transfer time of a message (half a
 * round trip, median) and the streaming bandwidth, with blocking writes.
 * `mc-guest bench ump` measures the full set beside the raw limits.
 *
 * Usage (every node runs it):  ump_bench [ROUND_TRIPS]
 *     mc-host run --nodes 2 -- ./ump_bench 2000
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/imc.h>
#include <ump.h>

#define OK(call)                                                                 \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != UMP_SUCCESS) {                                                \
            ump_perror(#call, rc_);                                              \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static const size_t sizes[] = {8, 512, 4096, 65536, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])
static int rounds = 1000;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One side of the measurement on channel ch; the lead prints. */
static void measure(ump_task_t *t, ump_channel_t ch, int lead, const char *what)
{
    unsigned char *buf = malloc(1 << 20);
    double *s = malloc(sizeof(double) * (size_t)rounds);
    if (!buf || !s)
        exit(1);
    memset(buf, 0x5a, 1 << 20);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k], len;
        int r = rounds;
        if (n >= 65536)
            r = r / 50 > 10 ? r / 50 : 10;
        for (int i = 0; i < r; i++) {
            double t0 = now_us();
            if (lead) {
                OK(ump_write(t, ch, buf, n));
                OK(ump_read(t, ch, buf, n, &len));
                s[i] = (now_us() - t0) / 2;
            } else {
                OK(ump_read(t, ch, buf, n, &len));
                OK(ump_write(t, ch, buf, n));
            }
        }
        size_t count = (16u << 20) / n;
        if (count > 20000)
            count = 20000;
        double t0 = now_us();
        for (size_t i = 0; i < count; i++) {
            if (lead)
                OK(ump_write(t, ch, buf, n));
            else
                OK(ump_read(t, ch, buf, n, &len));
        }
        if (lead)
            OK(ump_read(t, ch, buf, 8, &len));
        else
            OK(ump_write(t, ch, "done", 4));
        double secs = (now_us() - t0) / 1e6;
        if (lead) {
            qsort(s, (size_t)r, sizeof(double), cmp);
            printf("ump_bench: %s %7zu B: one-way %8.2f us, %8.1f MB/s\n", what, n, s[r / 2],
                   (double)(count * n) / secs / 1e6);
        }
    }
    free(buf);
    free(s);
}

static void *shm_peer(void *arg)
{
    (void)arg;
    ump_task_t *t;
    ump_channel_t ch;
    OK(ump_init(&t));
    OK(ump_open(t, 0xd1, 0xd0, UMP_SHM, &ch));
    measure(t, ch, 0, "shared memory");
    OK(ump_exit(t));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rounds = atoi(argv[1]) > 10 ? atoi(argv[1]) : 10;
    int me = imc_node_id();
    if (imc_nodes() < 2) {
        fprintf(stderr, "ump_bench: needs 2 nodes (mc-host run --nodes 2 -- ./ump_bench)\n");
        return 1;
    }
    ump_task_t *t;
    ump_channel_t ch;
    OK(ump_init(&t));
    if (me <= 1) {
        OK(ump_open(t, 0xe0 + me, 0xe1 - me, UMP_MC, &ch));
        measure(t, ch, me == 0, "Memory Channel");
        /* Neither leaves before the other is done reading. */
        size_t len;
        OK(ump_write(t, ch, "end", 4));
        char end[8];
        OK(ump_read(t, ch, end, sizeof end, &len));
        OK(ump_close(t, ch));
    }
    if (me == 0) {
        pthread_t th;
        pthread_create(&th, NULL, shm_peer, NULL);
        OK(ump_open(t, 0xd0, 0xd1, UMP_SHM, &ch));
        measure(t, ch, 1, "shared memory");
        pthread_join(th, NULL);
        printf("ump_bench: seed 004: Memory Channel 5.8 us, 61 MB/s; shared memory 2 us, 75 MB/s\n");
    }
    OK(ump_exit(t));
    return 0;
}
