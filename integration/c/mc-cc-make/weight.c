/* weight.c: plain C, archived into libweight.a. Its global is set by main. */
long weight_base = 1;

long weight(long i)
{
	return weight_base + i % 7;
}
