#include "probes/slab/slab_collector.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "fmt/format.h"
#include "probes/slab/slab_files.h"
#include "probes/slab/slab_metrics.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr size_t kMaxAttributeBytes = 4096;
constexpr size_t kMaxSlabinfoBytes = 16 << 20;
// A read may run to this many times max_read_time before it is abandoned (it counts as slow,
// and so backs off, from 1 x).
constexpr int kAbandonAfterReadTimes = 4;

bool SafeCacheName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

absl::Status PastDeadline(SteadyClock::time_point deadline, std::string_view what) {
  if (SteadyClock::now() <= deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(fmt::format("{}: abandoned, reading took too long", what));
}

absl::StatusOr<uint64_t> ReadAttribute(const std::filesystem::path& dir, std::string_view name) {
  absl::StatusOr<std::string> text = ReadFileToString(dir / name, kMaxAttributeBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<uint64_t> value = ParseSlabAttribute(*text);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}", (dir / name).string(), std::string(value.status().message())));
  }
  return value;
}

// Objects and bytes of one cache directory (or alias symlink).
absl::StatusOr<SlabCacheSize> ReadCache(const std::filesystem::path& dir, std::string name,
                                        uint64_t page_size) {
  SlabCacheSize size;
  size.name = std::move(name);
  absl::StatusOr<uint64_t> objects = ReadAttribute(dir, "total_objects");
  if (!objects.ok()) return objects.status();
  absl::StatusOr<uint64_t> slabs = ReadAttribute(dir, "slabs");
  if (!slabs.ok()) return slabs.status();
  absl::StatusOr<uint64_t> order = ReadAttribute(dir, "order");
  if (!order.ok()) return order.status();
  if (*order > 20)
    return absl::InvalidArgumentError(fmt::format("{}: order {}", dir.string(), *order));
  size.objects = *objects;
  size.bytes = *slabs * (page_size << *order);
  return size;
}

bool Exists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

std::string_view SlabSourceName(SlabSource source) {
  return source == SlabSource::kSysfs ? "sysfs" : "slabinfo";
}

absl::StatusOr<SlabReading> ReadSlabSysfs(const HostPaths& paths,
                                          const std::vector<std::string>& caches, size_t top_n,
                                          uint64_t page_size, SteadyClock::time_point deadline) {
  const std::filesystem::path root = paths.Sys("kernel/slab");
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) {
    return absl::NotFoundError(fmt::format("no {} (not SLUB, or no sysfs for it)", root.string()));
  }
  SlabReading reading;
  reading.source = SlabSource::kSysfs;
  std::set<std::string> listed_dirs;  // real directories of the listed caches
  for (const std::string& name : caches) {
    if (!SafeCacheName(name)) continue;
    std::filesystem::path dir = root / name;
    if (!Exists(dir)) continue;  // this kernel has no such cache
    if (!Exists(dir / "total_objects")) {
      return absl::FailedPreconditionError(
          fmt::format("{} has no total_objects (kernel without CONFIG_SLUB_DEBUG)", dir.string()));
    }
    absl::StatusOr<SlabCacheSize> size = ReadCache(dir, name, page_size);
    if (!size.ok()) return size.status();
    reading.listed.push_back(*std::move(size));
    std::filesystem::path target = std::filesystem::is_symlink(dir, ec)
                                       ? std::filesystem::read_symlink(dir, ec).filename()
                                       : std::filesystem::path(name);
    listed_dirs.insert(target.string());
    if (absl::Status s = PastDeadline(deadline, root.string()); !s.ok()) return s;
  }
  if (top_n == 0) return reading;

  // Every cache directory once; aliases (symlinks) only name merged caches.
  std::map<std::string, std::vector<std::string>> aliases;  // directory -> alias names
  std::vector<std::string> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    std::string name = entry.path().filename().string();
    if (entry.is_symlink(ec)) {
      aliases[std::filesystem::read_symlink(entry.path(), ec).filename().string()].push_back(name);
    } else if (entry.is_directory(ec)) {
      dirs.push_back(std::move(name));
    }
  }
  if (ec) return absl::UnavailableError(fmt::format("listing {}: {}", root.string(), ec.message()));
  std::vector<std::pair<uint64_t, std::string>> by_objects;
  for (const std::string& dir : dirs) {
    if (listed_dirs.count(dir)) continue;
    absl::StatusOr<uint64_t> objects = ReadAttribute(root / dir, "total_objects");
    if (!objects.ok()) continue;  // a cache destroyed meanwhile
    by_objects.emplace_back(*objects, dir);
    if (absl::Status s = PastDeadline(deadline, root.string()); !s.ok()) return s;
  }
  // Largest first; equal sizes by name, so that the choice is stable.
  std::sort(by_objects.begin(), by_objects.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t i = 0; i < by_objects.size() && reading.top.size() < top_n; ++i) {
    const std::string& dir = by_objects[i].second;
    std::string label = dir;
    if (auto it = aliases.find(dir);
        it != aliases.end() && !it->second.empty() && dir.starts_with(":")) {
      label = *std::min_element(it->second.begin(), it->second.end());
    }
    absl::StatusOr<SlabCacheSize> size = ReadCache(root / dir, label, page_size);
    if (!size.ok()) continue;
    reading.top.push_back(*std::move(size));
  }
  return reading;
}

