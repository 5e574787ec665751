// The regions' records: the buffer they arrive in from the kernel (a BPF ring buffer, or a perf
// buffer on kernels without one), and their decoding into IrqOffRegion.
#include "probes/irqoff/irqoff_events.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "fmt/format.h"
#include "fmt/ranges.h"
#include "probes/collect/bpf_maps.h"
#include "probes/irqoff/culprit.h"
#include "probes/irqoff/irqoff.h"
#include "probes/irqoff/irqoff_probe.h"
#include "spdlog/spdlog.h"

namespace kpath {

namespace {

// Pages per CPU of the perf buffer (kernels without a BPF ring buffer).
constexpr size_t kPerfBufferPages = 8;

int HandleRingEvent(void* ctx, void* data, size_t size) {
  if (size >= sizeof(irqoff_event)) {
    static_cast<std::vector<irqoff_event>*>(ctx)->push_back(
        *static_cast<const irqoff_event*>(data));
  }
  return 0;
}

void HandlePerfEvent(void* ctx, int /*cpu*/, void* data, __u32 size) {
  HandleRingEvent(ctx, data, size);
}

}  // namespace

std::string FormatMs(absl::Duration d) {
  return fmt::format("{:g}ms", absl::ToDoubleMilliseconds(d));
}

IrqOffRegion RegionFromEvent(const irqoff_event& event, KernelSymbolizer& symbolizer) {
  IrqOffRegion region;
  region.seconds = static_cast<double>(event.length_ns) / 1e9;
  region.cpu = static_cast<int>(event.cpu);
  region.pid = event.pid;
  region.comm = std::string(event.comm, strnlen(event.comm, sizeof(event.comm)));
  if (region.comm.empty()) region.comm = "unknown";
  region.task_switched = (event.flags & IRQOFF_EVENT_TASK_SWITCHED) != 0;
  region.user_mode = (event.flags & IRQOFF_EVENT_USER_MODE) != 0;
  region.unwitnessed = (event.flags & IRQOFF_EVENT_UNWITNESSED) != 0;

  std::vector<uint64_t> addresses;
  // preemptirq: the code that disabled IRQs comes first; it is the culprit by construction.
  for (uint64_t site : event.disable_site) {
    if (site != 0) addresses.push_back(site);
  }
  size_t disable_frames = addresses.size();
  int frames = event.stack_size > 0 ? event.stack_size / static_cast<int>(sizeof(uint64_t)) : 0;
  frames = std::min(frames, IRQOFF_STACK_DEPTH);
  for (int i = 0; i < frames; ++i) addresses.push_back(event.stack[i]);
  std::vector<std::optional<std::string>> names = symbolizer.Symbolize(addresses);
  for (size_t i = 0; i < names.size(); ++i) {
    region.frames.push_back(names[i] ? *names[i] : fmt::format("{:#x}", addresses[i]));
  }
  // When the late interrupt landed in another thread than the holder, its stack is that other
  // thread's and names nothing the holder did.
  if (region.task_switched && disable_frames == 0) {
    region.culprit = std::string(kUnknownCulprit);
  } else {
    region.culprit = IrqOffCulprit(names);
  }
  return region;
}

std::string DescribeRegion(const IrqOffRegion& region) {
  std::string where = region.user_mode       ? "; the late interrupt landed in user code"
                      : region.task_switched ? "; the late interrupt landed in the next thread"
                                             : "";
  std::string stack =
      region.frames.empty()
          ? ""
          : fmt::format("; stack: {}",
                        fmt::join(region.frames.begin(),
                                  region.frames.begin() +
                                      static_cast<long>(std::min<size_t>(region.frames.size(), 8)),
                                  " <- "));
  // Last, so that the stack still follows where the tick landed.
  std::string witness = region.unwitnessed ? "; no other CPU saw it" : "";
  std::string pod = region.pod.empty() ? ""
                    : region.pod.namespace_name.empty()
                        ? fmt::format(" of pod {}", region.pod.pod)
                        : fmt::format(" of pod {}/{}", region.pod.namespace_name, region.pod.pod);
  return fmt::format("{:.1f} ms on CPU {} in {} (pid {}{}), culprit {}{}{}{}", region.seconds * 1e3,
                     region.cpu, region.comm, region.pid, pod, region.culprit, where, stack,
                     witness);
}

Event RegionEvent(const IrqOffRegion& region, absl::Time end) {
  Event event;
  event.kind = std::string(event_kind::kIrqOffRegion);
  event.time = end;
  event.message = fmt::format("IRQs off {}", DescribeRegion(region));
  event.fields = {
      {"seconds", region.seconds},
      {"cpu", int64_t{region.cpu}},
      {"pid", int64_t{region.pid}},
      {"comm", region.comm},
      {"culprit", region.culprit},
      {"stack", region.frames},
      {"landed", std::string(region.user_mode       ? "user"
                             : region.task_switched ? "next_thread"
                                                    : "holder")},
      {"witnessed", int64_t{region.unwitnessed ? 0 : 1}},
  };
  // The process's pod, where it has one (docs/events.md).
  for (auto [key, value] :
       {std::pair{"namespace", &region.pod.namespace_name}, std::pair{"pod", &region.pod.pod},
        std::pair{"container", &region.pod.container}}) {
    if (!value->empty()) event.fields.push_back({key, *value});
  }
  return event;
}

absl::Time WallTimeOfMonotonic(uint64_t monotonic_ns) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const int64_t now_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
  return absl::Now() - absl::Nanoseconds(now_ns - static_cast<int64_t>(monotonic_ns));
}

