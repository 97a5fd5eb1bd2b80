/*
 * csm.h: Cashmere for C programs (libcsm). Programs are written with the
 * SPLASH-2/SPLASH-3 (ANL) m4 macros and built with mc-cc, whose macro file
 * (c.m4.cashmere) maps each macro onto these calls; docs/c-programs.md
 * explains them. Every call that fails prints why ("csm: node N: ..."),
 * tells the other nodes, and ends this node with status 1.
 */
#ifndef CSM_H
#define CSM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LOCKDEC: an id handed out by LOCKINIT (the same on every node). */
typedef struct {
	unsigned int id;
	unsigned int magic;
} csm_lock_t;

/* BARDEC: Cashmere's barrier takes every process; nothing to keep. */
typedef struct {
	long count;
} csm_barrier_t;

/* PAUSEDEC, CONDVARDEC, GSDEC: a lock and a word, in G_MALLOC'd memory
 * when processes on several nodes use them. */
typedef struct {
	csm_lock_t lock;
	long word;
} csm_guarded_t;
typedef csm_guarded_t csm_pause_t;
typedef csm_guarded_t csm_condvar_t;
typedef csm_guarded_t csm_gs_t;

/* Start-up and process control */
void csm_early_init(int argc, char **argv, char **envp);
void csm_main_initenv(unsigned long heap_bytes, const void *globals_start,
		      const void *globals_end, int built_by_mc_cc);
void csm_register_globals(const void *globals_start, const void *globals_end,
			  int built_by_mc_cc);
void csm_create(void (*f)(void));
void csm_create_n(void (*f)(void), long n);
void csm_wait_for_end(long n);
void csm_main_end(void);
unsigned long csm_clock(void);
long csm_process_id(void);
long csm_processes(void);
long csm_node_id(void);
long csm_nodes(void);

/* Memory: the shared heap, at the same address on every node */
void *csm_g_malloc(size_t bytes);
void csm_g_free(void *p);

/* Synchronisation */
void csm_lock_init(csm_lock_t *l);
void csm_alock_init(csm_lock_t *l, long n);
void csm_lock(const csm_lock_t *l);
void csm_unlock(const csm_lock_t *l);
void csm_barrier_init(long n);
void csm_barrier(long n);
void csm_guarded_init(csm_guarded_t *g, int what); /* 0 pause, 1 condvar, 2 gs */
void csm_pause_set(csm_pause_t *p);
void csm_pause_clear(csm_pause_t *p);
void csm_pause_wait(csm_pause_t *p);
void csm_pause_take(csm_pause_t *p);
void csm_condvar_wait(csm_condvar_t *cv, const csm_lock_t *l);
void csm_condvar_signal(csm_condvar_t *cv);
long csm_getsub(csm_gs_t *gs, long limit);
void csm_fence(void);
void csm_roi(int end);

/*
 * The program's own globals: mc-cc renames the .data and .bss sections of
 * the program's objects to csm_data and csm_bss, and its linker script puts
 * them at 0x70000000 between these two symbols. They are the top of the
 * shared heap: shared memory on every node, as under pthreads.
 */
extern char csm_globals_start[] __attribute__((weak));
extern char csm_globals_end[] __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* CSM_H */
