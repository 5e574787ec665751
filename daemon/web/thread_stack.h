// Resident memory of threads that serve a request now and then (civetweb's workers): a thread's
// stack keeps every page it has ever touched until the thread ends, so each worker that once
// served a scrape held its deepest call's stack (~20 KiB: civetweb's buffers on the stack,
// serialisation, gzip) for good, 128 workers' worth once every worker had served one.
#pragma once

#include <cstddef>

namespace kpath {

// Gives the pages of the calling thread's stack below the caller's frame back to the kernel
// (madvise MADV_DONTNEED: they read as zeros when touched again, as a fresh stack does). Call it
// where the thread is shallow and about to wait. Returns the bytes of stack released (resident
// or not); 0 on the main thread (its stack grows on demand) or when the bounds are unknown.
size_t ReleaseStackBelowCaller();

}  // namespace kpath
