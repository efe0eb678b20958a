// A Java program with a fixed thread pool (issue 27): main() starts the JVM's serial work (class
// loading, JIT warm-up of a serial prologue), submits THREADS equal tasks to
// Executors.newFixedThreadPool(THREADS), waits for them, then runs a serial epilogue. The thread
// that runs main() is not the launcher's first thread, which only waits for it.
// Usage: java PoolWork [THREADS=2] [UNITS=400] [SERIAL_UNITS=30]; a unit is ~1 ms of arithmetic.
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

public class PoolWork {
    static volatile double sink;

    static void unit() {
        double x = 1.0;
        for (int i = 0; i < 400_000; i++) x = x * 1.0000001 + 1e-9;
        sink = x;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int units = args.length > 1 ? Integer.parseInt(args[1]) : 400;
        int serial = args.length > 2 ? Integer.parseInt(args[2]) : 30;
        for (int u = 0; u < serial / 2; u++) unit();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int share = units / threads;
            done.add(pool.submit(() -> { for (int u = 0; u < share; u++) unit(); }));
        }
        for (Future<?> f : done) f.get();
        pool.shutdown();
        for (int u = 0; u < serial - serial / 2; u++) unit();
    }
}
