// C++ frames named as GDB's bt names them (tests/test_cxx_names.py):
// threads of std::thread, templates, lambdas, namespaces (an anonymous
// one), an inlined template method, a minimal symbol of libstdc++
// (std::thread::join()).  Every call is followed by work, so that none
// is a tail call.  Prints "ready" once both threads are about to wait.
#include <atomic>
#include <cstdio>
#include <thread>
#include <unistd.h>
#include <vector>

namespace app {
volatile int sink;
std::atomic<int> waiting{0};

__attribute__((noinline)) int wait_here(int n) {
  waiting.fetch_add(1);
  pause();
  sink = n;
  return sink + 1;
}

template <typename T> struct Worker {
  T value;
  // inlined into run
  inline int step(int i) { int r = wait_here(i + (int)value); sink = r; return r * 2; }
  __attribute__((noinline)) int run(int n) { int r = step(n); sink = r; return r + 1; }
};

namespace {
template <typename T> __attribute__((noinline)) int start(T v, int n) {
  auto body = [v](int k) __attribute__((noinline)) {
    Worker<T> worker{v};
    int r = worker.run(k);
    sink = r;
    return r + 1;
  };
  int r = body(n);
  sink = r;
  return r + 1;
}
}  // namespace

__attribute__((noinline)) void pool() {
  std::vector<std::thread> threads;
  threads.emplace_back([] { sink = start<double>(1.5, 1); });
  threads.emplace_back([] { sink = start<long unsigned int>(2, 2); });
  while (waiting.load() < 2) usleep(1000);
  usleep(20000);  // both in pause()
  std::puts("ready");
  std::fflush(stdout);
  for (auto &thread : threads) thread.join();
  sink = 0;
}
}  // namespace app

int main(int argc, char **argv) {
  app::pool();
  std::printf("%d %d\n", app::sink, argc);
  return 0;
}
