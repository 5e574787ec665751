// /proc/interrupts as data. The parser is a pure function of the file's text so it runs against
// fixtures from any kernel and architecture.
//
// The file is a table: a header naming the online CPUs ("CPU0 CPU1 ..."), then one row per
// interrupt source: "<name>:", one count per CPU in the header (or a single count for
// system-wide rows such as x86's ERR and MIS), then a free-text description ("IO-APIC 5-edge
// ACPI:Ged", "TLB shootdowns"). x86 writes its per-CPU IPI rows under short names (LOC, RES,
// CAL, TLB); arm64 writes IPI0..IPI7 and has no TLB row at all, because it invalidates TLBs with
// broadcast TLBI instructions rather than interrupts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kpath {

struct InterruptRow {
  std::string name;              // without the colon: "24", "LOC", "TLB", "IPI0"
  std::vector<uint64_t> counts;  // one per CPU column, or a single system-wide count
  std::string description;       // "TLB shootdowns"; "" when the row has none
  uint64_t Total() const;
};

class Interrupts {
 public:
  Interrupts(std::vector<std::string> cpus, std::vector<InterruptRow> rows)
      : cpus_(std::move(cpus)), rows_(std::move(rows)) {}

  // The header's CPU names in order ("CPU0", "CPU1"): only online CPUs are listed.
  const std::vector<std::string>& cpus() const { return cpus_; }
  const std::vector<InterruptRow>& rows() const { return rows_; }
  const InterruptRow* Find(std::string_view name) const;

  // x86's "TLB" row summed over CPUs: TLB shootdown IPIs received. nullopt when the kernel has
  // no such row (any architecture but x86, or a kernel built without SMP).
  std::optional<uint64_t> TlbShootdowns() const;

 private:
  std::vector<std::string> cpus_;
  std::vector<InterruptRow> rows_;
};

// Parses the text of /proc/interrupts. InvalidArgument, naming the 1-based line, for a missing
// or malformed header, a row without "name:", a count that overflows 64 bits, or a repeated row
// name. Never throws.
absl::StatusOr<Interrupts> ParseInterrupts(std::string_view text);

}  // namespace kpath
