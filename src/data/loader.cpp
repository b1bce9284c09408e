// DataLoader (shuffled, sliced, prefetched, resumable) and EvalLoader (sequential).
#include "data/loader.h"

#include <chrono>
#include <cstring>

namespace tessera {

namespace {

Status check_shape(int B, int T, int rank, int world, SequenceChunk chunk = {}) {
  if (B < 1 || T < 1) return invalid_argument("loader batch size B and sequence length T must be >= 1 (B=" + std::to_string(B) +
                                              ", T=" + std::to_string(T) + ")");
  if (world < 1 || rank < 0 || rank >= world)
    return invalid_argument("loader rank " + std::to_string(rank) + " is outside world size " + std::to_string(world));
  const int pieces = chunk.balanced ? 2 * chunk.count : chunk.count;
  if (chunk.count < 1 || chunk.index < 0 || chunk.index >= chunk.count || T % pieces != 0)
    return invalid_argument("loader sequence chunk " + std::to_string(chunk.index) + " of " + std::to_string(chunk.count) +
                            (chunk.balanced ? " (two balanced pieces each)" : "") + " does not split sequences of " +
                            std::to_string(T) + " tokens: the sequence length must be a multiple of " +
                            std::to_string(pieces));
  return Status();
}

std::string split_name(const DatasetManifest& m, const std::string& split) {
  return split + " split of " + m.dir;
}

// Sequence j's window of T+1 tokens into this chunk's T/count inputs and their targets, at their
// places in the (B, T/count) batch (SequenceChunk's layout).
void split_window(const int32_t* w, int T, int B, int j, SequenceChunk chunk, int32_t* in, int32_t* tgt) {
  auto piece = [&](int first, int n, size_t at) {
    std::memcpy(in + at, w + first, sizeof(int32_t) * n);
    std::memcpy(tgt + at, w + first + 1, sizeof(int32_t) * n);
  };
  if (!chunk.balanced) {
    const int n = T / chunk.count;
    piece(chunk.index * n, n, static_cast<size_t>(j) * n);
    return;
  }
  const int h = T / (2 * chunk.count);
  piece(chunk.index * h, h, static_cast<size_t>(j) * h);
  piece((2 * chunk.count - 1 - chunk.index) * h, h, static_cast<size_t>(B + j) * h);
}

}  // namespace

Result<std::unique_ptr<DataLoader>> DataLoader::open(const DatasetManifest& m, const std::string& split, const LoaderConfig& c) {
  TS_RETURN_IF_ERROR(check_shape(c.B, c.T, c.rank, c.world, c.chunk));
  TS_ASSIGN_OR_RETURN(WindowIndex ix, WindowIndex::open(m.shard_paths(split), c.T, split_name(m, split)));
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(ix), c));
}

Result<std::unique_ptr<DataLoader>> DataLoader::open_shards(const std::vector<std::string>& shard_paths, const LoaderConfig& c) {
  TS_RETURN_IF_ERROR(check_shape(c.B, c.T, c.rank, c.world, c.chunk));
  TS_ASSIGN_OR_RETURN(WindowIndex ix, WindowIndex::open(shard_paths, c.T, "given shard list"));
  return std::unique_ptr<DataLoader>(new DataLoader(std::move(ix), c));
}

DataLoader::DataLoader(WindowIndex index, const LoaderConfig& c) : index_(std::move(index)), cfg_(c) {
  if (cfg_.prefetch_depth < 0) cfg_.prefetch_depth = 0;
  start_thread();
}

DataLoader::~DataLoader() { stop_thread(); }

