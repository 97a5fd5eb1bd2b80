/*
 * imc_bench: what Memory Channel operations cost a C program through
 * libimc, on 2 or more nodes (node 0 prints):
 *
 *   mc-host run --nodes 2 -- ./imc_bench          (scripts/c-bench.sh runs it
 *                                                  next to mc-guest bench)
 *
 * - a plain store of 8 bytes (one fault; libimc performs the MOV itself),
 * - a plain 16-byte SSE store (a fault and a single-step trap),
 * - imc_write of 8 bytes and of 4 KiB (no trap),
 * - one-way latency through plain stores: node 0 stores a sequence number
 *   into a coherent region, node 1 sees it and stores it back, half the
 *   round trip (the same through imc_write),
 * - imc_rderrcnt and imc_ckerrcnt.
 * Each is printed next to the real hardware's figure where seed 004
 * (Table 2) gives one.
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/imc.h>

static double now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
  qsort(v, n, sizeof *v, cmp);
  return v[n / 2];
}

static void row(const char *what, double value, const char *unit, const char *mc2)
{
  printf("%-54s %10.3f %-5s %12s\n", what, value, unit, mc2);
}

/* Spin until cond holds; after a short spin, let the hub and the peer run
 * (more busy threads than cores on a small machine), as mc-guest bench does. */
#define SPIN_UNTIL(cond)                    \
  do {                                      \
    int spins_ = 0;                         \
    while (!(cond))                         \
      if (++spins_ > 50)                    \
        sched_yield();                      \
  } while (0)

static int me;
static volatile long *sync_in;
static long *sync_out;
static long sync_count;

static void sync_all(int nodes)
{
  int n, all;
  sync_out[me] = ++sync_count;
  do {
    all = 1;
    for (n = 0; n < nodes; n++)
      if (sync_in[n] < sync_count)
        all = 0;
    if (!all)
      sched_yield();
  } while (!all);
}

/* This machine's floor for a trapped store: a write fault on a page of our
 * own, turned into a signal whose handler only steps over the instruction
 * (a 2-byte mov). Installed before libimc's handler, which passes faults
 * outside its views on to it. */
static volatile int *raw_page;

static void skip_mov(int sig, siginfo_t *info, void *raw)
{
  ucontext_t *uc = raw;
  (void)sig;
  (void)info;
  uc->uc_mcontext.gregs[REG_RIP] += 2;
}

