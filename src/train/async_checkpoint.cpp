// Asynchronous saves: snapshot on the training thread, write + file-based hand-over to rank 0 in
// a background thread (see async_checkpoint.h for the protocol).
#include "train/async_checkpoint.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "checkpoint/catalog.h"
#include "checkpoint/file_io.h"
#include "core/file_util.h"
#include "core/log.h"
#include "model/config_json.h"
#include "observe/timeline.h"

namespace fs = std::filesystem;

namespace tessera {
namespace {

std::string record_path(const checkpoint::CheckpointTarget& t, int rank) {
  return (fs::path(t.staging_dir()) / ("record_" + std::to_string(rank) + ".json")).string();
}

// Left by rank 0 in the staging directory when the save failed, so that ranks waiting for the
// checkpoint to complete stop at once instead of timing out.
std::string failure_path(const checkpoint::CheckpointTarget& t) {
  return (fs::path(t.staging_dir()) / "FAILED").string();
}

void mark_failed(const checkpoint::CheckpointTarget& t, const Status& why) {
  std::error_code ec;
  fs::create_directories(t.staging_dir(), ec);
  std::ofstream(failure_path(t), std::ios::trunc) << why.message() << "\n";
}

// This rank's outcome for rank 0: its shard record, or the error that stopped it.
Status write_record(const checkpoint::CheckpointTarget& t, int rank, const Status& outcome,
                    const checkpoint::ShardRecord& record) {
  nlohmann::json j = outcome.ok() ? nlohmann::json{{"ok", true}, {"record", checkpoint::shard_record_to_json(record)}}
                                  : nlohmann::json{{"ok", false}, {"error", outcome.message()}};
  std::error_code ec;
  fs::create_directories(t.staging_dir(), ec);
  const std::string path = record_path(t, rank), tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << j.dump() << "\n";
    if (!f) return io_error("cannot write '" + tmp + "'; check free space in the run directory");
  }
  fs::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename '" + tmp + "': " + ec.message());
  return Status::ok_status();
}

// Rank 0: every rank's record, waiting up to timeout_s for them to appear.
Result<std::vector<checkpoint::ShardRecord>> collect_records(const checkpoint::CheckpointTarget& t, int world,
                                                            double timeout_s) {
  std::vector<checkpoint::ShardRecord> records;
  const double deadline = Timeline::now_s() + timeout_s;
  for (int r = 0; r < world; ++r) {
    const std::string path = record_path(t, r);
    while (!fs::exists(path)) {
      if (Timeline::now_s() > deadline)
        return timeout_error("rank " + std::to_string(r) + " did not finish its part of the checkpoint of step " +
                             std::to_string(t.step) + " within " + std::to_string(static_cast<int>(timeout_s)) +
                             " s (no " + path + "); it may have died or its disk may be slow");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    TS_ASSIGN_OR_RETURN(std::string text, read_file(path));
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("ok")) return corrupt_data("unreadable checkpoint record " + path);
    if (!j["ok"].get<bool>())
      return io_error("rank " + std::to_string(r) + " could not write its shard: " + j.value("error", std::string()));
    TS_ASSIGN_OR_RETURN(checkpoint::ShardRecord rec, checkpoint::shard_record_from_json(j["record"]));
    records.push_back(std::move(rec));
  }
  return records;
}

Status finalize_on_rank0(const checkpoint::CheckpointTarget& t, int world, const nlohmann::json& config,
                         const nlohmann::json& state, const AsyncSaveOptions& o) {
  TS_ASSIGN_OR_RETURN(std::vector<checkpoint::ShardRecord> records, collect_records(t, world, o.timeout_s));
  TS_RETURN_IF_ERROR(checkpoint::write_manifest(t, records, config, state));
  for (int r = 0; r < world; ++r) fs::remove(record_path(t, r));
  TS_RETURN_IF_ERROR(checkpoint::finalize(t));
  return checkpoint::prune_checkpoints(t.run_dir, o.keep_last);
}

// Other ranks: wait (bounded) until rank 0 made the checkpoint complete or marked it failed; only
// fault injection needs this.
Status wait_until_complete(const checkpoint::CheckpointTarget& t, double timeout_s) {
  const double deadline = Timeline::now_s() + timeout_s;
  while (!fs::exists(fs::path(t.final_dir()) / checkpoint::kCompleteFile)) {
    if (fs::exists(failure_path(t)))
      return io_error("rank 0 could not complete checkpoint " + t.final_dir() + " (its error names the cause)");
    if (Timeline::now_s() > deadline) return timeout_error("checkpoint " + t.final_dir() + " never completed");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return Status::ok_status();
}

}  // namespace

AsyncCheckpointer::~AsyncCheckpointer() { (void)wait(); }

Status AsyncCheckpointer::wait() {
  if (!thread_.joinable()) return Status::ok_status();
  thread_.join();
  writer_.reset();
  return outcome_;
}

double AsyncCheckpointer::release_live_buffers() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!writing_live_) return 0;
    writing_live_ = false;
  }
  const double t0 = Timeline::now_s();
  last_frozen_bytes_ = writer_->freeze();
  return Timeline::now_s() - t0;
}

