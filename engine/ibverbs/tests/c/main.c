/*
 * abi_check PART [SECONDS]: runs one part (a to j) or all of them on the first device and
 * exits 0 only if every check passed. SECONDS is how long part a posts (default 10).
 */
#include "abi_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void)
{
	fprintf(stderr, "usage: abi_check a|b|c|d|e|f|g|h|i|j|all [SECONDS]\n"
			"  a: posting and polling on two threads for SECONDS (default 10), data checked\n"
			"  b: a thread blocked in ibv_get_cq_event woken by a completion\n"
			"  c: ibv_reg_mr of malloc'ed, stack and mmap'ed buffers at odd addresses and lengths\n"
			"  d: misuse answered with libibverbs' error conventions\n"
			"  e: the ibv_wr_* send API\n"
			"  f: the attributes middleware passes and expects (errno, flow labels, GIDs, UD GRH)\n"
			"  g: one rdma_cm ID used from three threads, destroyed under its event thread\n"
			"  h: ibv_resize_cq with completions outstanding, the extended CQ of ibv_create_cq_ex\n"
			"  i: ibv_rereg_mr, on-demand paging and ibv_advise_mr\n"
			"  j: what rdma-core's own test suite checks that the other parts do not\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct dev d;
	const char *part;
	int seconds = 10;

	if (argc < 2 || argc > 3)
		usage();
	part = argv[1];
	if (strcmp(part, "a") && strcmp(part, "b") && strcmp(part, "c") && strcmp(part, "d") && strcmp(part, "e") &&
	    strcmp(part, "f") && strcmp(part, "g") && strcmp(part, "h") && strcmp(part, "i") &&
	    strcmp(part, "j") &&
	    strcmp(part, "all"))
		usage();
	if (argc == 3) {
		seconds = atoi(argv[2]);
		if (seconds <= 0)
			usage();
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (dev_open(&d) == 0) {
		int all = !strcmp(part, "all");

		if (all || !strcmp(part, "a"))
			part_threads(&d, seconds);
		if (all || !strcmp(part, "b"))
			part_events(&d);
		if (all || !strcmp(part, "c"))
			part_memory(&d);
		if (all || !strcmp(part, "d"))
			part_misuse(&d);
		if (all || !strcmp(part, "e"))
			part_wr_api(&d);
		if (all || !strcmp(part, "f"))
			part_middleware(&d);
		if (all || !strcmp(part, "g"))
			part_cm_threads(&d);
		if (all || !strcmp(part, "h"))
			part_cq_ex(&d);
		if (all || !strcmp(part, "i"))
			part_rereg(&d);
		if (all || !strcmp(part, "j"))
			part_suite(&d);
	}
	dev_close(&d);
	if (failures()) {
		printf("%d check(s) failed\n", failures());
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
