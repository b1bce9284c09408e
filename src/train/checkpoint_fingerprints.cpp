// Load-side fingerprint check: per-rank partials over the owned pieces, summed across ranks with one
// all_gather (the communicator has no 64-bit integer sum; the partials are moved as bytes), then
// compared key by key with the manifest.
#include "train/checkpoint_fingerprints.h"

#include <cstring>
#include <vector>

#include "checkpoint/fingerprint.h"
#include "checkpoint/reader.h"

namespace tessera {

std::map<std::string, uint64_t> partial_fingerprints(const std::vector<CheckpointChunk>& chunks) {
  std::map<std::string, uint64_t> out;
  std::vector<float> host;  // one piece, crossed to the host to be fingerprinted
  // `be`: whose memory `data` is (nullptr: host memory, read in place).
  auto add = [&](const std::string& key, int64_t global_offset, int64_t numel, const float* data, Backend* be) {
    if (numel > 0 && be) {  // crosses to the host: the loaded values' fingerprint
      host.resize(static_cast<size_t>(numel));
      be->copy_to_host(host.data(), data, static_cast<size_t>(numel) * sizeof(float));
      data = host.data();
    }
    out[key] += numel > 0 ? checkpoint::fingerprint_elements(DType::f32, global_offset, numel, data) : 0;
  };
  for (const CheckpointChunk& c : chunks) {
    if (!c.store) continue;
    for (const SavedPiece& s : checkpoint_pieces(c.store->layout(), c.owned)) {
      add("param/" + s.param->name, s.global_offset, s.numel, c.store->params() + s.flat_offset, c.store->backend());
      if (!c.opt) continue;
      const int64_t at = s.flat_offset - c.opt->begin();
      add("adam_m/" + s.param->name, s.global_offset, s.numel, c.opt->m() + at, c.opt->backend());
      add("adam_v/" + s.param->name, s.global_offset, s.numel, c.opt->v() + at, c.opt->backend());
    }
    for (const ExtraTensor& e : c.extra) add(e.key, e.global_offset, e.numel, e.data, nullptr);
  }
  return out;
}

Status compare_fingerprints(const std::string& checkpoint_dir, const std::vector<checkpoint::TensorEntry>& saved,
                            const std::map<std::string, uint64_t>& sums, int64_t* checked) {
  constexpr size_t kMaxNamed = 8;
  std::vector<std::string> bad;
  int64_t n = 0;
  for (const checkpoint::TensorEntry& e : saved) {
    auto it = sums.find(e.key);
    if (it == sums.end() || !e.fingerprint) continue;
    ++n;
    if (it->second == *e.fingerprint) continue;
    if (bad.size() < kMaxNamed)
      bad.push_back("'" + e.key + "' loads as " + checkpoint::fingerprint_hex(it->second) + " but was saved as " +
                    checkpoint::fingerprint_hex(*e.fingerprint));
    else if (bad.size() == kMaxNamed)
      bad.push_back("...");
  }
  if (checked) *checked = n;
  if (bad.empty()) return Status::ok_status();
  std::string list;
  for (const std::string& b : bad) list += (list.empty() ? "" : "; ") + b;
  return corrupt_data("checkpoint '" + checkpoint_dir + "' does not load as it was saved: the fingerprint of " +
                      (bad.size() == 1 ? "tensor " : "tensors ") + list +
                      ". What this layout read differs from the tensor the saving layout fingerprinted (a piece "
                      "missing, stored twice, at a wrong offset, or changed with its checksum); run `tessera "
                      "checkpoint fingerprint " + checkpoint_dir +
                      "` to check the stored pieces, and resume from an earlier checkpoint (move this one aside)");
}

Result<int64_t> verify_loaded_fingerprints(Communicator& comm, const std::string& checkpoint_dir,
                                           const std::vector<CheckpointChunk>& chunks) {
  TS_ASSIGN_OR_RETURN(checkpoint::Manifest m, checkpoint::read_manifest(checkpoint_dir));
  const std::map<std::string, uint64_t> mine = partial_fingerprints(chunks);
  // Per manifest tensor (the same order on every rank): [known here, partial sum].
  const size_t k = m.tensors.size();
  std::vector<uint64_t> local(2 * k, 0), all(2 * k * static_cast<size_t>(comm.size()), 0);
  for (size_t i = 0; i < k; ++i) {
    auto it = mine.find(m.tensors[i].key);
    if (it == mine.end()) continue;
    local[2 * i] = 1;
    local[2 * i + 1] = it->second;
  }
  TS_RETURN_IF_ERROR(comm.all_gather(local.data(), all.data(), 2 * k * sizeof(uint64_t), DType::u8));
  std::map<std::string, uint64_t> sums;  // tensors some rank holds: the others are not checked here
  for (size_t i = 0; i < k; ++i) {
    bool known = false;
    uint64_t sum = 0;
    for (int r = 0; r < comm.size(); ++r) {
      const uint64_t* at = all.data() + 2 * k * static_cast<size_t>(r) + 2 * i;
      known = known || at[0] != 0;
      sum += at[1];
    }
    if (known) sums[m.tensors[i].key] = sum;
  }
  int64_t checked = 0;
  TS_RETURN_IF_ERROR(compare_fingerprints(checkpoint_dir, m.tensors, sums, &checked));
  return checked;
}

}  // namespace tessera