absl::Status IrqOffProbe::OpenEventBuffer() {
  if (kernel_.HasRingBuffer()) {
    ring_ =
        ring_buffer__new(MapFd(obj_, "irqoff_events"), HandleRingEvent, &drained_events_, nullptr);
    if (!ring_) return LibbpfError("ring_buffer__new", errno);
  } else {
    perf_ = perf_buffer__new(MapFd(obj_, "irqoff_events_perf"), kPerfBufferPages, HandlePerfEvent,
                             nullptr, &drained_events_, nullptr);
    if (!perf_) return LibbpfError("perf_buffer__new", errno);
  }
  return absl::OkStatus();
}

void IrqOffProbe::CountRegions(uint64_t events_lost) {
  std::vector<IrqOffRegion> regions;
  regions.reserve(drained_events_.size());
  for (const irqoff_event& event : drained_events_) {
    regions.push_back(RegionFromEvent(event, *symbolizer_));
    if (options_.pods) regions.back().pod = options_.pods->OfProcess(regions.back().pid);
    if (events_) events_->Emit(RegionEvent(regions.back(), WallTimeOfMonotonic(event.end_ns)));
  }
  drained_events_.clear();
  const uint64_t one = 1;
  constexpr size_t kDebugLogged = 20;  // per interval, so that a storm cannot flood the log
  for (size_t i = 0; i < regions.size(); ++i) {
    const IrqOffRegion& region = regions[i];
    std::vector<std::string> labels{region.comm, region.culprit};
    if (options_.pods) AppendPodLabels(labels, region.pod);  // as WithPodLabelNames named them
    regions_.Add(labels, std::span<const uint64_t>(&one, 1));
    if (i < kDebugLogged) spdlog::debug("irqoff: region {}", DescribeRegion(region));
  }
  // Regions whose event was lost are counted all the same, without labels.
  if (events_lost > events_lost_seen_) {
    const uint64_t lost = events_lost - events_lost_seen_;
    regions_.AddOther(std::span<const uint64_t>(&lost, 1));
    events_lost_seen_ = events_lost;
  }
  regions_.EndInterval();

  // The longest region of this interval, for the log and the STATUS line.
  const IrqOffRegion* longest = nullptr;
  for (const IrqOffRegion& region : regions) {
    if (!longest || region.seconds > longest->seconds) longest = &region;
  }
  if (longest) {
    spdlog::info("irqoff: {} region{} of {} or more since the last sample; longest {}",
                 regions.size(), regions.size() == 1 ? "" : "s",
                 FormatMs(options_.detector.threshold), DescribeRegion(*longest));
    status_ = fmt::format("IRQs off {:.1f} ms max ({}, {})", longest->seconds * 1e3,
                          longest->culprit, longest->comm);
  } else {
    status_.clear();
  }
}

absl::Status IrqOffProbe::DrainEvents() {
  int n = ring_ ? ring_buffer__consume(ring_) : perf_ ? perf_buffer__consume(perf_) : 0;
  if (n < 0) return LibbpfError("drain irqoff events", n);
  return absl::OkStatus();
}

}  // namespace kpath
