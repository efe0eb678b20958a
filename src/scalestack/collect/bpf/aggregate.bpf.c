// SPDX-License-Identifier: GPL-2.0
/* scalestack's in-kernel aggregator: per-thread criticality, running time and state times of one
 * process tree, kept online with O(1) work per scheduler event and no trace at all.
 *
 * Criticality (Du Bois et al., thesis §3.2) divides every instant among the threads running then.
 * With r(t) running threads of the tree and F(t) = ∫ dt / r(t) (fixed point, << FX_SHIFT), a
 * thread running over [a, b) adds F(b) - F(a): the tree keeps r and F, a thread remembers F at
 * switch-in and adds the difference at switch-out (the offline sweep's identity, shared/DESIGN.md).
 * F and the time of its last update change together under a tiny compare-and-swap lock
 * (sched_switch runs with interrupts off, so a holder never waits long unless the host deschedules
 * its vCPU; bpf_spin_lock is not allowed in tracing programs); r moves by atomic adds.
 *
 * SYNC_WAIT costs no extra probe: a thread that blocks while its saved user registers say it is
 * inside the futex (or futex_waitv) system call is waiting for a lock, barrier, condition or join.
 * Syscall tracepoints would put every system call of every task on the slow path.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

#define FX_SHIFT 16
#define ST_UNKNOWN 0
#define ST_RUNNING 1
#define ST_RUNNABLE 2
#define ST_SYNC 3
#define ST_IO 4
#define ST_SLEEP 5
#define ST_NEW 6
#define ST_DEAD 7
#define TASK_UNINTERRUPTIBLE_ 0x2
#define TASK_DEAD_ 0x80
#define TASK_NOLOAD_ 0x400

#if defined(__TARGET_ARCH_x86)
#define SYSCALL_NR(regs) ((regs)->orig_ax)
#define NR_FUTEX 202
#elif defined(__TARGET_ARCH_arm64)
#define SYSCALL_NR(regs) ((regs)->syscallno)
#define NR_FUTEX 98
#else
#error "scalestack's aggregator knows the syscall register of x86_64 and arm64 only"
#endif
#define NR_FUTEX_WAITV 449

struct thread {  /* loader.c reads these maps: keep its copy of this layout the same */
	__u64 crit_fx;   /* ∫ dt / r over its closed running intervals, ns << FX_SHIFT */
	__u64 ns[8];     /* closed time per state (index ST_*) */
	__u64 since;     /* start of the current state */
	__u64 f_in;      /* F at the current switch-in */
	__u64 kernel_out;  /* the kernel's own sum_exec_runtime at the last switch-out */
	__u64 rq_base;   /* the kernel's own run_delay when the thread was first seen */
	__u32 tgid;
	__u32 state;
	__u32 exited;
	__u32 switches;
	char comm[16];
};

struct global {
	__u64 lock;
	__u64 last;      /* when F was last brought up to date */
	__u64 F;         /* ∫ dt / r(t), ns << FX_SHIFT */
	__u64 r;         /* threads of the tree running now */
	__u64 busy_ns;   /* time with r > 0 */
	__u64 spins_failed;
	__u64 full;      /* threads not kept: table full */
	__u64 events;    /* events of the tree */
	__u64 miss_in;   /* switch-outs of a thread not known to be running */
	__u64 miss_out;  /* switch-ins of a thread already running */
	__u64 repaired;  /* running intervals whose switch-in was missed, charged at switch-out */
	__u64 f_corr;     /* pending corrections to F and busy_ns from switches taken without the lock */
	__u64 busy_corr;
	__u64 test_unlocked_every;  /* tests only (the loader's SCALESTACK_AGG_TEST_UNLOCKED_EVERY): every
				     * k-th switch takes the no-lock path, as if the holder were stalled */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct global);
} glob SEC(".maps");

static __always_inline int tracked(__u32 tgid)
{
	return bpf_map_lookup_elem(&tgids, &tgid) != 0;
}

static __always_inline struct thread *get_thread(struct global *g, struct task_struct *t, __u32 state)
{
	__u32 tid = t->pid;
	struct thread *s = bpf_map_lookup_elem(&threads, &tid);
	if (s)
		return s;
	struct thread fresh = {};
	fresh.tgid = t->tgid;
	fresh.state = state;
	fresh.since = bpf_ktime_get_ns();  /* read only for a new entry: clock reads cost in a VM */
	fresh.kernel_out = t->se.sum_exec_runtime;
	fresh.rq_base = t->sched_info.run_delay;
	bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), t->comm);
	if (bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST) && g)
		__sync_fetch_and_add(&g->full, 1);
	return bpf_map_lookup_elem(&threads, &tid);
}

