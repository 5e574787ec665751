#include "probes/collect/bpf_skeleton.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kpath {

absl::Status FillTunablesMap(bpf_object* obj) {
  bpf_map* tunables = bpf_object__find_map_by_name(obj, "kpath_tunables");
  if (tunables == nullptr) return absl::OkStatus();
  bpf_map* rodata = nullptr;
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, obj) {
    if (absl::EndsWith(bpf_map__name(map), ".rodata")) rodata = map;
  }
  const btf* types = bpf_object__btf(obj);
  size_t rodata_size = 0;
  const auto* bytes =
      rodata ? static_cast<const char*>(bpf_map__initial_value(rodata, &rodata_size)) : nullptr;
  if (types == nullptr || bytes == nullptr) {
    return absl::InternalError(absl::StrCat(bpf_object__name(obj),
                                            ": a kpath_tunables map but no .rodata or BTF to fill "
                                            "it from"));
  }
  const btf_type* value = btf__type_by_id(types, bpf_map__btf_value_type_id(tunables));
  const btf_type* section = btf__type_by_id(types, bpf_map__btf_value_type_id(rodata));
  if (value == nullptr || !btf_is_struct(value) || section == nullptr || !btf_is_datasec(section)) {
    return absl::InternalError(
        absl::StrCat(bpf_object__name(obj), ": kpath_tunables or .rodata without its BTF type"));
  }
  std::vector<char> filled(bpf_map__value_size(tunables), 0);
  const btf_member* member = btf_members(value);
  for (int i = 0; i < btf_vlen(value); ++i, ++member) {
    const std::string name = btf__name_by_offset(types, member->name_off);
    const size_t offset = btf_member_bit_offset(value, i) / 8;
    const long long size = btf__resolve_size(types, member->type);
    bool found = false;
    const btf_var_secinfo* var = btf_var_secinfos(section);
    for (int j = 0; j < btf_vlen(section); ++j, ++var) {
      const btf_type* var_type = btf__type_by_id(types, var->type);
      if (var_type == nullptr ||
          btf__name_by_offset(types, var_type->name_off) != absl::StrCat(name, "__rodata")) {
        continue;
      }
      if (size <= 0 || static_cast<long long>(var->size) != size ||
          var->offset + var->size > rodata_size || offset + var->size > filled.size()) {
        break;
      }
      std::memcpy(filled.data() + offset, bytes + var->offset, var->size);
      found = true;
      break;
    }
    if (!found) {
      return absl::InternalError(absl::StrCat(bpf_object__name(obj), ": tunable ", name,
                                              " has no .rodata variable of its size to fill it"));
    }
  }
  const uint32_t key = 0;
  if (bpf_map_update_elem(bpf_map__fd(tunables), &key, filled.data(), BPF_ANY) != 0) {
    return LibbpfError("fill kpath_tunables", -errno);
  }
  return absl::OkStatus();
}

}  // namespace kpath
