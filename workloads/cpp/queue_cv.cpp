// A producer hands items to consumers through a std::deque guarded by a std::mutex and a
// std::condition_variable; the producer's work per item is the bottleneck, so the consumers wait
// on the condition variable for work, not on a critical section.
// Usage: queue_cv ITEMS PRODUCER_WORK CONSUMER_WORK CONSUMERS
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
static std::mutex m; static std::condition_variable cv; static std::deque<long> q; static bool done = false;
static volatile double sink;
__attribute__((noinline)) double crunch(long x, long n) { double s = 0; for (long i = 0; i < n; i++) s += (double)((x + i) & 1023) * 0.5; return s; }
void producer(long items, long work) { for (long i = 0; i < items; i++) { double v = crunch(i, work); { std::lock_guard<std::mutex> g(m); q.push_back((long)v); } cv.notify_one(); } { std::lock_guard<std::mutex> g(m); done = true; } cv.notify_all(); }
void consumer(long work) { for (;;) { long v; { std::unique_lock<std::mutex> g(m); cv.wait(g, []{ return !q.empty() || done; }); if (q.empty()) return; v = q.front(); q.pop_front(); } sink = crunch(v, work); } }
int main(int argc, char** argv) { long items = atol(argv[1]), pw = atol(argv[2]), cw = atol(argv[3]); int nc = atoi(argv[4]);
  std::vector<std::thread> ts; ts.emplace_back(producer, items, pw); for (int i = 0; i < nc; i++) ts.emplace_back(consumer, cw);
  for (auto& t : ts) t.join(); printf("%zu\n", q.size()); }
