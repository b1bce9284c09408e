// Fault injection (TESSERA_FAULT): parsing, and the faults acting at step hooks and checkpoints.
#include "train/fault_injection.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "checkpoint/format.h"
#include "checkpoint/reader.h"
#include "core/log.h"
#include "train/numerics_fault.h"

namespace fs = std::filesystem;

namespace tessera {
namespace {

constexpr std::string_view kForms =
    "expected items like crash:rank=2:step=5 (kinds: crash, hang, hang_after_update, fail, perturb, slow[:factor=F], "
    "corrupt_shard, truncate_shard, disk_full, crash_in_save, nan and spike[:factor=F] with "
    ":layer=L:pass=forward|backward:micro_batch=M[:op=NAME]; optional :attempt=K), separated by commas";

struct KindName {
  FaultKind kind;
  std::string_view name;
};
constexpr KindName kKinds[] = {{FaultKind::crash, "crash"},
                               {FaultKind::hang, "hang"},
                               {FaultKind::hang_after_update, "hang_after_update"},
                               {FaultKind::fail, "fail"},
                               {FaultKind::perturb, "perturb"},
                               {FaultKind::slow, "slow"},
                               {FaultKind::corrupt_shard, "corrupt_shard"},
                               {FaultKind::truncate_shard, "truncate_shard"},
                               {FaultKind::disk_full, "disk_full"},
                               {FaultKind::crash_in_save, "crash_in_save"},
                               {FaultKind::nan, "nan"},
                               {FaultKind::spike, "spike"}};

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

Result<double> number(std::string_view item, std::string_view key, std::string_view text) {
  const std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0')
    return invalid_argument("TESSERA_FAULT item '" + std::string(item) + "': " + std::string(key) + "=" + t +
                            " is not a number");
  return v;
}

Result<Fault> parse_item(std::string_view item) {
  const std::vector<std::string_view> parts = split(item, ':');
  Fault f;
  bool known = false, has_rank = false, has_step = false;
  for (const KindName& k : kKinds)
    if (k.name == parts[0]) f.kind = k.kind, known = true;
  if (!known)
    return invalid_argument("TESSERA_FAULT item '" + std::string(item) + "': unknown kind '" + std::string(parts[0]) +
                            "'; " + std::string(kForms));
  const bool numerics = f.kind == FaultKind::nan || f.kind == FaultKind::spike;
  if (f.kind == FaultKind::spike) f.factor = 1000;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string_view::npos)
      return invalid_argument("TESSERA_FAULT item '" + std::string(item) + "': '" + std::string(parts[i]) +
                              "' is not key=value; " + std::string(kForms));
    const std::string_view key = parts[i].substr(0, eq), text = parts[i].substr(eq + 1);
    if (numerics && key == "op") {
      f.op = std::string(text);
      continue;
    }
    if (numerics && key == "pass") {
      if (text != "forward" && text != "backward")
        return invalid_argument("TESSERA_FAULT item '" + std::string(item) + "': pass=" + std::string(text) +
                                " must be forward or backward");
      f.pass = text == "forward" ? ModelPass::forward : ModelPass::backward;
      continue;
    }
    TS_ASSIGN_OR_RETURN(double v, number(item, key, text));
    if (key == "rank") f.rank = static_cast<int>(v), has_rank = true;
    else if (key == "step") f.step = static_cast<int64_t>(v), has_step = true;
    else if (key == "attempt") f.attempt = static_cast<int>(v);
    else if (key == "factor" && f.kind == FaultKind::slow && v >= 1) f.factor = v;
    else if (key == "factor" && f.kind == FaultKind::spike && v > 0) f.factor = v;
    else if (key == "layer" && numerics && v >= -1) f.layer = static_cast<int>(v);
    else if (key == "micro_batch" && numerics && v >= 0) f.micro_batch = static_cast<int>(v);
    else
      return invalid_argument("TESSERA_FAULT item '" + std::string(item) + "': key '" + std::string(key) +
                              "' is not accepted here (rank, step, attempt; slow also factor >= 1; nan and spike "
                              "also layer >= -1, pass, micro_batch >= 0, op, and spike factor > 0)");
  }
  if (!has_rank || !has_step || f.rank < 0 || f.step < 1)
    return invalid_argument("TESSERA_FAULT item '" + std::string(item) + "' needs rank=R (>= 0) and step=S (>= 1)");
  return f;
}

// CPU time of the calling thread: the rank's own compute, without the time it was descheduled
// (on oversubscribed cores its peers spin in MPI waits) -- so `slow` stretches what the rank did.
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

[[noreturn]] void hang_forever() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace

Result<std::vector<Fault>> parse_faults(std::string_view spec) {
  std::vector<Fault> out;
  for (std::string_view item : split(spec, ',')) {
    if (item.empty()) continue;
    TS_ASSIGN_OR_RETURN(Fault f, parse_item(item));
    out.push_back(f);
  }
  return out;
}

Result<std::unique_ptr<FaultInjection>> FaultInjection::from_spec(std::string_view spec, int rank, int attempt,
                                                                  std::unique_ptr<StepHooks> inner) {
  std::vector<Fault> faults;
  if (!spec.empty()) {
    TS_ASSIGN_OR_RETURN(faults, parse_faults(spec));
  }
  return std::make_unique<FaultInjection>(std::move(faults), rank, attempt, std::move(inner));
}

