// THREADS worker threads each build and drop many short-lived objects, so the JVM's garbage
// collector runs often: a managed program whose trace shows GC and JIT threads beside the
// application's.  Usage: java AllocHeavy [THREADS=2] [MILLIONS=20]
// When the environment variable SCHEDSTAT_OUT names a file, each worker appends
// "tid on_cpu_ns runqueue_ns monotonic_ns" just before it ends: its kernel thread id and run-queue
// time from /proc/thread-self, its CPU time from the JVM (exact, like CLOCK_THREAD_CPUTIME_ID), and
// when it read them.
import java.io.FileWriter;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

public class AllocHeavy {
    static volatile long sink;

    static synchronized void reportSelf(String out) {
        try {
            String stat = new String(Files.readAllBytes(Paths.get("/proc/thread-self/stat")));
            String tid = stat.substring(0, stat.indexOf(' '));
            // both figures with no preemption in between (retried when the clock moved >200 us),
            // stamped with CLOCK_MONOTONIC (System.nanoTime on Linux), like workloads/c/schedstat.h
            String[] sched = null;
            long cpu = 0, t1 = 0;
            for (int tries = 0; tries < 20; tries++) {
                long t0 = System.nanoTime();
                sched = new String(Files.readAllBytes(Paths.get("/proc/thread-self/schedstat"))).trim().split(" ");
                cpu = ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
                t1 = System.nanoTime();
                if (t1 - t0 < 200_000) break;
            }
            try (FileWriter w = new FileWriter(out, true)) {
                w.write(tid + " " + cpu + " " + sched[1] + " " + t1 + "\n");
            }
        } catch (Exception e) {
            System.err.println("AllocHeavy: cannot report: " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        long total = (args.length > 1 ? Long.parseLong(args[1]) : 20) * 1_000_000L;
        long perThread = total / threads;
        String out = System.getenv("SCHEDSTAT_OUT");
        if (out != null) {  // load the reporting classes now, so no worker pays for it after its reading
            ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
            Files.readAllBytes(Paths.get("/proc/thread-self/schedstat"));
            new FileWriter(out, true).close();
        }
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                long acc = 0;
                List<int[]> keep = new ArrayList<>();
                for (long i = 0; i < perThread; i++) {
                    int[] a = new int[8 + (int) (i & 15)];
                    a[0] = (int) i;
                    acc += a[0] + a.length;
                    if ((i & 1023) == 0) {
                        keep.add(a);
                        if (keep.size() > 4096) keep.clear();
                    }
                }
                sink += acc;
                if (out != null) reportSelf(out);
            }, "worker-" + t);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) w.join();
        System.out.println("done " + sink);
    }
}
