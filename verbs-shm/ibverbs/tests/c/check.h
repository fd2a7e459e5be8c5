/* CHECK(cond, fmt, ...): the C tests' one assertion. On failure: file, line, the
 * condition, the message and errno, then exit(1) (the Rust test reads stderr). */
#ifndef IWARP_TEST_CHECK_H
#define IWARP_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c, ...)                                                          \
	do {                                                                   \
		if (!(c)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno)); \
			exit(1);                                               \
		}                                                              \
	} while (0)

#endif
