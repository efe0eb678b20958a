/* scalestack-agg: load aggregate.bpf.o, follow one process tree, print the counters on request.
 *
 * Usage: scalestack-agg OBJECT TGID [TGID...]   (a process and its existing descendants)
 * Prints "ready" once attached. Then every line read on stdin ("d") prints one snapshot:
 *   G now F r last busy spins_failed full events miss_in miss_out repaired f_corr busy_corr
 *   T tid tgid state since f_in crit_fx ns0 .. ns7 exited switches comm
 *   E
 * and end of input (or "q") detaches and exits. All times are CLOCK_MONOTONIC ns, the clock of
 * bpf_ktime_get_ns. Kept in C so the Python side needs no binding to libbpf.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct thread {
	uint64_t crit_fx, ns[8], since, f_in, kernel_out, rq_base;  /* the layout of aggregate.bpf.c's struct thread */
	uint32_t tgid, state, exited, switches;
	char comm[16];
};
struct global {
	uint64_t lock, last, F, r, busy_ns, spins_failed, full, events, miss_in, miss_out, repaired, f_corr, busy_corr,
		 test_unlocked_every;
};

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void dump(int fd_threads, int fd_glob)
{
	struct timespec ts;
	struct global g;
	uint32_t zero = 0, key, next;
	struct thread t;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	memset(&g, 0, sizeof(g));
	bpf_map_lookup_elem(fd_glob, &zero, &g);
	printf("G %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %lld %lld\n",
	       (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec, (unsigned long long)g.F,
	       (unsigned long long)g.r, (unsigned long long)g.last, (unsigned long long)g.busy_ns,
	       (unsigned long long)g.spins_failed, (unsigned long long)g.full, (unsigned long long)g.events,
	       (unsigned long long)g.miss_in, (unsigned long long)g.miss_out, (unsigned long long)g.repaired,
	       (long long)g.f_corr, (long long)g.busy_corr);
	int err = bpf_map_get_next_key(fd_threads, NULL, &next);
	while (!err) {
		key = next;
		if (bpf_map_lookup_elem(fd_threads, &key, &t) == 0) {
			t.comm[15] = 0;
			for (char *c = t.comm; *c; c++)
				if (*c == '\n')
					*c = ' ';
			printf("T %u %u %u %llu %llu %llu", key, t.tgid, t.state, (unsigned long long)t.since,
			       (unsigned long long)t.f_in, (unsigned long long)t.crit_fx);
			for (int i = 0; i < 8; i++)
				printf(" %llu", (unsigned long long)t.ns[i]);
			printf(" %u %u %s\n", t.exited, t.switches, t.comm);
		}
		err = bpf_map_get_next_key(fd_threads, &key, &next);
	}
	printf("E\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s OBJECT TGID [TGID...]\n", argv[0]);
		return 2;
	}
	uint32_t one = 1, zero_key = 0;
	libbpf_set_print(print_libbpf);
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || libbpf_get_error(obj)) {
		fprintf(stderr, "error: cannot open %s\n", argv[1]);
		return 1;
	}
	int err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "error: loading the BPF program failed: %s\n", strerror(-err));
		return 1;
	}
	int fd_tgids = bpf_object__find_map_fd_by_name(obj, "tgids");
	int fd_threads = bpf_object__find_map_fd_by_name(obj, "threads");
	int fd_glob = bpf_object__find_map_fd_by_name(obj, "glob");
	if (fd_tgids < 0 || fd_threads < 0 || fd_glob < 0) {
		fprintf(stderr, "error: the BPF maps are missing\n");
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		uint32_t tgid = (uint32_t)strtoul(argv[i], NULL, 10);
		if (bpf_map_update_elem(fd_tgids, &tgid, &one, BPF_ANY)) {
			fprintf(stderr, "error: cannot follow process %u\n", tgid);
			return 1;
		}
	}
	/* Fault injection for the tests: every k-th switch as if the lock holder were stalled. Set
	 * before any program runs, since it writes the whole global record. */
	const char *every = getenv("SCALESTACK_AGG_TEST_UNLOCKED_EVERY");
	if (every && *every) {
		struct global g;
		memset(&g, 0, sizeof(g));
		g.test_unlocked_every = strtoull(every, NULL, 10);
		if (bpf_map_update_elem(fd_glob, &zero_key, &g, BPF_ANY)) {
			fprintf(stderr, "error: cannot set the test knob\n");
			return 1;
		}
	}
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
	{
		struct bpf_link *link = bpf_program__attach(prog);
		if (!link || libbpf_get_error(link)) {
			fprintf(stderr, "error: attaching %s failed: %s\n", bpf_program__name(prog), strerror(errno));
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (line[0] == 'q')
			break;
		dump(fd_threads, fd_glob);
	}
	bpf_object__close(obj);
	return 0;
}
