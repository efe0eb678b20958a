"""The numbers of the perf.data format (include/uapi/linux/perf_event.h, tools/perf/util/header.h),
shared by the reader (`perf_data`) and the copy the stacks pass reads (`perf_data_copy`)."""

MAGIC = b"PERFILE2"
MAGIC_SWAPPED = b"2ELIFREP"
HEADER_SIZE = 104

# sample_type bits, in the order fields appear in a sample
S_IP, S_TID, S_TIME, S_ADDR, S_READ, S_CALLCHAIN, S_ID, S_CPU, S_PERIOD, S_STREAM_ID, S_RAW = (
    1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10)
S_STACK_USER = 1 << 13  # a copy of the user stack: callchains unwound with DWARF (--call-graph dwarf)
S_IDENTIFIER = 1 << 16
# read_format bits
R_TOTAL_TIME_ENABLED, R_TOTAL_TIME_RUNNING, R_ID, R_GROUP, R_LOST = 1, 2, 4, 8, 16
# record types
REC_MMAP, REC_COMM, REC_EXIT, REC_FORK, REC_SAMPLE, REC_MMAP2 = 1, 3, 4, 7, 9, 10
REC_FINISHED_ROUND, REC_COMPRESSED = 68, 81
MISC_COMM_EXEC = 1 << 13  # a COMM record written at an exec
