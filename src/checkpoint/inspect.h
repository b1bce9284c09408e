// Verifying a whole checkpoint for `tessera checkpoint inspect` and `fingerprint`: every piece of
// every shard file is read (streamed, so memory stays bounded) and checked against its checksum,
// every damaged piece is named with its file, tensor and element range, and each tensor's logical
// fingerprint is recomputed from its stored pieces and compared with the manifest's. Reading never
// modifies a file.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/format.h"

namespace tessera::checkpoint {

// One thing wrong: a piece (key set), a whole shard file (key empty), or a whole tensor whose stored
// pieces do not fingerprint as the manifest says (rank -1, file the manifest).
struct Damage {
  std::string file;  // the shard file's path (the manifest's for a fingerprint mismatch)
  int rank = 0;
  std::string key;
  int64_t begin = 0, end = 0;  // the piece's elements [begin, end) of the flattened tensor
  std::string what;            // "checksum mismatch", "cut off at byte 123 ...", ...
};

// One tensor's logical fingerprint: as saved (the manifest) and as its stored pieces add up.
struct TensorFingerprint {
  std::string key;
  std::optional<uint64_t> saved;  // absent: saved before fingerprints existed (nothing to compare)
  uint64_t stored = 0;            // sum of the partials of the pieces read
  bool complete = true;           // every piece was read (false: a piece was damaged or cut off)
  bool matches() const { return complete && saved && *saved == stored; }
};

struct VerifyReport {
  int64_t pieces = 0;          // stored pieces (numel > 0) in the manifest
  int64_t pieces_ok = 0;       // of these, read whole with a matching checksum
  int64_t bytes = 0;           // bytes of all pieces
  int64_t damaged_pieces = 0;  // pieces that are corrupt, cut off or in an unreadable file
  std::vector<Damage> damage;  // the first kMaxListedDamage problems, pieces and files
  std::vector<TensorFingerprint> fingerprints;  // one per manifest tensor, in manifest order
  int64_t fingerprint_mismatches = 0;           // complete tensors whose stored pieces differ from `saved`
  int64_t unfingerprinted = 0;                  // tensors without a saved fingerprint
  bool ok() const { return damage.empty(); }
};
inline constexpr size_t kMaxListedDamage = 20;

// Called after each chunk read: bytes verified so far of `total`.
using VerifyProgress = std::function<void(int64_t done, int64_t total)>;

// Checks every shard file of the checkpoint at `dir` (whose manifest read_manifest returned):
// present, a regular file, of its recorded size; then every piece's checksum. A truncated file's
// pieces that lie wholly before its end are still verified, the ones cut off are named.
VerifyReport verify_checkpoint(const std::string& dir, const Manifest& m, const VerifyProgress& progress = {});

// What to do about a damaged checkpoint `dir` (<run>/checkpoints/step_<n>): resume from the newest
// complete checkpoint before it, naming it, or -- when there is none -- restore or start over.
std::string recovery_advice(const std::string& dir);

}  // namespace tessera::checkpoint
