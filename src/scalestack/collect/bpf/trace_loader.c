/* scalestack-trace: load trace.bpf.o, write its records to a file until told to stop.
 *
 * Usage: scalestack-trace OBJECT OUTPUT BUFFER_BYTES [nofutex]
 * Prints "ready" once every program is attached. Drains the ring buffer every 10 ms (the
 * programs submit without waking anyone) and appends the 80-byte records to OUTPUT. A line "q"
 * or end of input stops it: the programs are detached, the buffer drained a last time, and it
 * prints "done RECORDS LOST" (LOST = records the ring buffer had no room for). Kept in C so the
 * Python side needs no binding to libbpf. "nofutex" leaves the syscall programs unattached
 * (`record --no-futex`: no per-syscall cost at all).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC_SIZE 80
#define MAX_LINKS 32

static FILE *out;
static unsigned long long written;
static int write_failed;

static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static int on_record(void *ctx, void *data, size_t size)
{
	(void)ctx;
	if (size != REC_SIZE)
		return 0;
	if (fwrite(data, REC_SIZE, 1, out) != 1) {
		write_failed = errno ? errno : EIO;
		return -1;
	}
	written++;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "nofutex"))) {
		fprintf(stderr, "usage: %s OBJECT OUTPUT BUFFER_BYTES [nofutex]\n", argv[0]);
		return 2;
	}
	int futex = argc == 4;
	libbpf_set_print(print_libbpf);
	out = fopen(argv[2], "wb");
	if (!out) {
		fprintf(stderr, "error: cannot write %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	static char obuf[1 << 20];
	setvbuf(out, obuf, _IOFBF, sizeof(obuf));
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || libbpf_get_error(obj)) {
		fprintf(stderr, "error: cannot open %s\n", argv[1]);
		return 1;
	}
	struct bpf_map *rb_map = bpf_object__find_map_by_name(obj, "events");
	unsigned long long want = strtoull(argv[3], NULL, 10), size = 4096;
	while (size < want && size < (1ull << 31))
		size <<= 1;  /* a power of two pages */
	if (!rb_map || bpf_map__set_max_entries(rb_map, (unsigned int)size)) {
		fprintf(stderr, "error: cannot size the ring buffer\n");
		return 1;
	}
	int err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "error: loading the BPF programs failed: %s\n", strerror(-err));
		return 1;
	}
	struct ring_buffer *rb = ring_buffer__new(bpf_map__fd(rb_map), on_record, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "error: cannot map the ring buffer: %s\n", strerror(errno));
		return 1;
	}
	struct bpf_link *links[MAX_LINKS];
	int nlinks = 0;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj)
	{
		if (!futex && !strncmp(bpf_program__name(prog), "on_sys_", 7))
			continue;
		struct bpf_link *link = bpf_program__attach(prog);
		if (!link || libbpf_get_error(link) || nlinks == MAX_LINKS) {
			fprintf(stderr, "error: attaching %s failed: %s\n", bpf_program__name(prog), strerror(errno));
			return 1;
		}
		links[nlinks++] = link;
	}
	printf("ready\n");
	fflush(stdout);
	struct pollfd pfd = {.fd = 0, .events = POLLIN};
	char line[64];
	for (;;) {
		if (ring_buffer__consume(rb) < 0 && write_failed)
			break;
		int ready = poll(&pfd, 1, 10);
		if (ready > 0) {
			if (!fgets(line, sizeof(line), stdin) || line[0] == 'q')
				break;
		}
	}
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	if (!write_failed)
		ring_buffer__consume(rb);
	unsigned long long lost = 0;
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu > 0) {
		uint64_t *per_cpu = calloc((size_t)ncpu, sizeof(uint64_t));
		uint32_t zero = 0;
		int fd_lost = bpf_object__find_map_fd_by_name(obj, "lost");
		if (per_cpu && fd_lost >= 0 && bpf_map_lookup_elem(fd_lost, &zero, per_cpu) == 0)
			for (int i = 0; i < ncpu; i++)
				lost += per_cpu[i];
		free(per_cpu);
	}
	if (fflush(out) != 0 || fclose(out) != 0)
		write_failed = write_failed ? write_failed : errno;
	if (write_failed) {
		fprintf(stderr, "error: writing %s failed: %s\n", argv[2], strerror(write_failed));
		return 1;
	}
	printf("done %llu %llu\n", written, lost);
	fflush(stdout);
	ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}
