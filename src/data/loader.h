// Training and evaluation data loaders over one split of a prepared dataset.
// DataLoader: shuffled windows, deterministic in (seed, epoch), sliced by (rank, world), prefetched
// on a background thread, exactly resumable from a LoaderPosition. EvalLoader: sequential windows.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "data/manifest.h"
#include "data/window_index.h"

namespace tessera {

// Context parallelism: a rank holds T/count positions of every sequence (its inputs and their
// targets), so next_batch fills B * T/count of each.
//   contiguous (Ulysses): positions [index*T/count, (index+1)*T/count); T % count must be 0.
//   balanced (ring attention's causal load balance): the two pieces index and 2*count-1-index of
//   length h = T/(2*count), piece-major: the first pieces of the B sequences (B x h), then their
//   second pieces (B x h). T % (2*count) must be 0.
struct SequenceChunk {
  int index = 0;
  int count = 1;
  bool balanced = false;
};

struct LoaderConfig {
  int B = 4;    // sequences per micro-batch on this rank
  int T = 64;   // sequence length
  SequenceChunk chunk;  // this rank's positions of each sequence (all of them by default)
  uint64_t seed = 1337;
  int rank = 0;
  int world = 1;  // data-parallel ranks sharing the stream
  int prefetch_depth = 2;  // ready batches kept ahead; 0 = no thread, batches made inside next_batch
};

// Where the shared stream stands: `index` global sequences of `epoch` consumed. The same on every
// rank, so a checkpoint stores it once; the two integers are the whole state.
struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t index = 0;
  bool operator==(const LoaderPosition&) const = default;
};

// One sequence of the stream: the window at `position` of epoch `epoch`'s permutation (its stable id
// in the dataset split is `window`).
struct SampleId {
  uint64_t epoch = 0, position = 0, window = 0;
  bool operator==(const SampleId&) const = default;
};

// The stream: epoch e is the permutation epoch_permutation(num_windows, seed, e) of all windows,
// epochs concatenated. Each step takes the next B*world sequences (wrapping into the next epoch
// when one ends); rank r gets sequences [r*B, (r+1)*B) of them. So the union over ranks equals the
// world=1 stream with batch B*world.
class DataLoader {
 public:
  static Result<std::unique_ptr<DataLoader>> open(const DatasetManifest& m, const std::string& split, const LoaderConfig& c);
  static Result<std::unique_ptr<DataLoader>> open_shards(const std::vector<std::string>& shard_paths, const LoaderConfig& c);
  ~DataLoader();  // stops and joins the prefetch thread
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Fills B*T inputs and B*T targets (targets[i] is the token after inputs[i]); B*T/count each with a
  // SequenceChunk. Never fails: the shards were validated when opened.
  void next_batch(int32_t* inputs, int32_t* targets);
  // Position after the last batch returned by next_batch (prefetched batches do not count).
  LoaderPosition position() const { return consumed_; }
  // The B sequences of the last batch next_batch returned (train.sample_ledger records them).
  const std::vector<SampleId>& last_samples() const { return last_samples_; }
  // The batches after this call are the ones that followed `p` in the original run.
  Status restore(const LoaderPosition& p);

  // Cumulative seconds next_batch spent waiting for the prefetch thread (or making the batch itself
  // when prefetch_depth is 0): loader time as the trainer sees it.
  double wait_seconds() const { return wait_seconds_; }
  uint64_t windows_per_epoch() const { return index_.num_windows(); }
  uint64_t tokens() const { return index_.num_tokens(); }
  const LoaderConfig& config() const { return cfg_; }

 private:
  struct Batch {
    std::vector<int32_t> windows;  // B rows of T+1 tokens
    std::vector<SampleId> samples;  // which sequence each row is
    LoaderPosition after;
  };
  DataLoader(WindowIndex index, const LoaderConfig& c);
  Batch make_batch(LoaderPosition& pos);  // advances pos by one global batch
  void start_thread();
  void stop_thread();
  void producer_loop();

  WindowIndex index_;
  LoaderConfig cfg_;
  LoaderPosition consumed_;
  std::vector<SampleId> last_samples_;
  LoaderPosition produced_;  // owned by the producer while it runs
  // Permutation cache, used only by whoever makes batches (one thread at a time).
  uint64_t perm_epoch_ = UINT64_MAX;
  std::vector<uint32_t> perm_;
  double wait_seconds_ = 0.0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Sequential, unshuffled windows for evaluation. Batches are sliced over ranks like DataLoader's;
// the final partial global batch is dropped so every rank sees the same number of batches.
class EvalLoader {
 public:
  static Result<EvalLoader> open(const DatasetManifest& m, const std::string& split, int B, int T, int rank = 0,
                                 int world = 1, SequenceChunk chunk = {});
  static Result<EvalLoader> open_shards(const std::vector<std::string>& shard_paths, int B, int T, int rank = 0,
                                        int world = 1, SequenceChunk chunk = {});
  // False (and nothing written) when the split is exhausted.
  bool next_batch(int32_t* inputs, int32_t* targets);
  void reset() { next_ = 0; }
  uint64_t num_batches() const { return index_.num_windows() / (static_cast<uint64_t>(B_) * world_); }

 private:
  EvalLoader(WindowIndex index, int B, int rank, int world, SequenceChunk chunk)
      : index_(std::move(index)), B_(B), rank_(rank), world_(world), chunk_(chunk) {}
  WindowIndex index_;
  int B_, rank_, world_;
  SequenceChunk chunk_;
  uint64_t next_ = 0;  // batches returned since reset
  std::vector<int32_t> row_;
};

}  // namespace tessera
