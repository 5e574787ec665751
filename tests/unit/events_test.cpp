// Events (docs/events.md): the ring /events serves, their JSON and journal forms, the /events
// query, the event log's outputs (a real datagram socket standing in for journald's, the log's
// lines), the events of the probes and the client's reading of the replies.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "daemon/events/daemon_endpoint.h"
#include "daemon/events/event_json.h"
#include "daemon/events/event_log.h"
#include "daemon/events/event_ring.h"
#include "daemon/events/events_client.h"
#include "daemon/events/events_metrics.h"
#include "daemon/events/events_query.h"
#include "daemon/events/journal_entry.h"
#include "daemon/snapshot.h"
#include "daemon/web/metrics_server.h"
#include "probes/collect/rate_bursts.h"
#include "probes/hooks/hook_events.h"
#include "probes/irqoff/irqoff_events.h"
#include "support/temp_dir.h"

using namespace kpath;

namespace {

Event Region(int n, absl::Time time = absl::FromUnixSeconds(1796281200)) {
  return Event{std::string(event_kind::kIrqOffRegion),
               time + absl::Seconds(n),
               "region " + std::to_string(n),
               {{"cpu", int64_t{n}}, {"stack", std::vector<std::string>{"a", "b"}}}};
}

// A string literal with its NUL bytes, without the terminating one.
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::vector<uint64_t> Seqs(const EventRing::Page& page) {
  std::vector<uint64_t> out;
  for (const auto& e : page.events) out.push_back(e->seq);
  return out;
}

}  // namespace

TEST_CASE("the ring keeps the newest events up to its count and numbers them from 1") {
  EventRing ring(3, 1 << 20);
  for (int i = 1; i <= 5; ++i) CHECK(ring.Push(Region(i))->seq == static_cast<uint64_t>(i));
  CHECK(ring.size() == 3);
  CHECK(ring.dropped() == 2);
  EventRing::Page all = ring.After(0, 100);
  CHECK(Seqs(all) == std::vector<uint64_t>{3, 4, 5});
  CHECK(all.last_seq == 5);
}

TEST_CASE("the ring stays within its byte budget, the newest event always kept") {
  Event big = Region(1);
  big.message = std::string(10000, 'x');
  const size_t one = EventBytes(big);
  EventRing ring(1000, 3 * one + one / 2);
  for (int i = 0; i < 100; ++i) ring.Push(big);
  CHECK(ring.size() == 3);
  CHECK(ring.bytes() <= 3 * one + one / 2);
  EventRing tiny(1000, 10);
  tiny.Push(big);
  tiny.Push(big);
  CHECK(tiny.size() == 1);
}

TEST_CASE("a reader that fell behind the ring is told how many events it missed") {
  EventRing ring(3, 1 << 20);
  for (int i = 1; i <= 10; ++i) ring.Push(Region(i));
  // Saw up to 4; 5, 6 and 7 were dropped; 8, 9, 10 are kept.
  EventRing::Page page = ring.After(4, 100);
  CHECK(page.missed == 3);
  CHECK(Seqs(page) == std::vector<uint64_t>{8, 9, 10});
  // Saw up to 7: nothing missed.
  CHECK(ring.After(7, 100).missed == 0);
  CHECK(Seqs(ring.After(7, 100)) == std::vector<uint64_t>{8, 9, 10});
  // Up to date.
  CHECK(ring.After(10, 100).events.empty());
  CHECK(ring.After(10, 100).missed == 0);
  // A limit pages through.
  CHECK(Seqs(ring.After(7, 2)) == std::vector<uint64_t>{8, 9});
}

TEST_CASE("since a time: the events at or after it, and whether some were dropped") {
  const absl::Time t0 = absl::FromUnixSeconds(1796281200);
  EventRing ring(3, 1 << 20);
  for (int i = 1; i <= 5; ++i) ring.Push(Region(i, t0));  // times t0+1 .. t0+5
  EventRing::Page recent = ring.Since(t0 + absl::Seconds(4), 100);
  CHECK(Seqs(recent) == std::vector<uint64_t>{4, 5});
  CHECK(recent.missed == 0);
  // Events at t0+1 and t0+2 were dropped: a reader from t0 missed some.
  EventRing::Page old = ring.Since(t0, 100);
  CHECK(Seqs(old) == std::vector<uint64_t>{3, 4, 5});
  CHECK(old.missed == 1);
  CHECK(old.missed_unknown_count);
}

