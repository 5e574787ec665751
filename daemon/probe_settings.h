// The sections of kpathd.yaml that configure one probe each: percpu, madvise, irqoff, slab and
// hooks. Each reads its section's value (under `key_node`) into the configuration; config.cpp
// calls them for their top-level keys.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>

#include "absl/status/status.h"
#include "daemon/config.h"
#include "daemon/yaml_reader.h"

namespace kpath {

// The most series one label (labels.*) or one hooks family may have.
inline constexpr int64_t kMaxLabelLimit = 10000;

absl::Status ReadKubernetesSettings(const YamlReader& reader, const YAML::Node& key_node,
                                    const YAML::Node& value, KubernetesConfig& kubernetes);
absl::Status ReadPercpuSettings(const YamlReader& reader, const YAML::Node& key_node,
                                const YAML::Node& value, PercpuConfig& percpu);
absl::Status ReadCgroupsSettings(const YamlReader& reader, const YAML::Node& key_node,
                                 const YAML::Node& value, CgroupsConfig& cgroups);
absl::Status ReadMadviseSettings(const YamlReader& reader, const YAML::Node& key_node,
                                 const YAML::Node& value, MadviseConfig& madvise);
absl::Status ReadIrqOffSettings(const YamlReader& reader, const YAML::Node& key_node,
                                const YAML::Node& value, IrqOffConfig& irqoff);
absl::Status ReadSlabSettings(const YamlReader& reader, const YAML::Node& key_node,
                              const YAML::Node& value, SlabConfig& slab);
absl::Status ReadHooksSettings(const YamlReader& reader, const YAML::Node& key_node,
                               const YAML::Node& value, HooksConfig& hooks);

}  // namespace kpath
