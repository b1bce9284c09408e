// main() of the kernel tests (tests/backend/cpu): runs every test at the CPU level that
// --cpu-isa=LEVEL names (default auto, the best this CPU has), so CTest runs each kernel test at every
// level; exits 77, which CTest reports as skipped, when this CPU cannot run the level.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cpu_isa.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string level = "auto";
  const std::string flag = "--cpu-isa=";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind(flag, 0) == 0) level = std::string(argv[i]).substr(flag.size());
  const tessera::CpuFeatures cpu = tessera::detect_cpu_features();
  for (tessera::CpuIsa isa : tessera::kCpuIsaLevels)
    if (level == tessera::cpu_isa_name(isa) && !tessera::cpu_isa_supported(isa, cpu)) {
      std::printf("skipped: this CPU (%s) cannot run the %s level\n", tessera::cpu_features_string(cpu).c_str(),
                  level.c_str());
      return 77;
    }
  if (const tessera::Status s = tessera::select_cpu_isa(level); !s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 2;
  }
  std::printf("[ CPU level] %s\n", tessera::cpu_isa_summary().c_str());
  return RUN_ALL_TESTS();
}
