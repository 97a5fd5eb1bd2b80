/*
 * What Cashmere cannot do for a C program, each refused with a message,
 * and some things that look as if it could not but can (a test program of
 * this project): -m MODE picks one.
 *   shared  a GETSUB counter in a global (works: globals are shared memory)
 *   lock    a global lock that one process initialises after CREATE and
 *           every process then takes (works, after a barrier)
 *   early   G_MALLOC before MAIN_INITENV (works: the cluster starts there)
 *   create  CREATE from a process other than main (refused)
 *   exit    a process on the last node exits in the middle of the run
 *           (the other nodes are told and stop)
 *   fork    main forks after MAIN_INITENV: the child is stopped with a
 *           message (the run goes on without it)
 *   none    nothing special (prints "misuse: fine")
 *
 * Usage: misuse [-p P] -m MODE
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

MAIN_ENV

struct Global {
	BARDEC(bar)
	LOCKDEC(idlock)
	long next_id;
};

struct Global *gl;
long P = 1;
const char *mode = "none";
GSDEC(counter)
LOCKDEC(late)

void Slave(void)
{
	long id, sub;

	LOCK(gl->idlock)
	id = gl->next_id++;
	UNLOCK(gl->idlock)
	if (!strcmp(mode, "lock") && id == P - 1)
		LOCKINIT(late)
	if (!strcmp(mode, "exit") && id == P - 1)
		exit(3);
	if (!strcmp(mode, "create") && id == P - 1)
		CREATE(Slave)
	BARRIER(gl->bar, P)
	if (!strcmp(mode, "lock")) {
		LOCK(late)
		UNLOCK(late)
	}
	if (!strcmp(mode, "shared")) {
		GETSUB(counter, sub, 10, P)
		(void)sub;
	}
	BARRIER(gl->bar, P)
}

int main(int argc, char **argv)
{
	long i;
	void *early = NULL;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-m")) mode = argv[i + 1];
		else { fprintf(stderr, "usage: misuse [-p P] -m MODE\n"); exit(2); }
	}
	if (!strcmp(mode, "early"))
		early = G_MALLOC(64);
	MAIN_INITENV(,1000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->next_id = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->idlock)
	if (!strcmp(mode, "shared"))
		GSINIT(counter)
	if (!strcmp(mode, "fork")) {
		int status = 0;
		pid_t child = fork();
		if (child == 0) {
			printf("misuse: the forked child runs on\n");
			exit(0);
		}
		waitpid(child, &status, 0);
		printf("misuse: the forked child ended with status %d\n", WEXITSTATUS(status));
	}
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	printf("misuse: fine%s\n", early ? " (early)" : "");
	MAIN_END
}
