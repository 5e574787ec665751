// libFuzzer targets for every parser of kernel text and the config loader. Each target is built
// from this file with one KPATH_FUZZ_<NAME> defined (tests/fuzz/CMakeLists.txt). A parser may
// reject any input; it must never crash, hang, read out of bounds or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "daemon/config.h"
#include "probes/kernel/kernel_features.h"
#include "probes/procfs/interrupts.h"
#include "probes/procfs/meminfo.h"
#include "probes/procfs/stat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
#if defined(KPATH_FUZZ_MEMINFO)
  (void)kpath::ParseMeminfo(text);
#elif defined(KPATH_FUZZ_INTERRUPTS)
  (void)kpath::ParseInterrupts(text);
#elif defined(KPATH_FUZZ_STAT)
  (void)kpath::ParseProcStat(text);
#elif defined(KPATH_FUZZ_TRACEPOINT_FORMAT)
  (void)kpath::ParseTracepointFormat(text);
#elif defined(KPATH_FUZZ_CPU_LIST)
  (void)kpath::ParseCpuList(text);
#elif defined(KPATH_FUZZ_KALLSYMS)
  if (auto index = kpath::KallsymsIndex::Parse(text); index.ok()) {
    (void)index->ResolveFunction("pcpu_alloc");
    (void)index->Symbolize(size * 0x1000003ULL);
  }
#elif defined(KPATH_FUZZ_CONFIG)
  (void)kpath::ParseConfig(text, "fuzz.yaml");
#else
#error "define one KPATH_FUZZ_<TARGET>"
#endif
  return 0;
}
