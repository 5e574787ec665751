// The percpu probe's live-allocation table (probes/percpu/live_table.bpf.h), the lock-free code
// every percpu allocation and free runs through, driven step by step through BPF_PROG_TEST_RUN
// (tests/bpf/live_table_test.bpf.c) and checked slot by slot: where each pointer lands, what
// moves to the spill part and when, what a full table refuses, a free that comes while its
// pointer moves, and the balance of bytes by caller. Root only (loading BPF); each case loads a
// fresh object, attaches nothing and leaves nothing behind.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "live_table_test.skel.h"
#include "probes/percpu/live_table.h"

namespace {

// 32 spill slots: every probe sequence (PERCPU_LIVE_PROBES) covers the whole spill part, so it
// holds exactly 32 pointers whatever their hashes.
constexpr uint32_t kSpillBits = 5;
constexpr uint32_t kSpillSlots = 1U << kSpillBits;
constexpr uint32_t kHot = PERCPU_LIVE_HOT_SLOTS;
constexpr uint32_t kBytes = 4096;

// The kernel accepts BPF atomics (compare-and-swap, Linux 5.12+), which the table needs: a
// two-instruction cmpxchg on the stack, loaded.
bool KernelHasBpfAtomics() {
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0},                // r0 = 0
      {BPF_ST | BPF_MEM | BPF_DW, 10, 0, -8, 0},                // *(u64 *)(r10 - 8) = 0
      {BPF_ALU64 | BPF_MOV | BPF_K, 1, 0, 0, 1},                // r1 = 1
      {BPF_STX | BPF_ATOMIC | BPF_DW, 10, 1, -8, BPF_CMPXCHG},  // cmpxchg(r10 - 8, r0, r1)
      {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0},                // r0 = 0
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0}};
  int fd = bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "kpath_atomics", "GPL", insns,
                         sizeof(insns) / sizeof(insns[0]), nullptr);
  if (fd < 0) return false;
  close(fd);
  return true;
}

struct SkelDeleter {
  void operator()(live_table_test_bpf* skel) const { live_table_test_bpf__destroy(skel); }
};

// The test object, loaded with a 32-slot spill part, and its maps read back.
class LiveTable {
 public:
  explicit LiveTable(live_table_test_bpf* skel) : skel_(skel) {}

  bool Insert(uint64_t ptr, uint64_t caller = 0, bool long_lived = false) {
    return Run(skel_->progs.test_insert, {ptr, kBytes, caller, long_lived ? 1U : 0U}) == 1;
  }
  bool Remove(uint64_t ptr) { return Run(skel_->progs.test_remove, {ptr, 0, 0, 0}) == 1; }
  bool MoveStart(uint32_t index) {
    return Run(skel_->progs.test_move_start, {index, 0, 0, 0}) == 1;
  }
  bool MoveFinish(uint64_t ptr) {
    return Run(skel_->progs.test_move_finish, {ptr, kBytes, 0, 0}) == 1;
  }
  // Long-lived allocations go straight to the spill part: fills it with kSpillSlots of them.
  std::vector<uint64_t> FillSpill() {
    std::vector<uint64_t> ptrs;
    for (uint32_t i = 0; i < kSpillSlots; ++i) {
      ptrs.push_back(0x600000000000ULL + 64 * i);
      REQUIRE(Insert(ptrs.back(), 0, true));
    }
    return ptrs;
  }
  // What user space does once per sampling interval.
  void SetEpoch(uint32_t epoch) {
    uint32_t zero = 0;
    REQUIRE(bpf_map_update_elem(bpf_map__fd(skel_->maps.live_epoch), &zero, &epoch, BPF_ANY) == 0);
  }

