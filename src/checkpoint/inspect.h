// Verifying a whole checkpoint for `tessera checkpoint inspect`: every piece of every shard file is
// read (streamed, so memory stays bounded) and checked against its checksum, and every damaged
// piece is named with its file, tensor and element range. Reading never modifies a file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/format.h"

namespace tessera::checkpoint {

// One thing wrong: a piece (key set) or a whole shard file (key empty).
struct Damage {
  std::string file;  // the shard file's path
  int rank = 0;
  std::string key;
  int64_t begin = 0, end = 0;  // the piece's elements [begin, end) of the flattened tensor
  std::string what;            // "checksum mismatch", "cut off at byte 123 ...", ...
};

struct VerifyReport {
  int64_t pieces = 0;          // stored pieces (numel > 0) in the manifest
  int64_t pieces_ok = 0;       // of these, read whole with a matching checksum
  int64_t bytes = 0;           // bytes of all pieces
  int64_t damaged_pieces = 0;  // pieces that are corrupt, cut off or in an unreadable file
  std::vector<Damage> damage;  // the first kMaxListedDamage problems, pieces and files
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
