// Agreement check over a communicator.
#include "comm/agreement.h"

#include <cstdio>
#include <vector>

// Inlined XXH3 under -march=native trips a false -Wmaybe-uninitialized inside GCC 12 AVX-512 headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera {

uint64_t agreement_hash(const void* data, size_t bytes, uint64_t seed) { return XXH3_64bits_withSeed(data, bytes, seed); }
uint64_t agreement_hash(std::string_view text, uint64_t seed) { return agreement_hash(text.data(), text.size(), seed); }

static std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

Status check_agreement(Communicator& comm, std::string_view what, uint64_t value) {
  std::vector<uint64_t> all(comm.size());
  TS_RETURN_IF_ERROR(comm.all_gather_async(&value, all.data(), sizeof(uint64_t), DType::u8).wait());
  std::string differ, values;
  int n_differ = 0;
  for (int r = 1; r < comm.size(); ++r) {
    if (all[r] == all[0]) continue;
    differ += (n_differ++ ? ", " : "") + std::to_string(r);
    values += "; rank " + std::to_string(r) + ": " + hex(all[r]);
  }
  if (n_differ == 0) return Status();
  return invalid_argument("agreement check '" + std::string(what) + "' failed on communicator '" + comm.name() +
                          "': ranks [" + differ + "] differ from rank 0 (rank 0: " + hex(all[0]) + values +
                          "); every rank must be given the same model, config and data layout");
}

}  // namespace tessera