SlabReading SlabReadingFromSlabinfo(const std::vector<SlabinfoEntry>& entries,
                                    const std::vector<std::string>& caches, size_t top_n,
                                    uint64_t page_size) {
  SlabReading reading;
  reading.source = SlabSource::kSlabinfo;
  auto size_of = [&](const SlabinfoEntry& e) {
    return SlabCacheSize{e.name, e.objects, e.slabs * e.pages_per_slab * page_size};
  };
  std::set<std::string> listed;
  for (const std::string& name : caches) {
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const SlabinfoEntry& e) { return e.name == name; });
    if (it == entries.end()) continue;
    reading.listed.push_back(size_of(*it));
    listed.insert(name);
  }
  std::vector<const SlabinfoEntry*> rest;
  for (const SlabinfoEntry& e : entries) {
    if (!listed.count(e.name)) rest.push_back(&e);
  }
  std::sort(rest.begin(), rest.end(), [](const SlabinfoEntry* a, const SlabinfoEntry* b) {
    return a->objects != b->objects ? a->objects > b->objects : a->name < b->name;
  });
  for (size_t i = 0; i < rest.size() && i < top_n; ++i) reading.top.push_back(size_of(*rest[i]));
  return reading;
}

absl::StatusOr<std::string> ReadSlabinfoText(const HostPaths& paths,
                                             SteadyClock::time_point deadline) {
  const std::filesystem::path path = paths.Proc("slabinfo");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        fmt::format("open {}: {}", path.string(), std::strerror(errno)));
  }
  std::string text;
  char buffer[4096];
  absl::Status status;
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = absl::Status(absl::ErrnoToStatusCode(errno),
                            fmt::format("read {}: {}", path.string(), std::strerror(errno)));
      break;
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxSlabinfoBytes) {
      status = absl::OutOfRangeError(fmt::format("{}: larger than 16 MiB", path.string()));
      break;
    }
    if (status = PastDeadline(deadline, path.string()); !status.ok()) break;
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

SlabCollector::SlabCollector(HostPaths paths, SlabConfig config, Clock clock)
    : paths_(std::move(paths)),
      config_(std::move(config)),
      clock_(std::move(clock)),
      page_size_(static_cast<uint64_t>(sysconf(_SC_PAGESIZE))) {}

void SlabCollector::SetConfig(SlabConfig config) {
  config_ = std::move(config);
  next_read_.reset();  // read again at the next sample, on the new settings
}