/* Close the current state of s at `now` (unknown and new are not counted). */
static __always_inline void close_state(struct thread *s, __u64 now)
{
	__u32 st = s->state;
	if (st >= ST_RUNNABLE && st <= ST_SLEEP && now > s->since)
		s->ns[st & 7] += now - s->since;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	int pt = prev->pid && tracked(prev->tgid);
	int nt = next->pid && tracked(next->tgid);
	if (!pt && !nt)
		return 0;
	__u32 zero = 0;
	struct global *g = bpf_map_lookup_elem(&glob, &zero);
	if (!g)
		return 0;
	struct thread *ps = pt ? get_thread(g, prev, ST_UNKNOWN) : 0;
	struct thread *ns = nt ? get_thread(g, next, ST_UNKNOWN) : 0;
	int out = ps && ps->state == ST_RUNNING;
	int in = ns && ns->state != ST_RUNNING;
	__u64 now = 0, F = 0;
	int locked = 0;
	for (int i = 0; i < 4096; i++) {
		if (__sync_val_compare_and_swap(&g->lock, 0, 1) == 0) {
			locked = 1;
			break;
		}
	}
	if (locked && g->test_unlocked_every && g->events % g->test_unlocked_every == 0) {
		/* fault injection for the tests: take the path of a stalled holder */
		__sync_val_compare_and_swap(&g->lock, 1, 0);
		locked = 0;
	}
	now = bpf_ktime_get_ns();  /* read under the lock: F only moves forward */
	int dr = in - out;
	if (out && g->r == 0)
		dr = in;
	if (locked) {
		__u64 r = g->r, last = g->last;  /* once: a switch taken without the lock may move r */
		if (r > 0 && now > last) {
			g->F += ((now - last) << FX_SHIFT) / r;
			g->busy_ns += now - last;
		}
		if (now > last)
			g->last = now;
		g->F += __sync_lock_test_and_set(&g->f_corr, 0);
		g->busy_ns += __sync_lock_test_and_set(&g->busy_corr, 0);
		F = g->F;
		g->events += 1;
		if (ps && !out && ps->state != ST_UNKNOWN)
			g->miss_in += 1;
		if (ns && !in)
			g->miss_out += 1;
	} else {
		/* The spin gave up: in a VM the holder's vCPU can be descheduled by the host for
		 * milliseconds mid-update. Skipping the switch would lose the threads' states (they then
		 * show as missed switch-ins), so it goes on without the lock. F here is the published F
		 * brought up to now, plus the corrections pending. Since r changes here but the next holder
		 * integrates from the published `last` at the new r, the difference for [last, now) is
		 * left pending in f_corr and busy_corr (two's complement adds): with consistent reads the
		 * result is exact (the tests force this path); against a holder stalled mid-update it is off
		 * by that holder's own few ns since `last` at 1/r_old - 1/r_new. */
		__sync_fetch_and_add(&g->spins_failed, 1);
		__u64 last = g->last, r = g->r, d = now > last ? now - last : 0;
		__u64 r_new = r + (__u64)(__s64)dr;
		__u64 w_old = r > 0 ? (d << FX_SHIFT) / r : 0, w_new = r_new > 0 ? (d << FX_SHIFT) / r_new : 0;
		F = g->F + g->f_corr + w_old;
		if (w_old != w_new)
			__sync_fetch_and_add(&g->f_corr, w_old - w_new);
		if (r > 0 && r_new == 0)
			__sync_fetch_and_add(&g->busy_corr, d);
		else if (r == 0 && r_new > 0)
			__sync_fetch_and_add(&g->busy_corr, (__u64)0 - d);
		__sync_fetch_and_add(&g->events, 1);
		if (ps && !out && ps->state != ST_UNKNOWN)
			__sync_fetch_and_add(&g->miss_in, 1);
		if (ns && !in)
			__sync_fetch_and_add(&g->miss_out, 1);
	}
	/* r moves atomically, with or without the lock: a switch taken without it may run meanwhile */
	if (dr)
		__sync_fetch_and_add(&g->r, (__u64)(__s64)dr);
	if (locked)
		__sync_val_compare_and_swap(&g->lock, 1, 0);

	if (ps) {
		/* Running time is the kernel's own charge (sum_exec_runtime: what schedstat and perf's
		 * sched_stat_runtime report) since the thread's last switch-out: the tracepoint's
		 * instants differ from the scheduler's clock by the switch's own work (a few µs per
		 * switch), and a switch-in the tracepoint never reported is still charged.
		 * Criticality stays on the tracepoint's clock, so the C_j add up to the busy time. */
		__u64 run = prev->se.sum_exec_runtime, dk = run - ps->kernel_out;
		if (out) {
			if (F > ps->f_in)  /* an F estimated without the lock can run ahead of the next one */
				ps->crit_fx += F - ps->f_in;
		} else if (ps->state != ST_UNKNOWN && g->r + 1 > 0) {
			/* a switch-in we never saw: its share at the parallelism of this instant */
			ps->crit_fx += (dk << FX_SHIFT) / (g->r + 1);
			__sync_fetch_and_add(&g->repaired, 1);
		}
		if (ps->state != ST_UNKNOWN || out)
			ps->ns[ST_RUNNING] += dk;
		ps->kernel_out = run;
		/* Run-queue time likewise: the kernel's run_delay (schedstat's second figure) counts every
		 * wait up to this run's start on the scheduler's clock; the switch-in closed the wait on the
		 * tracepoint's clock, 2-5 µs later, which over thousands of waits drifted by milliseconds.
		 * At the switch-in itself run_delay is not updated yet (sched_info_arrive comes after the
		 * tracepoint), so the switch-in adds nothing and the wait is counted here, one run later:
		 * the counter only grows, and window differences stay >= 0. */
		__u64 rd = prev->sched_info.run_delay;
		if (rd >= ps->rq_base)
			ps->ns[ST_RUNNABLE] = rd - ps->rq_base;
		__u32 st;
		if (prev_state == 0) {
			st = ST_RUNNABLE;  /* preempted: still wants a CPU */
		} else if (prev_state & TASK_DEAD_) {
			st = ST_DEAD;
		} else {
			struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(prev);
			long nr = regs ? SYSCALL_NR(regs) : -1;
			if (nr == NR_FUTEX || nr == NR_FUTEX_WAITV)
				st = ST_SYNC;
			else if ((prev_state & TASK_UNINTERRUPTIBLE_) && !(prev_state & TASK_NOLOAD_))
				st = ST_IO;
			else
				st = ST_SLEEP;
		}
		ps->state = st;
		ps->since = now;
		ps->switches += 1;
	}
	if (ns && in) {
		if (ns->state != ST_RUNNABLE)  /* a run-queue wait is counted from run_delay at the switch-out */
			close_state(ns, now);
		ns->state = ST_RUNNING;
		ns->since = now;
		ns->f_in = F;
	}
	return 0;
}

