/* common.h: a plain header of the top directory; sub/work.C includes it as "../common.h". */
#ifndef COMMON_H
#define COMMON_H
#include "prog.h"

/* The value of item i, from the library, the object and the shared library. */
#define ITEM(i, mul) scale_of(twice(weight(i)) * (mul))
#endif