absl::StatusOr<SlabReading> SlabCollector::Read(SteadyClock::time_point deadline) {
  const size_t top_n = static_cast<size_t>(std::max(config_.top_n, 0));
  absl::StatusOr<SlabReading> sysfs =
      ReadSlabSysfs(paths_, config_.caches, top_n, page_size_, deadline);
  if (sysfs.ok() ||
      (!absl::IsNotFound(sysfs.status()) && !absl::IsFailedPrecondition(sysfs.status()))) {
    if (sysfs.ok() && !logged_source_) {
      spdlog::info("slab: reading SLUB's O(1) counters in {} every {}",
                   paths_.Sys("kernel/slab").string(), absl::FormatDuration(config_.interval));
      logged_source_ = true;
    }
    return sysfs;
  }
  if (!logged_source_) {
    spdlog::warn(
        "slab: {}; falling back to {}, which walks every cache's partial slabs with IRQs "
        "off: each read is timed and reads back off when slow",
        std::string(sysfs.status().message()), paths_.Proc("slabinfo").string());
    logged_source_ = true;
  }
  absl::StatusOr<std::string> text = ReadSlabinfoText(paths_, deadline);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<SlabinfoEntry>> entries = ParseSlabinfo(*text);
  if (!entries.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", paths_.Proc("slabinfo").string(),
                                                  std::string(entries.status().message())));
  }
  return SlabReadingFromSlabinfo(*entries, config_.caches, top_n, page_size_);
}

absl::Status SlabCollector::Collect(MetricFamilies& out) {
  const SteadyClock::time_point now = clock_();
  if (!next_read_ || now >= *next_read_) {
    const SteadyClock::time_point start = SteadyClock::now();
    const SteadyClock::duration budget = absl::ToChronoNanoseconds(config_.max_read_time);
    absl::StatusOr<SlabReading> reading = Read(start + kAbandonAfterReadTimes * budget);
    const SteadyClock::duration took = SteadyClock::now() - start;
    last_read_seconds_ = std::chrono::duration<double>(took).count();
    const int before = backoff_;
    if (took > budget || (!reading.ok() && absl::IsDeadlineExceeded(reading.status()))) {
      backoff_ = std::min(backoff_ * 2, kMaxBackoff);
    } else if (2 * took <= budget && backoff_ > 1) {
      backoff_ /= 2;
    }
    if (backoff_ > before) {
      spdlog::warn("slab: reading took {:.1f} ms (max_read_time {}): backing off, now every {}",
                   last_read_seconds_ * 1e3, absl::FormatDuration(config_.max_read_time),
                   absl::FormatDuration(config_.interval * backoff_));
    } else if (backoff_ < before) {
      spdlog::info("slab: reading took {:.1f} ms again: now every {}", last_read_seconds_ * 1e3,
                   absl::FormatDuration(config_.interval * backoff_));
    }
    next_read_ = now + std::chrono::duration_cast<SteadyClock::duration>(
                           absl::ToChronoNanoseconds(config_.interval * backoff_));
    if (reading.ok()) {
      last_source_ = reading->source;
      last_ = *std::move(reading);
      last_error_.reset();
    } else {
      last_error_ = reading.status();
    }
  }
  if (last_error_) return *last_error_;
  if (!last_) return absl::UnavailableError("slab caches not read yet");

  FamilyBuilder objects(slab_metrics::kSlabObjects);
  FamilyBuilder bytes(slab_metrics::kSlabBytes);
  for (const auto* group : {&last_->listed, &last_->top}) {
    for (const SlabCacheSize& cache : *group) {
      objects.Add({{"cache", cache.name}}, static_cast<double>(cache.objects));
      bytes.Add({{"cache", cache.name}}, static_cast<double>(cache.bytes));
    }
  }
  objects.AppendTo(out);
  bytes.AppendTo(out);
  FamilyBuilder(slab_metrics::kSlabReadDurationSeconds)
      .Add({{"source", std::string(SlabSourceName(last_source_))}}, last_read_seconds_)
      .AppendTo(out);
  FamilyBuilder(slab_metrics::kSlabReadIntervalSeconds)
      .Add(absl::ToDoubleSeconds(config_.interval * backoff_))
      .AppendTo(out);
  return absl::OkStatus();
}

}  // namespace kpath