static __always_inline int wakeup(struct task_struct *p, __u32 new_state)
{
	if (!tracked(p->tgid))
		return 0;
	__u32 zero = 0;
	struct global *g = bpf_map_lookup_elem(&glob, &zero);
	struct thread *s = get_thread(g, p, new_state);
	__u64 now = bpf_ktime_get_ns();
	if (!s)
		return 0;
	__u32 st = s->state;
	if (st == ST_RUNNING || st == ST_RUNNABLE)
		return 0;
	/* only if no switch-in changed the state meanwhile: never overwrite RUNNING */
	if (__sync_val_compare_and_swap(&s->state, st, ST_RUNNABLE) != st)
		return 0;
	if (st >= ST_RUNNABLE && st <= ST_SLEEP && now > s->since)
		s->ns[st & 7] += now - s->since;
	s->since = now;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	return wakeup(p, ST_UNKNOWN);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	return wakeup(p, ST_NEW);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	if (!tracked(ptgid))
		return 0;
	if (ctgid != ptgid) {
		__u32 one = 1;
		bpf_map_update_elem(&tgids, &ctgid, &one, BPF_ANY);
	}
	__u32 zero = 0;
	struct global *g = bpf_map_lookup_elem(&glob, &zero);
	struct thread *s = get_thread(g, child, ST_NEW);
	if (s && s->state != ST_NEW && s->exited) {  /* a reused tid: start over */
		struct thread fresh = {};
		__u32 tid = child->pid;
		fresh.tgid = ctgid;
		fresh.state = ST_NEW;
		fresh.since = bpf_ktime_get_ns();
		bpf_probe_read_kernel_str(fresh.comm, sizeof(fresh.comm), child->comm);
		bpf_map_update_elem(&threads, &tid, &fresh, BPF_ANY);
	}
	return 0;
}

/* Names change after creation (thread pools, JVMs: prctl/pthread_setname_np). */
SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *task, const char *comm)
{
	if (!tracked(task->tgid))
		return 0;
	__u32 tid = task->pid;
	struct thread *s = bpf_map_lookup_elem(&threads, &tid);
	if (s)
		bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), comm);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	if (!tracked(p->tgid))
		return 0;
	__u32 tid = p->pid;
	struct thread *s = bpf_map_lookup_elem(&threads, &tid);
	if (s) {
		s->exited = 1;
		bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), p->comm);
	}
	return 0;
}