static void raw_trap_install(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = skip_mov;
  sa.sa_flags = SA_SIGINFO;
  sigfillset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  raw_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static double raw_trap_ns(int n, double *s)
{
  int i;
  for (i = 0; i < n; i++) {
    double t0 = now_ns();
    __asm__ volatile(".byte 0x89, 0x07" /* mov %eax, (%rdi) */ ::"D"(raw_page), "a"(i) : "memory");
    s[i] = now_ns() - t0;
  }
  return median(s, n);
}

static void die(const char *what, int rc)
{
  imc_perror(what, rc);
  exit(1);
}

#define TRY(call) do { int rc_ = (call); if (rc_ != IMC_SUCCESS) die(#call, rc_); } while (0)

int main(int argc, char **argv)
{
  int iters = argc > 1 ? atoi(argv[1]) : 2000, nodes, i;
  imc_asid_t sid, pid_, bid;
  char *stx, *srx, *ptx, *prx, *btx;
  volatile long *ping_in;
  long *ping_out;
  double *s = malloc(sizeof(double) * (iters + 100));
  static char block[4096];

  raw_trap_install();
  TRY(imc_api_init());
  me = imc_node_id();
  nodes = imc_nodes();
  if (nodes < 2) {
    fprintf(stderr, "imc_bench: run it on 2 or more nodes (mc-host run --nodes 2 -- ./imc_bench)\n");
    return 2;
  }
  TRY(imc_asalloc(0xbe7c0001, 8 * IMC_MAXHOSTS, IMC_URW, IMC_COHERENT, &sid));
  TRY(imc_asattach(sid, IMC_TRANSMIT, IMC_SHARED, 0, &stx));
  TRY(imc_asattach(sid, IMC_RECEIVE, IMC_SHARED, 0, &srx));
  sync_out = (long *)stx;
  sync_in = (volatile long *)srx;
  TRY(imc_asalloc(0xbe7c0002, 8192, IMC_URW, IMC_COHERENT, &pid_));
  TRY(imc_asattach(pid_, IMC_TRANSMIT, IMC_SHARED, 0, &ptx));
  TRY(imc_asattach(pid_, IMC_RECEIVE, IMC_SHARED, 0, &prx));
  ping_out = (long *)ptx;
  ping_in = (volatile long *)prx;
  /* A region nobody receives: what a store costs the writer alone. */
  TRY(imc_asalloc(0xbe7c0003, 65536, IMC_URW, 0, &bid));
  sync_all(nodes);

  if (me == 0) {
    long *p;
    double t0, plain, sse, w8, w4k, raw;
    TRY(imc_asattach(bid, IMC_TRANSMIT, IMC_SHARED, 0, &btx));
    p = (long *)btx;
    printf("%-54s %16s %12s\n", "operation (libimc, C)", "measured", "MC2 (seed)");
    /* Each store timed on its own, the median reported: robust against
     * the preemptions of a loaded machine. */
    for (i = 0; i < iters; i++) {
      t0 = now_ns();
      p[i & 1023] = i;
      s[i] = now_ns() - t0;
    }
    plain = median(s, iters);
    for (i = 0; i < iters; i++) {
      t0 = now_ns();
      _mm_storeu_si128((__m128i *)&p[(2 * i) & 1023], _mm_set1_epi32(i));
      s[i] = now_ns() - t0;
    }
    sse = median(s, iters);
    for (i = 0; i < iters; i++) {
      long v = i;
      t0 = now_ns();
      imc_write(&p[i & 1023], &v, sizeof v);
      s[i] = now_ns() - t0;
    }
    w8 = median(s, iters);
    t0 = now_ns();
    for (i = 0; i < iters; i++)
      imc_write(btx + 4096 * (i & 15), block, sizeof block);
    w4k = (now_ns() - t0) / iters;
    raw = raw_trap_ns(iters, s);
    row("raw: a write fault to a handler (median)", raw / 1e3, "us", "-");
    row("plain store, 8 bytes (emulated MOV, 1 trap; median)", plain / 1e3, "us", "-");
    row("plain store, 16 bytes SSE (stepped, 2 traps; median)", sse / 1e3, "us", "-");
    row("imc_write, 8 bytes (median)", w8 / 1e3, "us", "-");
    row("imc_write, 4 KiB", 4096 / w4k * 1e3, "MB/s", "64 MB/s");
    row("plain stores, 8 bytes each", 8 / plain * 1e3, "MB/s", "64 MB/s");
  }
  sync_all(nodes);

  /* One-way latency: node 0 and node 1 bounce a sequence number. */
  for (int mode = 0; mode < 2; mode++) {
    int warm = iters / 10;
    for (i = 1; i <= iters + warm; i++) {
      long v = i + (long)mode * 1000000;
      if (me == 0) {
        double t0 = now_ns();
        if (mode == 0)
          ping_out[0] = v;
        else
          imc_write(&ping_out[0], &v, sizeof v);
        SPIN_UNTIL(ping_in[1] == v);
        if (i > warm)
          s[i - warm - 1] = (now_ns() - t0) / 2;
      } else if (me == 1) {
        SPIN_UNTIL(ping_in[0] == v);
        if (mode == 0)
          ping_out[1] = v;
        else
          imc_write(&ping_out[1], &v, sizeof v);
      }
    }
    sync_all(nodes);
    if (me == 0)
      row(mode == 0 ? "one-way latency, plain 8-byte store (median)"
                    : "one-way latency, imc_write 8 bytes (median)",
          median(s, iters) / 1e3, "us", "2.9 us");
  }

  if (me == 0) {
    int errors = imc_rderrcnt(), n = iters * 50;
    volatile int x = 0;
    double t0 = now_ns();
    for (i = 0; i < n; i++)
      x ^= imc_rderrcnt();
    row("imc_rderrcnt", (now_ns() - t0) / n / 1e3, "us", "< 1 us");
    for (i = 0; i < iters; i++) {
      double t1 = now_ns();
      imc_ckerrcnt(&errors);
      s[i] = now_ns() - t1;
    }
    row("imc_ckerrcnt (ACK page, median)", median(s, iters) / 1e3, "us", "< 5 us");
    (void)x;
  }
  sync_all(nodes);
  return 0;
}