TEST_CASE("JSON escapes quotes, backslashes and control bytes, and replaces bytes not UTF-8") {
  CHECK(JsonString("ss") == "\"ss\"");
  CHECK(JsonString("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(JsonString("l1\nl2\t\x01\x7f") == "\"l1\\nl2\\t\\u0001\\u007f\"");
  CHECK(JsonString("caf\xc3\xa9") == "\"caf\xc3\xa9\"");  // valid UTF-8 is kept
  CHECK(JsonString("\xff\xc3(") == "\"\\ufffd\\ufffd(\"");
  CHECK(JsonString("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  CHECK(JsonString(Bytes("a\0b")) == "\"a\\u0000b\"");
}

TEST_CASE("an event's JSON line carries its sequence, time, kind, message and typed fields") {
  StoredEvent e{7, Event{"irqoff_region",
                         absl::FromUnixMicros(1796281200123456),
                         "30 ms \"x\"",
                         {{"seconds", 0.03},
                          {"cpu", int64_t{3}},
                          {"comm", std::string("kpath\"fx\n")},
                          {"stack", std::vector<std::string>{"f1", "we\\ird"}},
                          {"nan", std::nan("")}}}};
  CHECK(EventJson(e) ==
        "{\"seq\":7,\"time\":\"2026-12-03T07:00:00.123456Z\",\"kind\":\"irqoff_region\","
        "\"message\":\"30 ms \\\"x\\\"\",\"seconds\":0.03,\"cpu\":3,\"comm\":\"kpath\\\"fx\\n\","
        "\"stack\":[\"f1\",\"we\\\\ird\"],\"nan\":null}");
}

TEST_CASE("journal fields: plain values as NAME=value, multi-line ones length-prefixed") {
  std::string d;
  AppendJournalField(d, "KPATH_COMM", "ss");
  CHECK(d == "KPATH_COMM=ss\n");
  d.clear();
  AppendJournalField(d, "KPATH_STACK", "f1\nf2");
  CHECK(d == Bytes("KPATH_STACK\n\x05\0\0\0\0\0\0\0f1\nf2\n"));
  d.clear();
  // Any control byte but tab takes the binary form too; '=' in a value is fine.
  AppendJournalField(d, "K", Bytes("a\0="));
  CHECK(d == Bytes("K\n\x03\0\0\0\0\0\0\0a\0=\n"));
  d.clear();
  AppendJournalField(d, "K", "a=b\tc");
  CHECK(d == "K=a=b\tc\n");
}

TEST_CASE("an event's journal entry: MESSAGE, kind, sequence and KPATH_ fields") {
  StoredEvent e{9, Event{"irqoff_region",
                         absl::UnixEpoch(),
                         "msg",
                         {{"cpu", int64_t{2}},
                          {"stack", std::vector<std::string>{"a", "bc"}},
                          {"hook_kind", std::string("kprobe")}}}};
  const std::string d = JournalEntry(e);
  CHECK(d == Bytes("MESSAGE=msg\nPRIORITY=5\nSYSLOG_IDENTIFIER=kpathd\n"
                   "KPATH_EVENT=irqoff_region\nKPATH_SEQ=9\nKPATH_CPU=2\n"
                   "KPATH_STACK\n\x04\0\0\0\0\0\0\0a\nbc\nKPATH_HOOK_KIND=kprobe\n"));
}

TEST_CASE("the /events query: since as a sequence, a time, Unix seconds or a duration") {
  const absl::Time now = absl::FromUnixSeconds(1796281200);
  auto q = ParseEventsQuery("since=42&kind=hook_left&limit=5", now);
  REQUIRE(q.ok());
  CHECK(q->after_seq == 42u);
  CHECK(q->kind == "hook_left");
  CHECK(q->limit == 5);
  CHECK(ParseEventsQuery("since=2026-12-03T07%3A00%3A00Z", now)->since_time == now);
  // An unescaped '+' of an offset arrives as a space.
  CHECK(ParseEventsQuery("since=2026-12-03T08:00:00+01:00", now)->since_time == now);
  CHECK(ParseEventsQuery("since=@1796281200", now)->since_time == now);
  CHECK(ParseEventsQuery("since=1h", now)->since_time == now - absl::Hours(1));
  CHECK(ParseEventsQuery("format=lines", now)->lines);
  for (const char* bad : {"since=yesterday", "since=-1h", "kind=nope", "limit=0", "limit=10001",
                          "limit=x", "color=red", "format=xml"}) {
    INFO(bad);
    absl::StatusOr<EventsQuery> r = ParseEventsQuery(bad, now);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  }
  CHECK(std::string(ParseEventsQuery("since=yesterday", now).status().message())
            .find("since \"yesterday\": a sequence number (42)") == 0);
}

TEST_CASE("the /events reply pages by sequence, filters by kind and reports gaps") {
  EventRing ring(3, 1 << 20);
  for (int i = 1; i <= 5; ++i) ring.Push(Region(i));
  Event hook{std::string(event_kind::kHookLeft), absl::FromUnixSeconds(1796281300), "left", {}};
  ring.Push(hook);
  EventsQuery q;
  q.after_seq = 1;
  std::string reply = EventsReplyJson(ring, q);
  CHECK(reply.find("{\"last_seq\":6,\"next_since\":6,\"more\":false,\"missed\":2,"
                   "\"missed_count_known\":true,\"restarted\":false,\"events\":[{\"seq\":4,") == 0);
  q.kind = "hook_left";
  q.lines = true;
  reply = EventsReplyJson(ring, q);
  CHECK(reply.find("\"restarted\":false}\n{\"seq\":6,") != std::string::npos);
  CHECK(reply.find("\"seq\":4") == std::string::npos);
  // A reader of an earlier kpathd (past the newest sequence) starts over.
  q = EventsQuery{};
  q.after_seq = 1000;
  CHECK(EventsReplyJson(ring, q).find("\"restarted\":true,\"events\":[{\"seq\":4,") !=
        std::string::npos);
  // Up to date: nothing, and next_since stays.
  q.after_seq = 6;
  CHECK(EventsReplyJson(ring, q) ==
        "{\"last_seq\":6,\"next_since\":6,\"more\":false,\"missed\":0,"
        "\"missed_count_known\":true,\"restarted\":false,\"events\":[]}\n");
  // limit: the first events after since, and more to read on.
  q.after_seq = 3;
  q.limit = 2;
  CHECK(EventsReplyJson(ring, q).find("\"next_since\":5,\"more\":true,") != std::string::npos);
}

namespace {

// An IRQ-off region with a 32-frame stack, as the event storm bench makes them (~1.3 KiB).
Event FatRegion(int n) {
  Event e = Region(n);
  std::vector<std::string> stack;
  for (int i = 0; i < 32; ++i) stack.push_back("kernel_function_" + std::to_string(i) + "+0x1a");
  e.fields = {{"cpu", int64_t{n % 64}}, {"stack", std::move(stack)}};
  return e;
}

struct ReadOn {
  std::vector<uint64_t> seqs;       // every event read, in order
  std::vector<size_t> event_bytes;  // of each reply's events
  std::vector<std::string> mores;   // each reply's "more"
};

// Reads `ring` from the start as a client does: since=<next_since> while more.
ReadOn ReadAll(const EventRing& ring, EventsQuery q) {
  ReadOn out;
  q.lines = true;
  q.after_seq = 0;
  for (int replies = 0; replies < 1000; ++replies) {
    const std::string reply = EventsReplyJson(ring, q);
    const std::string header = reply.substr(0, reply.find('\n'));
    out.event_bytes.push_back(reply.size() - header.size() - 1);
    std::istringstream lines(reply.substr(header.size() + 1));
    for (std::string line; std::getline(lines, line);) {
      out.seqs.push_back(std::stoull(*JsonField(line, "seq")));
    }
    out.mores.push_back(*JsonField(header, "more"));
    q.after_seq = std::stoull(*JsonField(header, "next_since"));
    if (out.mores.back() != "true") break;
  }
  return out;
}

}  // namespace

TEST_CASE("an /events reply stops at its byte cap; next_since reads on, each event once") {
  EventRing ring(10000, 64 << 20);
  for (int i = 1; i <= 300; ++i) ring.Push(FatRegion(i));
  const size_t one = EventJson(*ring.After(0, 1).events[0]).size() + 1;
  EventsQuery q;
  q.limit = 10000;
  q.max_bytes = 10 * one + one / 2;  // 10 events a reply
  ReadOn read = ReadAll(ring, q);
  std::vector<uint64_t> all(300);
  std::iota(all.begin(), all.end(), 1);
  CHECK(read.seqs == all);
  REQUIRE(read.mores.size() == 30);
  for (size_t i = 0; i < read.mores.size(); ++i) {
    INFO("reply " << i);
    CHECK(read.event_bytes[i] <= q.max_bytes);
    CHECK(read.event_bytes[i] > q.max_bytes - 2 * one);  // cut by the cap, not sooner
    CHECK(read.mores[i] == (i + 1 < read.mores.size() ? "true" : "false"));
  }
  // The default cap: the whole ring (300 events of ~1 KiB) takes two replies.
  q.max_bytes = kMaxEventsReplyBytes;
  read = ReadAll(ring, q);
  CHECK(read.seqs == all);
  CHECK(read.mores.size() == 2);
  CHECK(read.event_bytes[0] <= kMaxEventsReplyBytes);
  CHECK(read.event_bytes[0] > kMaxEventsReplyBytes - 2 * one);
  // An event larger than the cap goes alone; the next reply has the rest.
  q.max_bytes = one / 2;
  read = ReadAll(ring, q);
  CHECK(read.seqs == all);
  CHECK(read.mores.size() == 300);
  // With a kind filter the events of other kinds are passed over, not counted against the cap.
  ring.Push(Event{std::string(event_kind::kHookLeft), absl::FromUnixSeconds(1796281300), "l", {}});
  q.kind = "hook_left";
  q.max_bytes = 10 * one;
  read = ReadAll(ring, q);
  CHECK(read.seqs == std::vector<uint64_t>{301});
  CHECK(read.mores == std::vector<std::string>{"false"});
  // The JSON document form is cut the same way and stays one valid document.
  EventsQuery json;
  json.max_bytes = 3 * one;
  const std::string doc = EventsReplyJson(ring, json);
  CHECK(doc.find("\"next_since\":3,\"more\":true,") != std::string::npos);
  CHECK(doc.substr(doc.size() - 3) == "]}\n");
  CHECK(std::count(doc.begin(), doc.end(), '\n') == 1);
}

TEST_CASE("the event log writes a log line of JSON per event, rate-limited, and counts") {
  std::vector<std::string> lines;
  EventLog log(EventLogOptions{.max_events = 100,
                               .output = EventOutput::kJsonLines,
                               .write_line = [&](const std::string& l) { lines.push_back(l); },
                               .output_per_second = 0.001,
                               .output_burst = 2});
  for (int i = 1; i <= 5; ++i) log.Emit(Region(i));
  REQUIRE(lines.size() == 2);  // the burst; the rest only in the ring
  CHECK(lines[0].find("event: {\"seq\":1,") == 0);
  CHECK(lines[1].find("event: {\"seq\":2,") == 0);
  CHECK(log.ring().size() == 5);  // the ring has them all
  MetricFamilies families;
  log.AppendFamilies(families);
  REQUIRE(families.size() == 2);
  CHECK(families[0].name == events_metrics::kEventsTotal.name);
  bool counted = false, limited = false;
  for (const auto& m : families[0].metric) {
    counted |= m.label[0].value == "irqoff_region" && m.counter.value == 5;
  }
  for (const auto& m : families[1].metric) {
    limited |= m.label[0].value == "output_rate_limited" && m.counter.value == 3;
  }
  CHECK(counted);
  CHECK(limited);
}

TEST_CASE("the event log sends journal datagrams to the socket, binary-safe") {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("kpath-journal-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/socket";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  CHECK(ChooseEventOutput(true, path) == EventOutput::kJournal);
  CHECK(ChooseEventOutput(false, path) == EventOutput::kJsonLines);
  CHECK(ChooseEventOutput(true, dir + "/absent") == EventOutput::kJsonLines);
  EventLog log(EventLogOptions{.output = EventOutput::kJournal, .journal_socket = path});
  log.Emit(Region(1));
  char buf[4096];
  const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
  close(fd);
  std::filesystem::remove_all(dir);
  REQUIRE(n > 0);
  const std::string d(buf, static_cast<size_t>(n));
  CHECK(d.find("MESSAGE=region 1\n") == 0);
  CHECK(d.find(Bytes("KPATH_STACK\n\x03\0\0\0\0\0\0\0a\nb\n")) != std::string::npos);
}

TEST_CASE("an event log whose output fails keeps its ring and counts the failure") {
  EventLog log(EventLogOptions{.output = EventOutput::kJournal,
                               .journal_socket = "/nonexistent/kpath/socket"});
  log.Emit(Region(1));
  CHECK(log.ring().size() == 1);
  MetricFamilies families;
  log.AppendFamilies(families);
  bool failed = false;
  for (const auto& m : families[1].metric) {
    failed |= m.label[0].value == "output_failed" && m.counter.value == 1;
  }
  CHECK(failed);
}

TEST_CASE("an IRQ-off region's event names its CPU, process, culprit and stack") {
  IrqOffRegion r;
  r.seconds = 0.0301;
  r.cpu = 3;
  r.pid = 4242;
  r.comm = "ss";
  r.culprit = "get_slabinfo";
  r.frames = {"get_slabinfo", "s_show", "seq_read"};
  Event e = RegionEvent(r, absl::FromUnixSeconds(1796281200));
  const std::string json = EventJson(StoredEvent{1, e});
  CHECK(json.find("\"kind\":\"irqoff_region\"") != std::string::npos);
  CHECK(json.find("\"message\":\"IRQs off 30.1 ms on CPU 3 in ss (pid 4242), culprit "
                  "get_slabinfo; stack: get_slabinfo <- s_show <- seq_read\"") !=
        std::string::npos);
  CHECK(json.find("\"seconds\":0.0301,\"cpu\":3,\"pid\":4242,\"comm\":\"ss\",\"culprit\":"
                  "\"get_slabinfo\",\"stack\":[\"get_slabinfo\",\"s_show\",\"seq_read\"],"
                  "\"landed\":\"holder\"") != std::string::npos);
  CHECK(json.find("pod") == std::string::npos);  // not a pod's: no pod fields

  // A process in a pod (seed 001's slabinfo reader as a monitoring agent's container).
  r.pod = {"monitoring", "node-agent-x7k2p", "collector"};
  const std::string in_pod = EventJson(StoredEvent{2, RegionEvent(r, absl::FromUnixSeconds(1))});
  CHECK(in_pod.find("in ss (pid 4242 of pod monitoring/node-agent-x7k2p), culprit") !=
        std::string::npos);
  CHECK(in_pod.find("\"namespace\":\"monitoring\",\"pod\":\"node-agent-x7k2p\","
                    "\"container\":\"collector\"") != std::string::npos);
}

TEST_CASE("a monotonic clock reading is placed on the wall clock") {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const uint64_t ns = static_cast<uint64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  const absl::Time t = WallTimeOfMonotonic(ns - 2'000'000'000);
  CHECK(absl::Now() - t > absl::Seconds(1.9));
  CHECK(absl::Now() - t < absl::Seconds(2.5));
}

TEST_CASE("hooks that appear and leave between inventories become events") {
  const absl::Time t = absl::FromUnixSeconds(1796281200);
  std::set<HookIdentity> before{{"kprobe", "tcp_sendmsg", "agent", "agent.service"},
                                {"ftrace", "vfs_read", "unknown", "none"}};
  std::set<HookIdentity> now{{"kprobe", "tcp_sendmsg", "agent", "agent.service"},
                             {"fentry", "do_sys_openat2", "agent", "agent.service"}};
  std::vector<Event> events = HookSetEvents(before, now, false, t);
  REQUIRE(events.size() == 2);
  CHECK(events[0].kind == "hook_left");
  CHECK(events[0].message == "foreign ftrace on vfs_read (owner unknown, unit none) left");
  CHECK(events[1].kind == "hook_appeared");
  CHECK(EventJson(StoredEvent{1, events[1]})
            .find("\"hook_kind\":\"fentry\",\"target\":\"do_sys_openat2\",\"owner\":\"agent\","
                  "\"unit\":\"agent.service\",\"at_start\":0}") != std::string::npos);
  // The first inventory: what is there was there when kpathd started.
  std::vector<Event> first = HookSetEvents({}, now, true, t);
  REQUIRE(first.size() == 2);
  CHECK(first[0].message.find("present when kpathd started") != std::string::npos);
  CHECK(HookSetEvents(now, now, false, t).empty());
}

TEST_CASE("a process's madvise storm starts at the threshold and ends below it, once each") {
  RateBursts storms(kMadviseStorms);
  const absl::Time t = absl::FromUnixSeconds(1796281200);
  CHECK(storms.Update({{"gateway", 900}}, 1000, t).empty());
  std::vector<Event> start =
      storms.Update({{"gateway", 41200}, {"quiet", 3}}, 1000, t + absl::Seconds(5));
  REQUIRE(start.size() == 1);
  CHECK(start[0].kind == "madvise_storm_start");
  CHECK(start[0].message == "madvise storm: gateway 41200 calls/s (threshold 1000)");
  // Still storming: nothing new, the peak kept.
  CHECK(storms.Update({{"gateway", 50000}}, 1000, t + absl::Seconds(10)).empty());
  // Gone from the interval (no calls): the storm ends, with its length and peak.
  std::vector<Event> end = storms.Update({}, 1000, t + absl::Seconds(15));
  REQUIRE(end.size() == 1);
  CHECK(end[0].kind == "madvise_storm_end");
  CHECK(EventJson(StoredEvent{1, end[0]})
            .find("\"comm\":\"gateway\",\"calls_per_second\":0,\"peak_calls_per_second\":50000,"
                  "\"seconds\":10}") != std::string::npos);
  CHECK(storms.Update({}, 1000, t + absl::Seconds(20)).empty());
}

TEST_CASE("a unit's cgroup churn burst is the same rule under its own names") {
  RateBursts bursts(kCgroupChurnBursts);
  const absl::Time t = absl::FromUnixSeconds(1796281200);
  std::vector<Event> start = bursts.Update({{"tick.service", 12.5}, {"slow.timer", 2}}, 10, t);
  REQUIRE(start.size() == 1);
  CHECK(start[0].kind == "cgroup_churn_burst_start");
  CHECK(start[0].message == "cgroup churn burst: tick.service 12 cgroups/s (threshold 10)");
  CHECK(EventJson(StoredEvent{1, start[0]})
            .find("\"unit\":\"tick.service\",\"mkdirs_per_second\":12.5,\"threshold\":10}") !=
        std::string::npos);
  std::vector<Event> end = bursts.Update({{"tick.service", 4}}, 10, t + absl::Seconds(30));
  REQUIRE(end.size() == 1);
  CHECK(end[0].kind == "cgroup_churn_burst_end");
  CHECK(end[0].message ==
        "cgroup churn burst of tick.service ended after 30 s (peak 12 cgroups/s, now 4)");
  CHECK(EventJson(StoredEvent{2, end[0]}).find("\"peak_mkdirs_per_second\":12.5,\"seconds\":30}") !=
        std::string::npos);
}

TEST_CASE("kpathd events --netrc-file: the first entry for the host, else default") {
  const std::string netrc =
      "machine other login a password b\n"
      "machine 10.0.0.1\n  login prometheus\n  password s3cret\n"
      "default login anon password x\n";
  CHECK(*NetrcAuthorization(netrc, "10.0.0.1") ==
        "Basic " + absl::Base64Escape("prometheus:s3cret"));
  CHECK(*NetrcAuthorization(netrc, "node-9") == "Basic " + absl::Base64Escape("anon:x"));
  CHECK(NetrcAuthorization("machine h login u password p\n", "g")->empty());
  CHECK_FALSE(NetrcAuthorization("machine h password p\n", "h").ok());
}

TEST_CASE("kpathd events reads URLs and the fields of kpathd's JSON lines") {
  absl::StatusOr<EventsUrl> u = ParseEventsUrl("http://me:s3cret@10.0.0.1:9555/");
  REQUIRE(u.ok());
  CHECK(u->host == "10.0.0.1");
  CHECK(u->port == 9555);
  CHECK(u->authorization == "Basic bWU6czNjcmV0");
  CHECK(ParseEventsUrl("http://[::1]:9477")->host == "::1");
  CHECK(ParseEventsUrl("http://localhost")->port == 9477);
  CHECK(ParseEventsUrl("https://node-7.example:9477")->tls);
  CHECK(ParseEventsUrl("https://node-7.example:9477")->host == "node-7.example");
  CHECK_FALSE(ParseEventsUrl("http://node-7.example:9477")->tls);
  for (const char* bad :
       {"ftp://h", "http://h:0", "http://h:x", "http://h/metrics", "http://", "https://h/events"}) {
    INFO(bad);
    CHECK_FALSE(ParseEventsUrl(bad).ok());
  }
  CHECK(DefaultEventsUrl("0.0.0.0:9600").port == 9600);
  const std::string line = EventJson(StoredEvent{
      3, Event{"irqoff_region", absl::UnixEpoch(), "a \"b\"\n\xff", {{"cpu", int64_t{1}}}}});
  CHECK(JsonField(line, "message") == "a \"b\"\n\xEF\xBF\xBD");
  CHECK(JsonField(line, "seq") == "3");
  CHECK(JsonField(line, "cpu") == "1");
  CHECK_FALSE(JsonField(line, "pid"));
}

namespace {

// A port of 127.0.0.1 that nothing listens on now.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("kpathd events reads a capped /events over real HTTP, each event once, and stops") {
  EventLog log(
      EventLogOptions{.max_events = 100000, .max_bytes = 256 << 20, .output = EventOutput::kNone});
  for (int i = 1; i <= 600; ++i) log.Emit(FatRegion(i));
  auto snapshot = std::make_shared<Snapshot>();
  const std::string listen = "127.0.0.1:" + std::to_string(FreePort());
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(listen, WebServerConfig{}, snapshot, {}, &log.ring());
  REQUIRE(server.ok());
  const EventsUrl url = DefaultEventsUrl(listen);
  std::vector<uint64_t> seqs;
  std::vector<size_t> bytes;
  auto take = [&](const EventsPage& page) {
    bytes.push_back(page.lines.size());
    std::istringstream lines(page.lines);
    for (std::string line; std::getline(lines, line);) {
      seqs.push_back(std::stoull(*JsonField(line, "seq")));
    }
  };
  // Every event kept, a capped reply at a time (600 events of ~1 KiB: three or more replies).
  absl::StatusOr<std::string> next = ReadEvents(url, {}, "", "", take);
  REQUIRE(next.ok());
  CHECK(*next == "600");
  std::vector<uint64_t> all(600);
  std::iota(all.begin(), all.end(), 1);
  CHECK(seqs == all);
  CHECK(bytes.size() >= 3);
  for (size_t b : bytes) CHECK(b <= kMaxEventsReplyBytes);
  // One reply (a follower's second): the first capped page only.
  seqs.clear();
  bytes.clear();
  next = ReadEvents(url, {}, "0", "", take, /*max_replies=*/1);
  REQUIRE(next.ok());
  CHECK(bytes.size() == 1);
  CHECK(std::to_string(seqs.back()) == *next);
  CHECK(seqs.size() < 600);
  // Events that keep coming while it reads (a storm) do not keep it reading: it stops at the
  // newest event of its first reply.
  seqs.clear();
  bytes.clear();
  int pushed = 600;
  next = ReadEvents(url, {}, "", "", [&](const EventsPage& page) {
    take(page);
    for (int i = 0; i < 300; ++i) log.Emit(FatRegion(++pushed));
  });
  REQUIRE(next.ok());
  CHECK(std::stoull(*next) >= 600);
  CHECK(bytes.size() <= 4);
  CHECK(seqs.front() == 1);
  // A refused query is an error naming the status, from a kpathd that answered.
  next = ReadEvents(url, {}, "yesterday", "", take);
  CHECK(next.status().message().find("HTTP 400: /events: since") == 0);
  CHECK_FALSE(NothingListening(next.status()));
  // Nothing listening on a port: told apart by the error's kind (diagnose then stays quiet), not
  // by its wording.
  const EventsUrl closed = DefaultEventsUrl("127.0.0.1:" + std::to_string(FreePort()));
  next = ReadEvents(closed, {}, "", "", take);
  REQUIRE_FALSE(next.ok());
  CHECK(next.status().message().find("cannot connect to 127.0.0.1:") == 0);
  CHECK(NothingListening(next.status()));
  CHECK_FALSE(NothingListening(absl::UnavailableError(std::string(next.status().message()))));
}

TEST_CASE(
    "without --url, kpathd events finds the configured kpathd: address, TLS, its certificate") {
  testing::TempDir dir;
  // Plain HTTP: the listen address's port, at loopback for a wildcard host, else at its host.
  absl::StatusOr<DaemonEndpoint> plain = DaemonEndpointFor("0.0.0.0:9600", WebServerConfig{});
  REQUIRE(plain.ok());
  CHECK(plain->url.host == "127.0.0.1");
  CHECK(plain->url.port == 9600);
  CHECK_FALSE(plain->url.tls);
  CHECK_FALSE(plain->basic_auth);
  CHECK(DaemonEndpointFor("[::]:9477", {})->url.host == "::1");
  CHECK(DaemonEndpointFor("[fd00::7]:9477", {})->url.host == "fd00::7");
  CHECK(DaemonEndpointFor("10.1.2.3:9100", {})->url.host == "10.1.2.3");
  CHECK(DaemonEndpointFor(":9100", {})->url.host == "127.0.0.1");
  // TLS with client certificates and basic auth: https, the daemon's own certificate pinned
  // (a path relative to the web configuration file's folder, resolved).
  dir.Write("server.crt", "not read here\n");
  dir.Write("server.key", "not read here\n", 0600);
  const std::string web_yml =
      dir.Write("web.yml",
                "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                "  client_ca_file: server.crt\n  client_auth_type: RequireAndVerifyClientCert\n"
                "basic_auth_users:\n  prometheus: "
                "\"$2b$12$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234\"\n");
  WebServerConfig web;
  web.config_file = web_yml;
  absl::StatusOr<DaemonEndpoint> tls = DaemonEndpointFor("0.0.0.0:9477", web);
  REQUIRE(tls.ok());
  CHECK(tls->url.tls);
  CHECK(tls->url.port == 9477);
  CHECK(tls->tls.ca_file == dir / "server.crt");
  CHECK(tls->tls.pinned);
  CHECK(tls->basic_auth);
  CHECK(tls->client_cert_required);
  CHECK(tls->web_config_file == web_yml);
  // TLS without client certificates or users; a certificate this user cannot read is not
  // pinned (the system's CAs then, or --ca-file).
  dir.Write("web2.yml", "tls_server_config:\n  cert_file: gone.crt\n  key_file: server.key\n");
  web.config_file = dir / "web2.yml";
  tls = DaemonEndpointFor("127.0.0.1:9477", web);
  REQUIRE(tls.ok());
  CHECK(tls->url.tls);
  CHECK(tls->tls.ca_file.empty());
  CHECK_FALSE(tls->tls.pinned);
  CHECK_FALSE(tls->basic_auth);
  CHECK_FALSE(tls->client_cert_required);
  // A web configuration that cannot be read is an error naming it.
  web.config_file = dir / "missing.yml";
  CHECK(DaemonEndpointFor("0.0.0.0:9477", web).status().message().find("missing.yml") !=
        std::string::npos);
}
