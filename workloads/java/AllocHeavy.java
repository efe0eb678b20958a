// THREADS worker threads each build and drop many short-lived objects, so the JVM's garbage
// collector runs often: a managed program whose trace shows GC and JIT threads beside the
// application's.  Usage: java AllocHeavy [THREADS=2] [MILLIONS=20]
import java.util.ArrayList;
import java.util.List;

public class AllocHeavy {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        long total = (args.length > 1 ? Long.parseLong(args[1]) : 20) * 1_000_000L;
        long perThread = total / threads;
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
            }, "worker-" + t);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) w.join();
        System.out.println("done " + sink);
    }
}
