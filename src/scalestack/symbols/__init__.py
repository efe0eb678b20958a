"""Symbols for addresses: ELF symbol tables of the binaries a process mapped (`elf`), and names for
the futex words its threads wait on (`locks`): a global lock by its symbol, the CPython GIL by
name, a heap lock by the code that waits on it. Imports only the standard library, pyelftools and
cxxfilt."""
