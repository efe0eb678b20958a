"""Software-only speedup stacks on real hardware (Eklov, Nikoleris, Hagersten).

Threads are timed by an LD_PRELOAD shim (`c/shim.c`), isolated one at a time at barriers, and
run next to a cache *pirate* (`c/pirate.c`) that holds a known share of the last-level cache.
`stack.py` turns the measured times into the stack N = cache + memory + sync + measured;
`build.py` compiles the C parts on first use. Spec: ../shared/spec/eklov-speedup-stacks.md.
"""
