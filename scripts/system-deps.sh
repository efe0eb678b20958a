#!/usr/bin/env bash
# Install the system tools scalestack's tests use, where they are missing and we may (root + apt).
# perf records, gcc builds the test programs, java runs the managed workloads, chromium opens the
# HTML report in a test; clang, libbpf-dev and bpftool build the eBPF collector (`record`'s default
# where they are) and aggregator (`scalestack top`, `record --aggregate`), tmux drives `top` in a test, bpftrace reads each thread's final kernel
# figures for `record`'s self-check, xz and zstd are real multi-threaded programs for
# benchmarks/native_stacks.py. Without root this only says what is missing;
# those tests then skip.
set -u
need=()
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v clang >/dev/null 2>&1 || need+=(clang)
[ -e /usr/include/bpf/libbpf.h ] || need+=(libbpf-dev)
command -v bpftool >/dev/null 2>&1 || [ -x /usr/sbin/bpftool ] || need+=(bpftool)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v bpftrace >/dev/null 2>&1 || need+=(bpftrace)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || echo "system-deps: could not install ${need[*]}; the tests that need them will be skipped"
else
  echo "system-deps: missing ${need[*]} (not root: the tests that need them will be skipped)"
fi
exit 0
