// The IRQ-off fixture as a command, for benches (bench/irqoff_vm_false_regions.py): holds IRQs
// off for HOLD_MS, COUNT times, on CPU N, from a thread named NAME, and prints each region's
// length as the fixture measured it in the kernel, one per line ("held <ms> ms").
//
//   kpath-irqoff-hold [--hold-ms 20] [--count 5] [--gap-ms 300] [--cpu N] [--name NAME]
//
// Exit status 2 when the kernel cannot run the fixture (Linux 6.14+ kfuncs), with the reason.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "irqoff_fixture.h"

int main(int argc, char** argv) {
  int hold_ms = 20;
  int count = 5;
  int gap_ms = 300;
  int cpu = static_cast<int>(std::thread::hardware_concurrency()) - 1;
  std::string name = "kpath-irqoff-fx";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--hold-ms") {
      hold_ms = std::atoi(value);
    } else if (flag == "--count") {
      count = std::atoi(value);
    } else if (flag == "--gap-ms") {
      gap_ms = std::atoi(value);
    } else if (flag == "--cpu") {
      cpu = std::atoi(value);
    } else if (flag == "--name") {
      name = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::string why;
  std::unique_ptr<kpath::testing::IrqOffFixture> fixture =
      kpath::testing::IrqOffFixture::Load(&why);
  if (!fixture) {
    std::fprintf(stderr, "the IRQ-off fixture cannot run here: %s\n", why.c_str());
    return 2;
  }
  std::vector<std::chrono::nanoseconds> held =
      fixture->HoldIrqsOff(cpu < 0 ? 0 : cpu, std::chrono::milliseconds(hold_ms), count,
                           std::chrono::milliseconds(gap_ms), name);
  for (std::chrono::nanoseconds length : held) {
    std::printf("held %.3f ms\n", std::chrono::duration<double, std::milli>(length).count());
  }
  return static_cast<int>(held.size()) == count ? 0 : 1;
}
