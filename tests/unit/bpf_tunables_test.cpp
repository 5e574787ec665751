// The builds for kernels without BPF global data (KPATH_NO_GLOBAL_DATA, 4.19) are opened through
// the default build's skeleton (KPATH_OPEN_SKELETON), whose .rodata struct user space writes:
// each object's two builds must lay out every tunable at the same .rodata offset, and each
// tunable of the kpath_tunables map must have its <name>__rodata variable (FillTunablesMap). No
// kernel is needed: libbpf opens the embedded objects without loading them.
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <utility>

#include "cgroup_churn.legacy.skel.h"
#include "cgroup_churn.skel.h"
#include "irqoff.legacy.skel.h"
#include "irqoff.skel.h"
#include "madvise.legacy.skel.h"
#include "madvise.skel.h"
#include "percpu.legacy.skel.h"
#include "percpu.skel.h"
#include "slabinfo_readers.legacy.skel.h"
#include "slabinfo_readers.skel.h"
#include "tlb_flush.legacy.skel.h"
#include "tlb_flush.skel.h"

namespace {

using Layout = std::map<std::string, std::pair<uint32_t, uint32_t>>;  // name: offset, size

// The .rodata variables of an object: name (without the __rodata of the legacy build), offset
// and size.
Layout RodataLayout(const void* (*elf)(size_t*)) {
  size_t size = 0;
  const void* bytes = elf(&size);
  bpf_object* obj = bpf_object__open_mem(bytes, size, nullptr);
  REQUIRE(obj != nullptr);
  Layout layout;
  const btf* types = bpf_object__btf(obj);
  const int id = btf__find_by_name_kind(types, ".rodata", BTF_KIND_DATASEC);
  REQUIRE(id > 0);
  const btf_type* section = btf__type_by_id(types, id);
  const btf_var_secinfo* var = btf_var_secinfos(section);
  for (int i = 0; i < btf_vlen(section); ++i, ++var) {
    std::string name = btf__name_by_offset(types, btf__type_by_id(types, var->type)->name_off);
    if (name.size() > 8 && name.compare(name.size() - 8, 8, "__rodata") == 0) {
      name.resize(name.size() - 8);
    }
    layout[name] = {var->offset, var->size};
  }
  // Every field of the legacy build's map has its .rodata variable.
  if (bpf_map* map = bpf_object__find_map_by_name(obj, "kpath_tunables")) {
    const btf_type* value = btf__type_by_id(types, bpf_map__btf_value_type_id(map));
    REQUIRE(value != nullptr);
    const btf_member* member = btf_members(value);
    for (int i = 0; i < btf_vlen(value); ++i, ++member) {
      CHECK(layout.count(btf__name_by_offset(types, member->name_off)) == 1);
    }
    CHECK(btf_vlen(value) == static_cast<int>(layout.size()));
  }
  bpf_object__close(obj);
  return layout;
}

}  // namespace

TEST_CASE("each object's build without global data keeps the default build's .rodata layout",
          "[bpf]") {
  const std::pair<const void* (*)(size_t*), const void* (*)(size_t*)> builds[] = {
      {percpu_bpf__elf_bytes, percpu_legacy_bpf__elf_bytes},
      {cgroup_churn_bpf__elf_bytes, cgroup_churn_legacy_bpf__elf_bytes},
      {madvise_bpf__elf_bytes, madvise_legacy_bpf__elf_bytes},
      {tlb_flush_bpf__elf_bytes, tlb_flush_legacy_bpf__elf_bytes},
      {slabinfo_readers_bpf__elf_bytes, slabinfo_readers_legacy_bpf__elf_bytes},
      {irqoff_bpf__elf_bytes, irqoff_legacy_bpf__elf_bytes},
  };
  for (const auto& [plain, legacy] : builds) {
    const Layout a = RodataLayout(plain);
    const Layout b = RodataLayout(legacy);
    CHECK_FALSE(a.empty());
    CHECK(a == b);
  }
}