  percpu_live_slot Slot(uint32_t index) {
    percpu_live_slot slot{};
    REQUIRE(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.live_table), &index, &slot) == 0);
    return slot;
  }
  void SetSlot(uint32_t index, percpu_live_slot slot) {
    REQUIRE(bpf_map_update_elem(bpf_map__fd(skel_->maps.live_table), &index, &slot, BPF_ANY) == 0);
  }
  // The spill slots holding `ptr` (settled or not).
  int InSpill(uint64_t ptr) {
    int found = 0;
    for (uint32_t i = 0; i < kSpillSlots; ++i) found += (Slot(kHot + i).ptr & ~3ULL) == ptr;
    return found;
  }
  int64_t Spilled() {
    uint32_t zero = 0;
    int64_t spilled = 0;
    REQUIRE(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.live_spilled), &zero, &spilled) == 0);
    return spilled;
  }
  uint64_t Caller(uint32_t index) {
    uint64_t caller = 0;
    REQUIRE(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.live_callers), &index, &caller) == 0);
    return caller;
  }
  // live_balance for a caller index, summed over CPUs as the probe does.
  percpu_balance_value Balance(uint32_t caller_index) {
    std::vector<percpu_live_balance> per_cpu(static_cast<size_t>(libbpf_num_possible_cpus()));
    uint32_t zero = 0;
    REQUIRE(bpf_map_lookup_elem(bpf_map__fd(skel_->maps.live_balance), &zero, per_cpu.data()) == 0);
    percpu_balance_value sum{};
    for (const percpu_live_balance& cpu : per_cpu) {
      sum.allocated_bytes += cpu.callers[caller_index].allocated_bytes;
      sum.freed_bytes += cpu.callers[caller_index].freed_bytes;
    }
    return sum;
  }

 private:
  uint32_t Run(bpf_program* prog, std::vector<uint64_t> args) {
    bpf_test_run_opts opts{};
    opts.sz = sizeof(opts);
    opts.ctx_in = args.data();
    opts.ctx_size_in = static_cast<uint32_t>(args.size() * sizeof(uint64_t));
    REQUIRE(bpf_prog_test_run_opts(bpf_program__fd(prog), &opts) == 0);
    return opts.retval;
  }

  std::unique_ptr<live_table_test_bpf, SkelDeleter> skel_;
};

// The loaded table, or null (and a warning saying why) where the kernel cannot run it.
std::unique_ptr<LiveTable> OpenOrSkip() {
  if (geteuid() != 0) {
    WARN("skipped: loading BPF programs needs root");
    return nullptr;
  }
  if (!KernelHasBpfAtomics()) {
    WARN("skipped: this kernel has no BPF atomics (Linux 5.12+), which the live table needs");
    return nullptr;
  }
  live_table_test_bpf* skel = live_table_test_bpf__open();
  REQUIRE(skel != nullptr);
  auto table = std::make_unique<LiveTable>(skel);
  skel->rodata->live_table_bits = kSpillBits;
  REQUIRE(bpf_map__set_max_entries(skel->maps.live_table, kHot + kSpillSlots) == 0);
  REQUIRE(live_table_test_bpf__load(skel) == 0);
  return table;
}

// `n` percpu-like pointers (multiples of 16) whose hot home is the same, not at the hot part's
// end (so that its 8 slots are home .. home + 7).
std::vector<uint64_t> SameHotHome(size_t n, uint64_t from = 0x7f0000001000ULL) {
  uint64_t first = from;
  while (PERCPU_LIVE_HOT_HOME(first) > kHot - PERCPU_LIVE_HOT_PROBES) first += 16;
  std::vector<uint64_t> ptrs{first};
  for (uint64_t p = first + 16; ptrs.size() < n; p += 16) {
    if (PERCPU_LIVE_HOT_HOME(p) == PERCPU_LIVE_HOT_HOME(first)) ptrs.push_back(p);
  }
  return ptrs;
}

uint64_t Info(uint64_t ptr, uint32_t caller_index, uint32_t epoch) {
  return PERCPU_LIVE_INFO(ptr, kBytes, caller_index, epoch);
}

// A freshly loaded table (null where skipped), `n` pointers sharing a hot home, and that home.
struct Case {
  std::unique_ptr<LiveTable> table;
  std::vector<uint64_t> p;
  uint32_t home;
};
Case OpenWith(size_t n) {
  std::vector<uint64_t> p = SameHotHome(n);
  const uint32_t home = PERCPU_LIVE_HOT_HOME(p[0]);
  return {OpenOrSkip(), std::move(p), home};
}

}  // namespace

TEST_CASE("live table: an insert settles the pointer in its home slot, a free leaves a tombstone",
          "[live_table]") {
  auto [table, p, home] = OpenWith(1);
  if (!table) return;
  const uint64_t ptr = p[0];
  const uint64_t caller = 0xffffffff81234560ULL;
  uint32_t caller_index = PERCPU_LIVE_CALLER_HOME(caller);
  if (caller_index == 0) caller_index = 1;  // 0 stands for "unknown"
  table->SetEpoch(3);

  REQUIRE(table->Insert(ptr, caller));
  CHECK(table->Caller(caller_index) == caller);
  percpu_live_slot slot = table->Slot(home);
  CHECK(slot.ptr == ptr);
  CHECK(slot.info == Info(ptr, caller_index, 3));
  CHECK(table->Balance(caller_index).allocated_bytes == kBytes);
  CHECK(table->Balance(caller_index).freed_bytes == 0);
  CHECK(table->Spilled() == 0);

  CHECK(table->Remove(ptr));
  CHECK(table->Slot(home).ptr == PERCPU_LIVE_FREED);
  CHECK(table->Balance(caller_index).freed_bytes == kBytes);
  // Freed once only; a pointer never tracked is untracked (the probe's untracked-free count).
  CHECK_FALSE(table->Remove(ptr));
  CHECK_FALSE(table->Remove(ptr + 16));
  CHECK(table->Balance(caller_index).freed_bytes == kBytes);
  // The tombstone is reused.
  REQUIRE(table->Insert(ptr));
  CHECK(table->Slot(home).ptr == ptr);
  CHECK(table->Slot(home).info == Info(ptr, 0, 3));
  CHECK(table->Balance(0).allocated_bytes == kBytes);
}

