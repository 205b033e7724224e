/*
 * What a machine allows a timer, without any runtime in the way.
 *
 *   cc -O2 -o wakeup-latency bench/tools/wakeup-latency.c
 *   ./wakeup-latency wait N US SPIN   N waits of US µs: epoll_pwait2 for US-SPIN µs (timer
 *                                     slack 1 ns), then spin on the clock to the deadline;
 *                                     prints the error quantiles (µs past the deadline).
 *                                     SPIN = US never blocks (a pure busy-wait).
 *   ./wakeup-latency gaps SECS        spins for SECS seconds reading the clock and counts the
 *                                     gaps longer than 5, 20 and 50 µs: the times the thread
 *                                     lost the CPU (hypervisor, interrupts) while running.
 *
 * Pin it with taskset to measure one CPU. Linux 5.11+ (epoll_pwait2).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/prctl.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int wait_mode(int n, int us, int spin)
{
	struct epoll_event ev;
	int ep = epoll_create1(0);
	double *e = malloc(n * sizeof(double));
	if (ep < 0 || !e || n < 1 || us < 1 || spin < 0 || spin > us) {
		fprintf(stderr, "bad arguments or no epoll\n");
		return 2;
	}
	prctl(PR_SET_TIMERSLACK, 1);
	for (int i = 0; i < n; i++) {
		double start = now_us(), deadline = start + us;
		if (spin < us) {
			struct timespec ts = { 0, (long)(us - spin) * 1000 };
			epoll_pwait2(ep, &ev, 1, &ts, NULL);
		}
		while (now_us() < deadline)
			;
		e[i] = now_us() - deadline;
	}
	qsort(e, n, sizeof(double), cmp);
	printf("wait %d µs, spin %d µs, %d waits: error p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f µs\n",
	       us, spin, n, e[n / 2], e[n * 9 / 10], e[n * 99 / 100], e[n * 999 / 1000], e[n - 1]);
	return 0;
}

static int gaps_mode(double secs)
{
	double start = now_us(), prev = start, lost = 0, longest = 0;
	long over5 = 0, over20 = 0, over50 = 0;
	while (prev - start < secs * 1e6) {
		double t = now_us(), g = t - prev;
		if (g > 5) {
			over5++;
			lost += g;
		}
		over20 += g > 20;
		over50 += g > 50;
		if (g > longest)
			longest = g;
		prev = t;
	}
	printf("%.1f s of spinning: gaps > 5 µs %ld (%.1f ms lost), > 20 µs %ld, > 50 µs %ld, longest %.1f µs\n",
	       secs, over5, lost / 1000, over20, over50, longest);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "wait"))
		return wait_mode(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
	if (argc == 3 && !strcmp(argv[1], "gaps"))
		return gaps_mode(atof(argv[2]));
	fprintf(stderr, "usage: %s wait N US SPIN | gaps SECS\n", argv[0]);
	return 2;
}
