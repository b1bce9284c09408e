// Logical fingerprints of checkpoint tensors: a 64-bit value of a tensor's unsharded contents that
// does not depend on how the tensor was cut into pieces (dp/tp/pp/ZeRO layouts), so any layout can
// recompute it from the ranges it holds and compare with what the saving layout recorded.
//
// fingerprint(T) = sum over elements i of term(i, bits(T[i]))  (mod 2^64)
// The sum is over the flattened global tensor; a piece's partial sum needs only its own elements
// and their global positions, and partials add up in any order (across pieces, chunks and ranks).
// term() depends on the position, so a range stored at a wrong offset, stored twice or missing
// changes the sum (with probability ~1 - 2^-60), as does a changed value -- zeros included.
// It is not a cryptographic hash: it guards against bugs and damage, not against forgery.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace tessera::checkpoint {

// The partial fingerprint of elements [global_offset, global_offset + numel) of a flattened tensor
// of `dtype`, held in `data` (numel elements, little-endian as in a shard file). The fingerprint of
// a whole tensor is the sum (mod 2^64) of the partials of any pieces that cover it exactly once.
// About as fast as xxh64 of the same bytes (docs/fault-tolerance.md has the measured cost).
uint64_t fingerprint_elements(DType dtype, int64_t global_offset, int64_t numel, const void* data);

// The fingerprint of a manifest's training state (step, data position, optimizer step count, run
// config -- the counters that are not tensors): xxh64 of its canonical JSON text (keys sorted, as
// nlohmann::json keeps them), so the same values give the same fingerprint however they were written.
uint64_t state_fingerprint(const nlohmann::json& state);

// 16 lowercase hex digits, the form manifests store; and its inverse (false unless exactly that).
std::string fingerprint_hex(uint64_t fingerprint);
bool parse_fingerprint_hex(std::string_view text, uint64_t* fingerprint);

}  // namespace tessera::checkpoint
