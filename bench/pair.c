// SPDX-License-Identifier: MIT
/* bench/pair.c: the two-process baselines' shared pieces (pair.h). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "pair.h"

size_t pair_parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	if (*end == 'K' || *end == 'k')
		v *= 1024;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024;
	else if (*end == 'G' || *end == 'g')
		v *= 1024.0 * 1024 * 1024;
	return (size_t)v;
}

void pair_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("sched_setaffinity");
}

double pair_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void *pair_shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

void pair_report(const char *name, size_t size, double *res, long nres,
		 double *nt, long nnt)
{
	qsort(res, nres, sizeof(res[0]), cmp);
	printf("%s_gbps %.3f\n", name, size / res[0] / 1e9);
	if (nnt > 0) {
		qsort(nt, nnt, sizeof(nt[0]), cmp);
		printf("%s_nt_gbps %.3f\n", name, size / nt[0] / 1e9);
	}
}