TEST_CASE("live table: a full set of hot slots moves its oldest pointer to the spill part",
          "[live_table]") {
  auto [table, p, home] = OpenWith(11);
  if (!table) return;
  // Epoch 0: the first cache line fills, then the second.
  for (size_t i = 0; i < 8; ++i) {
    REQUIRE(table->Insert(p[i]));
    CHECK(table->Slot(home + i).ptr == p[i]);
  }
  CHECK(table->Spilled() == 0);
  // All eight taken and none older: the first of the oldest (p[0]) moves out for p[8].
  REQUIRE(table->Insert(p[8]));
  CHECK(table->Slot(home).ptr == p[8]);
  CHECK(table->InSpill(p[0]) == 1);
  CHECK(table->Spilled() == 1);
  // One interval later, the first line's oldest (p[8], the first at age 1) moves out.
  table->SetEpoch(1);
  REQUIRE(table->Insert(p[9]));
  CHECK(table->Slot(home).ptr == p[9]);
  CHECK(table->Slot(home).info == Info(p[9], 0, 1));
  CHECK(table->InSpill(p[8]) == 1);
  // Two intervals on: p[1] (age 2) is older than p[9] (age 1), so it moves, not the first slot.
  table->SetEpoch(2);
  REQUIRE(table->Insert(p[10]));
  CHECK(table->Slot(home).ptr == p[9]);
  CHECK(table->Slot(home + 1).ptr == p[10]);
  CHECK(table->InSpill(p[1]) == 1);
  CHECK(table->Spilled() == 3);
  CHECK(table->Balance(0).allocated_bytes == 11 * kBytes);

  // Every free finds its pointer, in either part; the balance returns to zero.
  for (uint64_t ptr : p) CHECK(table->Remove(ptr));
  CHECK(table->Spilled() == 0);
  CHECK(table->Balance(0).allocated_bytes == 11 * kBytes);
  CHECK(table->Balance(0).freed_bytes == 11 * kBytes);
  for (uint32_t i = 0; i < PERCPU_LIVE_HOT_PROBES; ++i) {
    CHECK(table->Slot(home + i).ptr == PERCPU_LIVE_FREED);
  }
  for (uint64_t ptr : p) CHECK(table->InSpill(ptr) == 0);
}

TEST_CASE("live table: a full table refuses the allocation and leaves every pointer settled",
          "[live_table]") {
  auto [table, p, home] = OpenWith(9);
  if (!table) return;
  // The spill part holds 32 long-lived pointers, whatever their hashes; the 33rd finds no room.
  const std::vector<uint64_t> spilled = table->FillSpill();
  CHECK(table->Spilled() == kSpillSlots);
  CHECK_FALSE(table->Insert(spilled.back() + 64, 0, true));
  CHECK(table->Balance(0).allocated_bytes == kSpillSlots * kBytes);

  // Eight pointers fill their hot slots; the ninth finds no room, now or an interval later
  // (its eviction is undone: the victim stays, settled).
  for (size_t i = 0; i < 8; ++i) REQUIRE(table->Insert(p[i]));
  CHECK_FALSE(table->Insert(p[8]));
  table->SetEpoch(1);
  CHECK_FALSE(table->Insert(p[8]));
  for (size_t i = 0; i < 8; ++i) {
    CHECK(table->Slot(home + i).ptr == p[i]);
    CHECK(table->Slot(home + i).info == Info(p[i], 0, 0));
  }
  CHECK(table->Spilled() == kSpillSlots);
  CHECK(table->Balance(0).allocated_bytes == (kSpillSlots + 8) * kBytes);
  CHECK_FALSE(table->Remove(p[8]));  // refused, so untracked

  // A free in the spill part makes room: the oldest hot pointer moves there.
  REQUIRE(table->Remove(spilled[0]));
  REQUIRE(table->Insert(p[8]));
  CHECK(table->Slot(home).ptr == p[8]);
  CHECK(table->InSpill(p[0]) == 1);
  CHECK(table->Spilled() == kSpillSlots);
}