Status AsyncCheckpointer::start(Communicator& comm, const std::string& run_dir, const ModelConfig& cfg,
                                const std::vector<CheckpointChunk>& chunks, const TrainingState& state,
                                AsyncSaveOptions options) {
  const double t0 = Timeline::now_s();
  const Status previous = wait();
  if (!previous.ok()) log_error("the previous asynchronous checkpoint failed: " + previous.message());
  const double t1 = Timeline::now_s();
  last_wait_s_ = t1 - t0;
  uint64_t tag = checkpoint::default_staging_tag();
  TS_RETURN_IF_ERROR(comm.broadcast(&tag, sizeof tag, DType::u8, 0));
  const auto target = checkpoint::checkpoint_target(run_dir, state.step, tag);
  writer_ = std::make_unique<checkpoint::CheckpointWriter>(target, comm.rank());
  const bool live = options.live_allowed;
  last_live_ = live;
  last_frozen_bytes_ = 0;
  if (live) writer_->allow_freeze(frozen_);
  TS_RETURN_IF_ERROR(add_checkpoint_pieces(*writer_, chunks, &snapshot_, live));
  {
    std::lock_guard<std::mutex> lk(mu_);
    writing_live_ = live;
  }
  if (options.write_fault.at >= 0)
    writer_->limit_space(static_cast<int64_t>(options.write_fault.at * writer_->pending_bytes()), options.write_fault.kill);
  last_snapshot_s_ = Timeline::now_s() - t1;

  const int rank = comm.rank(), world = comm.size();
  nlohmann::json config = model_config_json(cfg), st = training_state_json(state, options.run_config);
  thread_ = std::thread([this, target, rank, world, config = std::move(config), st = std::move(st),
                         o = std::move(options)] {
    Status s = writer_->write_shard();
    {
      std::lock_guard<std::mutex> lk(mu_);
      writing_live_ = false;
    }
    Status handed = write_record(target, rank, s, writer_->record());
    if (s.ok()) s = handed;
    if (s.ok() && rank == 0) s = finalize_on_rank0(target, world, config, st, o);
    if (!s.ok() && rank == 0) mark_failed(target, s);
    if (s.ok() && o.after_complete) {
      s = rank == 0 ? Status::ok_status() : wait_until_complete(target, o.timeout_s);
      if (s.ok()) s = o.after_complete(target.final_dir());
    }
    if (!s.ok())
      log_error("asynchronous checkpoint of step " + std::to_string(target.step) + " failed: " + s.message() +
                " (the previous complete checkpoint stays the latest)");
    outcome_ = s;
  });
  return Status::ok_status();
}

}  // namespace tessera
