/* Streaming kernel for the one-run pirate curve (`pirate-curve --one-run`): it reads FILE in 64 KiB
 * blocks, PASSES times, and for every 8-byte word does one lookup-and-update in a hash table of
 * TABLE_BYTES (as a compressor's match finder does), then writes a checksum.  Its work shows as
 * bytes read (/proc/PID/io), and its speed depends on whether the table fits the cache it is left.
 * Usage: eklov_lookup TABLE_BYTES PASSES FILE
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK (64 * 1024)

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TABLE_BYTES PASSES FILE\n", argv[0]);
        return 2;
    }
    uint64_t entries = strtoull(argv[1], NULL, 10) / 8;
    long passes = atol(argv[2]);
    if (entries < 8 || passes < 1) {
        fprintf(stderr, "%s: TABLE_BYTES must be at least 64 and PASSES at least 1\n", argv[0]);
        return 2;
    }
    uint64_t *table = calloc(entries, sizeof *table);
    static uint64_t block[BLOCK / 8];
    if (!table) return 1;
    uint64_t acc = 0;
    for (long pass = 0; pass < passes; pass++) {
        int fd = open(argv[3], O_RDONLY);
        if (fd < 0) {
            perror(argv[3]);
            return 1;
        }
        ssize_t got;
        while ((got = read(fd, block, BLOCK)) > 0) {
            for (ssize_t i = 0; i < got / 8; i++) {
                uint64_t h = (block[i] ^ acc) * 0x9e3779b97f4a7c15ULL;
                uint64_t *slot = &table[(h >> 17) % entries];
                acc += *slot;
                *slot = block[i];
            }
        }
        close(fd);
    }
    printf("%llu\n", (unsigned long long)acc);
    free(table);
    return 0;
}
