/* help.c: a shared library, libhelp.so, built with cc (no globals). */
long twice(long x)
{
	return 2 * x;
}
