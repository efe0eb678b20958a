// SPDX-License-Identifier: GPL-2.0
/* scalestack's eBPF trace collector: the scheduler and futex events `scalestack record` needs,
 * system-wide, as fixed 80-byte records in a BPF ring buffer (read by trace_loader.c into a file).
 *
 * Why a third collector: on these VMs perf and tracefs lose switches without any LOST record
 * (docs/top.md, "Missed switch-ins"): tracefs lost 2 054 of ~5 000 switches out of idle in one
 * run that a BPF program on the same tracepoint received. Perf and ftrace write through their
 * own buffers and recursion guards; BTF tracepoint programs (tp_btf) are called directly by the
 * tracepoint. Every event here is a tp_btf program; the futex calls come from the raw syscall
 * tracepoints, filtered here by number (the per-syscall tracepoints go through perf's buffer).
 *
 * The record's fields follow RawEvents (scalestack/events.py): kind, arg0..2 and two comms, in
 * the meaning the tracefs and perf.data readers give them; tid/pid are the context task's
 * thread and thread-group ids (a real pid, which tracefs does not give).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* scalestack.events.Kind */
#define K_SWITCH 1
#define K_WAKEUP 2
#define K_WAKEUP_NEW 3
#define K_FORK 4
#define K_EXEC 5
#define K_EXIT 6
#define K_RENAME 7
#define K_FUTEX_ENTER 8
#define K_FUTEX_EXIT 9
#define K_FUTEX_WAITV 10
#define K_STAT_RUNTIME 15
#define K_MIGRATE 16
#define K_RUN_DELAY 18

#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#define SYSCALL_ARG0(regs) ((regs)->di)
#define SYSCALL_ARG1(regs) ((regs)->si)
#define NR_FUTEX 202
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs) ((regs)->syscallno)
#define SYSCALL_ARG0(regs) ((regs)->orig_x0)
#define SYSCALL_ARG1(regs) ((regs)->regs[1])
#define NR_FUTEX 98
#else
#error "scalestack's trace collector knows the syscall registers of x86_64 and arm64 only"
#endif
#define NR_FUTEX_WAITV 449

struct rec {  /* keep scalestack/collect/ebpf.py's RECORD dtype the same */
	__u64 time;
	__s64 a0, a1, a2;
	__s32 cpu, tid, pid;
	__u32 kind;
	char c0[16];
	char c1[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);  /* the loader resizes it (--buffer) before loading */
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline struct rec *begin(__u32 kind)
{
	struct rec *r = bpf_ringbuf_reserve(&events, sizeof(struct rec), 0);
	if (!r) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&lost, &zero);
		if (n)
			*n += 1;
		return 0;
	}
	__u64 id = bpf_get_current_pid_tgid();
	r->time = bpf_ktime_get_ns();
	r->cpu = bpf_get_smp_processor_id();
	r->tid = (__s32)id;
	r->pid = (__s32)(id >> 32);
	r->kind = kind;
	r->a0 = r->a1 = r->a2 = 0;
	__u64 *c = (__u64 *)r->c0;  /* both comms zeroed whole: the reserved space is not */
	c[0] = c[1] = c[2] = c[3] = 0;
	return r;
}

static __always_inline void commit(struct rec *r)
{
	/* no wakeup per event: the loader drains on its own clock */
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

static __always_inline void comm(char *dst, const char *src)
{
	bpf_probe_read_kernel_str(dst, 16, src);
}

/* The prev_state the sched_switch trace event reports (__trace_sched_switch_state): one bit per
 * state letter, the highest state bit set; 0 when preempted (RawEvents: 0 = runnable). */
static __always_inline __s64 report_bits(bool preempt, unsigned int state, struct task_struct *p)
{
	if (preempt)
		return 0;
	__u32 st = (state | (__u32)p->exit_state) & 0x7f;  /* TASK_REPORT */
	if ((state & 0x402) == 0x402)                      /* TASK_IDLE */
		st = 0x80;
	if (state & 0x1000)                                /* TASK_RTLOCK_WAIT */
		st = 0x2;
	__s64 bit = 0;
	for (int i = 7; i >= 0; i--) {
		if (st & (1u << i)) {
			bit = 1 << i;
			break;
		}
	}
	return bit;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	struct rec *r = begin(K_SWITCH);
	if (!r)
		return 0;
	r->a0 = prev->pid;
	r->a1 = next->pid;
	r->a2 = report_bits(preempt, prev_state, prev);
	comm(r->c0, prev->comm);
	comm(r->c1, next->comm);
	commit(r);
	if (!prev->pid)
		return 0;
	/* The kernel's own run-queue account of prev: its run delay so far and its number of
	 * arrivals on a CPU, both final for the run now ending (sched_info_arrive ran at its
	 * switch-in). The state builder sizes each run-queue wait from the difference. */
	r = begin(K_RUN_DELAY);
	if (!r)
		return 0;
	r->a0 = prev->pid;
	r->a1 = prev->sched_info.run_delay;
	r->a2 = prev->sched_info.pcount;
	commit(r);
	return 0;
}

/* A record about one task p (the tracepoint's "pid" field) with its comm and up to two figures. */
static __always_inline int task_event(__u32 kind, struct task_struct *p, __s64 a1, __s64 a2)
{
	struct rec *r = begin(kind);
	if (!r)
		return 0;
	r->a0 = p->pid;
	r->a1 = a1;
	r->a2 = a2;
	comm(r->c0, p->comm);
	commit(r);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	return task_event(K_WAKEUP, p, p->thread_info.cpu, 0);  /* task_cpu(p): the target CPU */
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	return task_event(K_WAKEUP_NEW, p, p->thread_info.cpu, 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	struct rec *r = begin(K_FORK);
	if (!r)
		return 0;
	r->a0 = parent->pid;
	r->a1 = child->pid;
	comm(r->c0, child->comm);
	comm(r->c1, parent->comm);
	commit(r);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	/* comm: the new program's name (tracefs gives the whole filename) */
	return task_event(K_EXEC, p, old_pid, 0);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	return task_event(K_EXIT, p, 0, 0);
}

SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *task, const char *newcomm)
{
	struct rec *r = begin(K_RENAME);
	if (!r)
		return 0;
	r->a0 = task->pid;
	comm(r->c0, newcomm);
	comm(r->c1, task->comm);  /* not yet renamed when the tracepoint fires */
	commit(r);
	return 0;
}

SEC("tp_btf/sched_stat_runtime")
int BPF_PROG(on_runtime, struct task_struct *p, u64 runtime)
{
	return task_event(K_STAT_RUNTIME, p, runtime, 0);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(on_migrate, struct task_struct *p, int dest_cpu)
{
	return task_event(K_MIGRATE, p, p->thread_info.cpu, dest_cpu);  /* from task_cpu(p) */
}

SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long id)
{
	if (id != NR_FUTEX && id != NR_FUTEX_WAITV)
		return 0;
	struct rec *r = begin(id == NR_FUTEX ? K_FUTEX_ENTER : K_FUTEX_WAITV);
	if (!r)
		return 0;
	r->a0 = SYSCALL_ARG0(regs);  /* uaddr, or the waiters array */
	r->a1 = SYSCALL_ARG1(regs);  /* op, or the number of futexes */
	commit(r);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit, struct pt_regs *regs, long ret)
{
	long id = SYSCALL_NR(regs);
	if (id != NR_FUTEX && id != NR_FUTEX_WAITV)
		return 0;
	struct rec *r = begin(K_FUTEX_EXIT);
	if (!r)
		return 0;
	r->a0 = ret;
	commit(r);
	return 0;
}
