#include "daemon/web/thread_stack.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace kpath {
namespace {

// Room left below the caller's frame for this function's own frame and the madvise call.
constexpr uintptr_t kMarginBytes = 4096;

struct StackBounds {
  bool looked = false;
  uintptr_t low = 0;  // lowest usable address (above the guard page); 0: unknown
  uintptr_t high = 0;
};

thread_local StackBounds bounds;

}  // namespace

__attribute__((noinline)) size_t ReleaseStackBelowCaller() {
  if (!bounds.looked) {
    bounds.looked = true;
    pthread_attr_t attr;
    if (getpid() != static_cast<pid_t>(syscall(SYS_gettid)) &&
        pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        bounds.low = reinterpret_cast<uintptr_t>(addr);
        bounds.high = bounds.low + size;
      }
      pthread_attr_destroy(&attr);
    }
  }
  // This frame, on the real stack even where a sanitizer keeps locals elsewhere.
  const auto frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (bounds.low == 0 || frame <= bounds.low || frame > bounds.high) return 0;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (frame - bounds.low <= kMarginBytes + page) return 0;
  const uintptr_t end = (frame - kMarginBytes) & ~(page - 1);
  const uintptr_t begin = (bounds.low + page - 1) & ~(page - 1);
  if (end <= begin) return 0;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

}  // namespace kpath
