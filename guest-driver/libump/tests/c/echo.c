/*
 * UMP from C (ump.h) on every node of a cluster: node 0 registers a server
 * endpoint and echoes every message it gets, with "!" appended; every
 * other node, and a second thread on node 0 (over shared memory), is a
 * client with a handle the server does not know. Clients send messages of
 * 1 byte to 1 MiB, blocking and non-blocking, read the echoes in pieces
 * with ump_nbread, and the server ends with two multicasts to all of them
 * (the second, 1 KiB, goes through the server node's outbuf to the clients
 * on other nodes and as a copy to the local thread).
 * Misuse is checked to return the header's codes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/imc.h>
#include <ump.h>

#define SERVER 0x5e4e4ULL
#define SIZES 6
static const size_t sizes[SIZES] = {1, 8, 100, 4096, 70000, 1 << 20};
static int nodes;

#define CHECK(cond, what)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            printf("echo: FAIL %s (line %d)\n", what, __LINE__);                 \
            exit(1);                                                             \
        }                                                                        \
    } while (0)
#define OK(call)                                                                 \
    do {                                                                         \
        int rc_ = (call);                                                        \
        if (rc_ != UMP_SUCCESS) {                                                \
            ump_perror(#call, rc_);                                              \
            printf("echo: FAIL %s (line %d)\n", #call, __LINE__);                \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 8));
}

static void *client(void *arg)
{
    unsigned long long me = (unsigned long long)(size_t)arg;
    ump_task_t *t;
    OK(ump_init(&t));
    ump_channel_t ch;
    OK(ump_open(t, me, SERVER, UMP_AUTO, &ch));
    unsigned char *out = malloc((1 << 20) + 1), *in = malloc((1 << 20) + 1);
    CHECK(out && in, "memory");
    for (int k = 0; k < SIZES; k++) {
        size_t n = sizes[k];
        fill(out, n, (unsigned)(me + k));
        if (k % 2) {
            ump_request_t *req;
            OK(ump_nbwrite(t, ch, out, n, &req));
            /* Read the echo in pieces of at least 1000 bytes while the
             * background thread may still be writing. */
            size_t got = 0, copied, remaining = 1;
            while (remaining > 0) {
                OK(ump_nbread(t, ch, in + got, n + 1 - got, 1000, &copied, &remaining));
                got += copied;
            }
            CHECK(got == n + 1, "the echo's length (nbread)");
            OK(ump_complete(req));
        } else {
            OK(ump_write(t, ch, out, n));
            size_t len = 0;
            OK(ump_read(t, ch, in, n + 1, &len));
            CHECK(len == n + 1, "the echo's length");
        }
        CHECK(memcmp(in, out, n) == 0 && in[n] == '!', "the echo's bytes");
    }
    /* The server's multicast. */
    size_t len = 0;
    OK(ump_read(t, ch, in, 64, &len));
    CHECK(len == 4 && memcmp(in, "bye", 4) == 0, "the multicast");
    fill(out, 1024, 99);
    OK(ump_read(t, ch, in, 1024, &len));
    CHECK(len == 1024 && memcmp(in, out, 1024) == 0, "the 1 KiB multicast");
    ump_info_t info;
    OK(ump_info(t, &info));
    CHECK(info.channels == 1 && info.node == imc_node_id(), "ump_info");
    OK(ump_exit(t));
    free(out);
    free(in);
    printf("echo: client %llx done on node %d\n", me, imc_node_id());
    return NULL;
}

static void server(void)
{
    ump_task_t *t;
    OK(ump_init(&t));
    OK(ump_listen(t, SERVER, UMP_AUTO));
    CHECK(ump_listen(t, SERVER, UMP_AUTO) == UMP_EEXISTS, "listening twice");
    int clients = nodes; /* every other node, and the local thread */
    int served = 0, opened = 0;
    ump_channel_t chans[64];
    unsigned char *buf = malloc((1 << 20) + 1);
    CHECK(buf != NULL, "memory");
    while (served < clients * SIZES) {
        ump_event_t ev;
        OK(ump_wait(t, UMP_ANY, UMP_FOREVER, &ev));
        if (ev.type == UMP_EV_OPENED) {
            CHECK(opened < 64, "too many clients");
            chans[opened++] = ev.channel;
        } else if (ev.type == UMP_EV_MESSAGE) {
            size_t len = 0;
            OK(ump_read(t, ev.channel, buf, 1 << 20, &len));
            buf[len] = '!';
            OK(ump_write(t, ev.channel, buf, len + 1));
            served++;
        }
    }
    CHECK(opened == clients, "every client opened");
    OK(ump_mcast(t, chans, opened, "bye", 4));
    fill(buf, 1024, 99);
    OK(ump_mcast(t, chans, opened, buf, 1024));
    /* Wait for every client to close before leaving. */
    int closed = 0;
    while (closed < clients) {
        ump_event_t ev;
        OK(ump_wait(t, UMP_ANY, UMP_FOREVER, &ev));
        closed += ev.type == UMP_EV_CLOSED;
    }
    OK(ump_exit(t));
    free(buf);
    printf("echo: server served %d messages from %d clients\n", served, clients);
}

static void misuse(void)
{
    ump_task_t *t;
    CHECK(ump_init(NULL) == UMP_EBADPARM, "ump_init(NULL)");
    OK(ump_init(&t));
    ump_channel_t ch;
    CHECK(ump_open(NULL, 1, 2, UMP_AUTO, &ch) == UMP_EBADPARM, "NULL task");
    CHECK(ump_open(t, 1, 2, 7, &ch) == UMP_EBADPARM, "bad transport");
    CHECK(ump_open(t, 3, 3, UMP_AUTO, &ch) == UMP_EBADPARM, "one endpoint twice");
    CHECK(ump_write(t, 12345, "x", 1) == UMP_ENOCHANNEL, "no such channel");
    CHECK(ump_read(t, 12345, NULL, 4, NULL) == UMP_EBADPARM, "NULL buffer");
    ump_event_t ev;
    CHECK(ump_wait(t, UMP_ANY, 1000, &ev) == UMP_ETIMEOUT, "nothing to wait for");
    CHECK(strcmp(ump_strerror(UMP_EDAMAGED), "a message was damaged or lost on the network") == 0,
          "ump_strerror");
    OK(ump_exit(t));
}

int main(void)
{
    nodes = imc_nodes();
    int me = imc_node_id();
    misuse();
    if (me == 0) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, client, (void *)(size_t)0xc0) == 0, "thread");
        server();
        pthread_join(th, NULL);
    } else {
        client((void *)(size_t)(0xc0 + me));
    }
    printf("echo: node %d passed\n", me);
    return 0;
}