FaultInjection::FaultInjection(std::vector<Fault> faults, int rank, int attempt, std::unique_ptr<StepHooks> inner)
    : rank_(rank), inner_(std::move(inner)) {
  for (const Fault& f : faults)
    if (f.rank == rank && f.attempt == attempt) faults_.push_back(f);
}

const Fault* FaultInjection::find(FaultKind kind, int64_t step) const {
  for (const Fault& f : faults_)
    if (f.kind == kind && (f.step == step || (kind == FaultKind::slow && step >= f.step))) return &f;
  return nullptr;
}

Status FaultInjection::at(StepPoint point, int64_t step, ParamStore& store) {
  if (point == StepPoint::step_begin) {
    if (numerics_probe_) numerics_probe_->set_step(step);
    if (find(FaultKind::crash, step)) {
      log_error("injected fault: crash (SIGKILL) at the start of step " + std::to_string(step));
      std::fflush(nullptr);
      ::kill(::getpid(), SIGKILL);
    }
    if (find(FaultKind::hang, step)) {
      log_error("injected fault: hang at the start of step " + std::to_string(step));
      hang_forever();
    }
    if (find(FaultKind::fail, step))
      return internal_error("injected fault: fail on rank " + std::to_string(rank_) + " at step " + std::to_string(step));
    if (!faults_.empty()) step_start_ = thread_cpu_s();  // only a slow fault reads it
  } else if (point == StepPoint::after_update) {
    // Stretches the step to `factor` times this rank's own compute for it (its peers wait for it
    // in the next step's communication, as they would for a slower machine).
    if (const Fault* f = find(FaultKind::slow, step)) {
      const double took = thread_cpu_s() - step_start_;
      std::this_thread::sleep_for(std::chrono::duration<double>((f->factor - 1) * took));
    }
    if (find(FaultKind::perturb, step)) {  // crosses both ways: the one parameter nudged on the host
      float x = 0;
      store.copy_params_to_host(0, 1, &x);
      x = std::nextafter(x, 1e30f);
      store.copy_params_from_host(0, 1, &x);
    }
    if (find(FaultKind::hang_after_update, step)) {
      log_error("injected fault: hang after the update of step " + std::to_string(step));
      hang_forever();
    }
  }
  return inner_ ? inner_->at(point, step, store) : Status::ok_status();
}

ShardWriteFault FaultInjection::shard_write_fault(int64_t step) const {
  if (find(FaultKind::crash_in_save, step)) return {0.5, true};
  if (find(FaultKind::disk_full, step)) return {0.5, false};
  return {};
}

std::vector<Fault> FaultInjection::numerics_faults() const {
  std::vector<Fault> out;
  for (const Fault& f : faults_)
    if (f.kind == FaultKind::nan || f.kind == FaultKind::spike) out.push_back(f);
  return out;
}

bool FaultInjection::damages_checkpoint(int64_t step) const {
  return find(FaultKind::corrupt_shard, step) != nullptr || find(FaultKind::truncate_shard, step) != nullptr;
}

Status FaultInjection::after_checkpoint(int64_t step, const std::string& checkpoint_dir) const {
  const bool corrupt = find(FaultKind::corrupt_shard, step) != nullptr;
  const bool truncate = find(FaultKind::truncate_shard, step) != nullptr;
  if (!corrupt && !truncate) return Status::ok_status();
  const fs::path shard = fs::path(checkpoint_dir) / checkpoint::shard_file_name(rank_);
  std::error_code ec;
  const auto size = fs::file_size(shard, ec);
  if (ec || size == 0) return io_error("injected fault: cannot open " + shard.string() + " to damage it");
  if (corrupt) {
    // Inside the largest piece this rank stored (padding between pieces is not checksummed).
    TS_ASSIGN_OR_RETURN(checkpoint::CheckpointReader reader, checkpoint::open_checkpoint(checkpoint_dir));
    int64_t at = -1, best = 0;
    for (const checkpoint::TensorEntry& e : reader.tensors())
      for (const checkpoint::TensorPiece& p : e.pieces)
        if (p.file == shard.filename().string() && p.numel > best)
          best = p.numel, at = p.offset_in_file + p.numel * static_cast<int64_t>(dtype_size(e.dtype)) / 2;
    if (at < 0) return io_error("injected fault: " + shard.string() + " holds no piece to corrupt");
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    f.seekg(at);
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(at);
    f.write(&c, 1);
    if (!f) return io_error("injected fault: cannot corrupt " + shard.string());
    log_warn("injected fault: flipped bits of byte " + std::to_string(at) + " of " + shard.string());
  }
  if (truncate) {
    fs::resize_file(shard, size / 2, ec);
    if (ec) return io_error("injected fault: cannot truncate " + shard.string() + ": " + ec.message());
    log_warn("injected fault: truncated " + shard.string() + " to " + std::to_string(size / 2) + " bytes");
  }
  return Status::ok_status();
}

}  // namespace tessera
