/*
 * A tree of G_MALLOC'd nodes linked by pointers, written with the ANL
 * macros (a test program of this project). Main builds the tree before
 * CREATE and keeps its root in a global; every process sums the subtrees
 * dealt to it and stores each sum in the subtree's root, then allocates
 * nodes of its own (G_MALLOC after CREATE, on every node at once) and
 * links them into a shared list under a lock. Main then walks everything:
 * pointers stored in shared data must mean the same on every node, and
 * no two allocations may overlap.
 *
 * Usage: tree [-p P] [-d DEPTH] [-e EXTRA]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

MAIN_ENV

struct Node {
	long key;
	long sum;
	struct Node *left, *right, *next;
};

struct Global {
	BARDEC(bar)
	LOCKDEC(lock)
	long next_id;
	struct Node *extra;
	long extras;
};

struct Global *gl;
struct Node *root;
long P = 1, DEPTH = 12, EXTRA = 20, SPLIT = 4;

static struct Node *build(long depth, long key)
{
	struct Node *n = (struct Node *) G_MALLOC(sizeof(struct Node));
	n->key = key;
	n->sum = 0;
	n->next = NULL;
	n->left = depth > 1 ? build(depth - 1, 2 * key) : NULL;
	n->right = depth > 1 ? build(depth - 1, 2 * key + 1) : NULL;
	return n;
}

static long sum(struct Node *n)
{
	if (n == NULL)
		return 0;
	n->sum = n->key + sum(n->left) + sum(n->right);
	return n->sum;
}

/* The i-th subtree at depth SPLIT (0-based from the root). */
static struct Node *subtree(long i)
{
	struct Node *n = root;
	long d;
	for (d = SPLIT - 1; d >= 0 && n; d--)
		n = (i >> d) & 1 ? n->right : n->left;
	return n;
}

void Slave(void)
{
	long id, i;
	struct Node *e;

	LOCK(gl->lock)
	id = gl->next_id++;
	UNLOCK(gl->lock)
	for (i = id; i < (1L << SPLIT); i += P)
		sum(subtree(i));
	for (i = 0; i < EXTRA; i++) {
		e = (struct Node *) G_MALLOC(sizeof(struct Node));
		e->key = id * 1000 + i;
		e->left = e->right = NULL;
		LOCK(gl->lock)
		e->next = gl->extra;
		gl->extra = e;
		gl->extras++;
		UNLOCK(gl->lock)
	}
	BARRIER(gl->bar, P)
}

static int cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	unsigned long t0, t1;
	long i, top = 0, keys = 0, count = 0, overlaps = 0;
	struct Node *e, **seen;

	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-p")) P = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-d")) DEPTH = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "-e")) EXTRA = atol(argv[i + 1]);
		else { fprintf(stderr, "usage: tree [-p P] [-d DEPTH] [-e EXTRA]\n"); exit(2); }
	}
	if (DEPTH <= SPLIT) {
		fprintf(stderr, "tree: depth must be more than %ld\n", SPLIT);
		exit(2);
	}
	MAIN_INITENV(,8000000)
	gl = (struct Global *) G_MALLOC(sizeof(struct Global));
	gl->next_id = 0;
	gl->extra = NULL;
	gl->extras = 0;
	BARINIT(gl->bar, P)
	LOCKINIT(gl->lock)
	root = build(DEPTH, 1);
	CLOCK(t0)
	for (i = 1; i < P; i++)
		CREATE(Slave)
	Slave();
	WAIT_FOR_END(P - 1)
	CLOCK(t1)
	fprintf(stderr, "tree: %lu us\n", t1 - t0);
	for (i = 0; i < (1L << SPLIT); i++)
		top += subtree(i)->sum;
	seen = malloc(sizeof(*seen) * (gl->extras + 1));
	for (e = gl->extra; e; e = e->next) {
		keys += e->key;
		seen[count++] = e;
	}
	qsort(seen, count, sizeof(*seen), cmp);
	for (i = 1; i < count; i++)
		if ((char *)seen[i] < (char *)seen[i - 1] + sizeof(struct Node))
			overlaps++;
	printf("tree: depth %ld: subtree sums %ld, %ld extra nodes (%ld listed), keys %ld, %ld overlapping\n",
	       DEPTH, top, gl->extras, count, keys, overlaps);
	MAIN_END
}
