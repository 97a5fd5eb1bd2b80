/* util.c: plain C, linked as util.o. Its global (in .bss) is set by main. */
long scale_factor;

long scale_of(long x)
{
	return x * scale_factor;
}
