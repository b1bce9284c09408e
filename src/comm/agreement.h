// Start-up agreement check (Horovod-style "negotiate before a collective"): all ranks compare a
// 64-bit hash of something that must be identical everywhere (model shapes, config, step), so a
// mismatch becomes an error naming the ranks instead of a hang or silent corruption later.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "comm/communicator.h"

namespace tessera {

// 64-bit hash (XXH3) of bytes; chain values by passing the previous hash as seed.
uint64_t agreement_hash(const void* data, size_t bytes, uint64_t seed = 0);
uint64_t agreement_hash(std::string_view text, uint64_t seed = 0);

// Collective (an async all_gather, so it times out if a rank never calls it). Returns the same
// error on every rank when any rank's value differs from rank 0's, naming those ranks.
Status check_agreement(Communicator& comm, std::string_view what, uint64_t value);

}  // namespace tessera