DataLoader::Batch DataLoader::make_batch(LoaderPosition& pos) {
  const uint64_t N = index_.num_windows();
  const uint64_t B = static_cast<uint64_t>(cfg_.B);
  const int T = cfg_.T;
  Batch b;
  b.windows.resize(B * (T + 1));
  for (uint64_t j = 0; j < B; ++j) {
    const uint64_t off = pos.index + static_cast<uint64_t>(cfg_.rank) * B + j;
    const uint64_t epoch = pos.epoch + off / N;
    if (epoch != perm_epoch_) {
      perm_ = epoch_permutation(N, cfg_.seed, epoch);
      perm_epoch_ = epoch;
    }
    index_.read_window(perm_[off % N], &b.windows[j * (T + 1)]);
    b.samples.push_back({epoch, off % N, perm_[off % N]});
  }
  const uint64_t off = pos.index + B * static_cast<uint64_t>(cfg_.world);
  pos.epoch += off / N;
  pos.index = off % N;
  b.after = pos;
  return b;
}

void DataLoader::start_thread() {
  if (cfg_.prefetch_depth == 0) return;
  stop_ = false;
  thread_ = std::thread([this] { producer_loop(); });
}

void DataLoader::stop_thread() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DataLoader::producer_loop() {
  while (true) {
    Batch b = make_batch(produced_);  // the slow part, outside the lock
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return stop_ || queue_.size() < static_cast<size_t>(cfg_.prefetch_depth); });
    if (stop_) return;
    queue_.push_back(std::move(b));
    cv_.notify_all();
  }
}

void DataLoader::next_batch(int32_t* inputs, int32_t* targets) {
  const auto t0 = std::chrono::steady_clock::now();
  Batch b;
  if (cfg_.prefetch_depth == 0) {
    b = make_batch(produced_);
  } else {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !queue_.empty(); });
    b = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
  }
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int T = cfg_.T;
  for (int j = 0; j < cfg_.B; ++j)
    split_window(&b.windows[static_cast<size_t>(j) * (T + 1)], T, cfg_.B, j, cfg_.chunk, inputs, targets);
  consumed_ = b.after;
  last_samples_ = std::move(b.samples);
}

Status DataLoader::restore(const LoaderPosition& p) {
  if (p.index >= index_.num_windows())
    return invalid_argument("loader position index " + std::to_string(p.index) + " is beyond this split's " +
                            std::to_string(index_.num_windows()) + " windows per epoch (T=" + std::to_string(cfg_.T) +
                            "): the checkpoint was made with another dataset or sequence length");
  stop_thread();
  queue_.clear();
  produced_ = consumed_ = p;
  start_thread();
  return Status();
}

Result<EvalLoader> EvalLoader::open(const DatasetManifest& m, const std::string& split, int B, int T, int rank, int world,
                                    SequenceChunk chunk) {
  TS_RETURN_IF_ERROR(check_shape(B, T, rank, world, chunk));
  TS_ASSIGN_OR_RETURN(WindowIndex ix, WindowIndex::open(m.shard_paths(split), T, split_name(m, split)));
  return EvalLoader(std::move(ix), B, rank, world, chunk);
}

Result<EvalLoader> EvalLoader::open_shards(const std::vector<std::string>& shard_paths, int B, int T, int rank, int world,
                                           SequenceChunk chunk) {
  TS_RETURN_IF_ERROR(check_shape(B, T, rank, world, chunk));
  TS_ASSIGN_OR_RETURN(WindowIndex ix, WindowIndex::open(shard_paths, T, "given shard list"));
  return EvalLoader(std::move(ix), B, rank, world, chunk);
}

bool EvalLoader::next_batch(int32_t* inputs, int32_t* targets) {
  if (next_ >= num_batches()) return false;
  const int T = index_.T();
  row_.resize(static_cast<size_t>(T) + 1);
  const uint64_t base = next_ * static_cast<uint64_t>(B_) * world_ + static_cast<uint64_t>(rank_) * B_;
  for (int j = 0; j < B_; ++j) {
    index_.read_window(base + j, row_.data());
    split_window(row_.data(), T, B_, j, chunk_, inputs, targets);
  }
  ++next_;
  return true;
}

}  // namespace tessera
