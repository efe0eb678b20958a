/* The control page shared by the isolation shim and the cache pirate (protocol version 1).
 *
 * The pirate must steal its share of the cache only while the profiled thread runs, and must
 * have re-warmed its working set before that thread resumes (spec section 2.2 steps 2-4).  The
 * Python driver creates a 4096-byte file (normally under /dev/shm), zero-filled, and passes its
 * path to both sides in SCALESTACK_PIRATE_CTL; both map it MAP_SHARED.
 *
 * The shim writes `command`; the pirate writes `state` (the command it has completed) and its
 * per-segment counters.  After every write of one of these two words the writer calls
 * futex(FUTEX_WAKE) on it (not FUTEX_PRIVATE: the page is shared between processes), so a
 * waiter may block with FUTEX_WAIT or spin; both are allowed.
 *
 * One segment (the shim, before it releases the profiled thread):
 *   segment += 1; command = SS_WARM;  wait until state == SS_WARMED
 *       (the pirate has touched its whole working set at least twice since it was told)
 *   command = SS_RUN;                 the pirate loops over its set, timing itself
 *   ... the profiled thread runs until it reaches a barrier, the join, or exits ...
 *   command = SS_PARK;                wait until state == SS_PARKED
 *       (the pirate has stopped touching memory and stored seg_lines / seg_ns for this segment)
 * At the end of the run the driver (not the shim) writes command = SS_QUIT.
 * With SCALESTACK_PIRATE_CTL unset the shim isolates threads with no pirate.
 * A pirate started with several sizes (--sizes) holds the one named by active_bytes from the next
 * SS_WARM on; the field was added after the version-1 layout and a zero keeps its behaviour.
 */
#ifndef SCALESTACK_PIRATE_CTL_H
#define SCALESTACK_PIRATE_CTL_H

#include <stdint.h>

#define SS_PIRATE_MAGIC 0x50495254u /* "PIRT" */
#define SS_PIRATE_VERSION 1u

enum ss_pirate_word {
    SS_PARK = 1,    /* command: stop touching memory; state: SS_PARKED */
    SS_WARM = 2,    /* command: re-warm the working set; state: SS_WARMED */
    SS_RUN = 3,     /* command: loop over the set and time it; state: SS_RUNNING */
    SS_QUIT = 4,    /* command: exit; state: SS_QUITTING */
    SS_PARKED = 11,
    SS_WARMED = 12,
    SS_RUNNING = 13,
    SS_QUITTING = 14,
};

struct ss_pirate_ctl {
    uint32_t magic;              /* SS_PIRATE_MAGIC, written by the pirate once it is ready */
    uint32_t version;            /* SS_PIRATE_VERSION */
    uint32_t command;            /* written by the shim (and by the driver for SS_QUIT) */
    uint32_t state;              /* written by the pirate */
    uint32_t segment;            /* incremented by the shim before each SS_WARM */
    uint32_t pirate_pid;
    uint64_t working_set_bytes;  /* W, as the pirate allocated it */
    uint64_t seg_lines;          /* cache lines the pirate touched in the segment just parked */
    uint64_t seg_ns;             /* time it spent touching them */
    double calib_ns_per_line;    /* its calibrated cache-hit latency per line, alone (active size) */
    uint64_t active_bytes;       /* written by the driver before SS_WARM: which of the pirate's
                                    --sizes to hold (0: the first; the shim leaves it 0) */
};

#endif
