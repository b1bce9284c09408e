// Whole-checkpoint verification: shard files checked against the manifest, then each piece
// streamed through xxh64 in bounded chunks (a piece may be gigabytes; memory must not be).
#include "checkpoint/inspect.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include "checkpoint/catalog.h"
#include "checkpoint/file_io.h"
#include "checkpoint/fingerprint.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kChunkBytes = int64_t{8} << 20;

struct PieceRef {
  const TensorEntry* entry;
  const TensorPiece* piece;
  int64_t bytes;
  size_t tensor;  // index in the manifest (and in VerifyReport::fingerprints)
};

class Verifier {
 public:
  Verifier(const std::string& dir, const Manifest& m, const VerifyProgress& progress)
      : dir_(dir), m_(m), progress_(progress) {}

  VerifyReport run() {
    std::vector<std::vector<PieceRef>> by_rank(m_.shards.size());
    for (size_t t = 0; t < m_.tensors.size(); ++t) {
      const TensorEntry& e = m_.tensors[t];
      report_.fingerprints.push_back({e.key, e.fingerprint, 0, true});
      for (const TensorPiece& p : e.pieces) {
        if (p.numel == 0) continue;
        const int64_t bytes = p.numel * static_cast<int64_t>(dtype_size(e.dtype));
        by_rank[static_cast<size_t>(p.rank)].push_back({&e, &p, bytes, t});
        ++report_.pieces;
        report_.bytes += bytes;
      }
    }
    for (size_t r = 0; r < by_rank.size(); ++r) {
      // In file order, so each shard is read front to back.
      std::sort(by_rank[r].begin(), by_rank[r].end(), [](const PieceRef& a, const PieceRef& b) {
        return a.piece->offset_in_file < b.piece->offset_in_file;
      });
      verify_shard(m_.shards[r], by_rank[r]);
    }
    // Coverage was checked when the manifest was read: the pieces' partials add up to the tensor's.
    const std::string manifest = (fs::path(dir_) / kManifestFile).string();
    for (size_t t = 0; t < m_.tensors.size(); ++t) {
      const TensorFingerprint& f = report_.fingerprints[t];
      if (!f.saved) {
        ++report_.unfingerprinted;
      } else if (f.complete && *f.saved != f.stored) {
        ++report_.fingerprint_mismatches;
        const TensorEntry& e = m_.tensors[t];
        add({manifest, -1, e.key, 0, shape_numel(e.global_shape),
             "fingerprint mismatch: the stored pieces fingerprint to " + fingerprint_hex(f.stored) +
                 ", the manifest says " + fingerprint_hex(*f.saved) +
                 " (a piece missing, stored twice, at a wrong offset, or changed together with its checksum)"},
            0);
      }
    }
    return std::move(report_);
  }

 private:
  void add(Damage d, int64_t pieces) {
    report_.damaged_pieces += pieces;
    if (report_.damage.size() < kMaxListedDamage) report_.damage.push_back(std::move(d));
  }
  void piece_damage(const std::string& file, const PieceRef& p, std::string what) {
    report_.fingerprints[p.tensor].complete = false;
    add({file, p.piece->rank, p.entry->key, p.piece->global_offset, p.piece->global_offset + p.piece->numel,
         std::move(what)},
        1);
  }
  void skip(int64_t bytes) {
    done_ += bytes;
    if (progress_) progress_(done_, report_.bytes);
  }

  void verify_shard(const ShardRecord& s, const std::vector<PieceRef>& pieces) {
    const std::string file = (fs::path(dir_) / s.file).string();
    int64_t lost_bytes = 0;
    for (const PieceRef& p : pieces) lost_bytes += p.bytes;
    auto whole_file = [&](const std::string& what) {
      for (const PieceRef& p : pieces) report_.fingerprints[p.tensor].complete = false;
      add({file, s.rank, "", 0, 0, what}, static_cast<int64_t>(pieces.size()));
      skip(lost_bytes);
    };
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(file, ec)))
      return whole_file("missing: its " + std::to_string(pieces.size()) + " pieces cannot be read");
    if (!fs::is_regular_file(file, ec)) return whole_file("not a regular file");
    auto f = ReadOnlyFile::open(file);
    if (!f.ok()) return whole_file(f.status().message());
    const int64_t size = f->size();
    if (size > s.bytes) {
      add({file, s.rank, "", 0, 0,
           "has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(s.bytes) + " (extra data)"},
          0);
    }
    for (const PieceRef& p : pieces) {
      const int64_t end = p.piece->offset_in_file + p.bytes;
      if (end > size) {
        piece_damage(file, p,
                     "cut off: the piece ends at byte " + std::to_string(end) + " but the file has only " +
                         std::to_string(size) + " of its recorded " + std::to_string(s.bytes) + " (truncated)");
        skip(p.bytes);
        continue;
      }
      verify_piece(file, *f, p);
    }
  }

  void verify_piece(const std::string& file, const ReadOnlyFile& f, const PieceRef& p) {
    std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(), &XXH64_freeState);
    XXH64_reset(state.get(), 0);
    buffer_.resize(static_cast<size_t>(std::min(kChunkBytes, p.bytes)));
    const int64_t esize = static_cast<int64_t>(dtype_size(p.entry->dtype));  // divides kChunkBytes
    uint64_t fingerprint = 0;
    for (int64_t off = 0; off < p.bytes;) {
      const int64_t n = std::min(kChunkBytes, p.bytes - off);
      Status s = f.read_at(p.piece->offset_in_file + off, static_cast<size_t>(n), buffer_.data());
      if (!s.ok()) {
        piece_damage(file, p, "unreadable: " + s.message());
        skip(p.bytes - off);
        return;
      }
      XXH64_update(state.get(), buffer_.data(), static_cast<size_t>(n));
      fingerprint += fingerprint_elements(p.entry->dtype, p.piece->global_offset + off / esize, n / esize, buffer_.data());
      off += n;
      skip(n);
    }
    if (XXH64_digest(state.get()) != p.piece->checksum) {
      piece_damage(file, p, "checksum mismatch");
      return;
    }
    report_.fingerprints[p.tensor].stored += fingerprint;
    ++report_.pieces_ok;
  }

  const std::string& dir_;
  const Manifest& m_;
  const VerifyProgress& progress_;
  VerifyReport report_;
  std::vector<char> buffer_;
  int64_t done_ = 0;
};

}  // namespace

VerifyReport verify_checkpoint(const std::string& dir, const Manifest& m, const VerifyProgress& progress) {
  return Verifier(dir, m, progress).run();
}

std::string recovery_advice(const std::string& dir) {
  const fs::path path = fs::path(dir).lexically_normal();
  const fs::path checkpoints = path.parent_path();
  int64_t step = 0;
  if (!parse_step_dir_name(path.filename().string(), &step) || checkpoints.filename() != "checkpoints")
    return "restore the checkpoint from a backup";
  const std::string run = checkpoints.parent_path().string();
  auto all = list_complete_checkpoints(run.empty() ? "." : run);
  const CheckpointInfo* previous = nullptr;
  if (all.ok())
    for (const CheckpointInfo& c : *all)
      if (c.step < step) previous = &c;
  if (!previous)
    return "no earlier complete checkpoint exists in '" + checkpoints.string() +
           "': restore this one from a backup or start a new run";
  return "resume from the previous checkpoint " + fs::path(previous->path).filename().string() + " ('" +
         previous->path + "'): move the damaged " + path.filename().string() + " out of '" + checkpoints.string() +
         "' first, so that --resume picks the previous one";
}

}  // namespace tessera::checkpoint