TEST_CASE("live table: a caller without a free index makes the allocation untracked",
          "[live_table]") {
  std::unique_ptr<LiveTable> table = OpenOrSkip();
  if (!table) return;
  // Nine kernel addresses whose first live_callers slot is the same (and not near index 0).
  std::vector<uint64_t> callers;
  uint32_t first = 0;
  for (uint64_t c = 0xffffffff81000000ULL; callers.size() < PERCPU_LIVE_HOT_PROBES + 1; c += 16) {
    uint32_t h = PERCPU_LIVE_CALLER_HOME(c);
    if (callers.empty() && (h == 0 || h > PERCPU_LIVE_CALLERS - PERCPU_LIVE_HOT_PROBES)) continue;
    if (callers.empty()) first = h;
    if (h == first) callers.push_back(c);
  }
  for (uint32_t i = 0; i < PERCPU_LIVE_HOT_PROBES; ++i) {
    REQUIRE(table->Insert(0x500000000000ULL + 64 * i, callers[i]));
    CHECK(table->Caller(first + i) == callers[i]);
    CHECK(table->Balance(first + i).allocated_bytes == kBytes);
  }
  CHECK_FALSE(table->Insert(0x500000000000ULL + 64 * 8, callers[8]));
  // A known caller keeps its index.
  REQUIRE(table->Insert(0x500000000000ULL + 64 * 8, callers[3]));
  CHECK(table->Balance(first + 3).allocated_bytes == 2 * kBytes);
  // Index 0 stands for "unknown" (caller 0): a caller whose first slot is 0 takes the next.
  uint64_t at_zero = 0xffffffff82000000ULL;
  while (PERCPU_LIVE_CALLER_HOME(at_zero) != 0) at_zero += 16;
  REQUIRE(table->Insert(0x500000000000ULL + 64 * 9, at_zero));
  CHECK(table->Caller(0) == 0);
  CHECK(table->Caller(1) == at_zero);
  CHECK(table->Balance(1).allocated_bytes == kBytes);
}

TEST_CASE("live table: a free while its pointer moves takes it once, and the move gives way",
          "[live_table]") {
  auto [table, p, home] = OpenWith(9);
  if (!table) return;
  for (size_t i = 0; i < 8; ++i) REQUIRE(table->Insert(p[i]));

  SECTION("the free comes between marking and copying: the copy goes again") {
    REQUIRE(table->MoveStart(home));
    CHECK(table->Slot(home).ptr == (p[0] | PERCPU_LIVE_MOVING));
    REQUIRE(table->Remove(p[0]));
    CHECK(table->Slot(home).ptr == PERCPU_LIVE_FREED);
    CHECK(table->Balance(0).freed_bytes == kBytes);
    REQUIRE(table->MoveFinish(p[8]));
    CHECK(table->Slot(home).ptr == p[8]);
    CHECK(table->Slot(home).info == Info(p[8], 0, 0));
    CHECK(table->InSpill(p[0]) == 0);
    CHECK(table->Spilled() == 0);
    CHECK_FALSE(table->Remove(p[0]));
    CHECK(table->Balance(0).allocated_bytes == 9 * kBytes);
    CHECK(table->Balance(0).freed_bytes == kBytes);
  }
  SECTION("no room in the spill part: the freed slot goes to the new pointer") {
    table->FillSpill();
    REQUIRE(table->MoveStart(home));
    REQUIRE(table->Remove(p[0]));
    REQUIRE(table->MoveFinish(p[8]));
    CHECK(table->Slot(home).ptr == p[8]);
    CHECK(table->InSpill(p[0]) == 0);
    CHECK(table->Spilled() == kSpillSlots);
    CHECK(table->Balance(0).freed_bytes == kBytes);
  }
  SECTION("no room and no free: the move is undone and the new pointer refused") {
    table->FillSpill();
    REQUIRE(table->MoveStart(home));
    CHECK_FALSE(table->MoveFinish(p[8]));
    CHECK(table->Slot(home).ptr == p[0]);
    CHECK(table->Remove(p[0]));
    CHECK(table->Balance(0).allocated_bytes == (kSpillSlots + 8) * kBytes);
  }
  SECTION("a slot whose info does not match its pointer (still being written) is not moved") {
    percpu_live_slot torn = table->Slot(home);
    torn.info ^= 1;  // another size: the check bits no longer match
    table->SetSlot(home, torn);
    CHECK_FALSE(table->MoveStart(home));
    CHECK(table->Slot(home).ptr == p[0]);
    CHECK(table->MoveStart(home + 1));
  }
}
