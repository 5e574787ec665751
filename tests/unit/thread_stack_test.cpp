#include "daemon/web/thread_stack.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace {

struct Result {
  size_t released = 0;
  size_t resident_before = 0;  // pages of the stack's lower half
  size_t resident_after = 0;
};

size_t ResidentPages(uintptr_t begin, uintptr_t end) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((end - begin) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in_core) n += c & 1;
  return n;
}

// Touches `bytes` of stack below its caller, a byte a page, as a deep call does.
__attribute__((noinline)) int TouchStack(size_t bytes) {
  volatile char buffer[16384];
  for (size_t i = 0; i < sizeof(buffer); i += 1024) buffer[i] = 1;
  const int deeper = bytes > sizeof(buffer) ? TouchStack(bytes - sizeof(buffer)) : 0;
  return deeper + buffer[0];  // not a tail call: every frame stays until the deepest returns
}

void* Run(void* arg) {
  auto* result = static_cast<Result*>(arg);
  pthread_attr_t attr;
  void* addr = nullptr;
  size_t size = 0;
  pthread_getattr_np(pthread_self(), &attr);
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  const auto low = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t half = low + size / 2;
  TouchStack(size * 3 / 4);
  result->resident_before = ResidentPages(low, half);
  result->released = kpath::ReleaseStackBelowCaller();
  result->resident_after = ResidentPages(low, half);
  return nullptr;
}

}  // namespace

TEST_CASE("a thread gives back the stack its deepest call touched", "[thread_stack]") {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  Result result;
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attr, Run, &result) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  CHECK(result.resident_before >= 32);  // the lower half's upper half, at least
  CHECK(result.released >= (1 << 19));
  CHECK(result.resident_after == 0);
  // The main thread's stack grows on demand: left alone.
  CHECK(kpath::ReleaseStackBelowCaller() == 0);
}
