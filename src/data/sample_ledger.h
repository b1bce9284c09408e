// The sample ledger (train.sample_ledger): which step, micro-batch and data-parallel rank consumed
// which sequence of the training stream, kept across restarts, resumes and world-size changes, and
// the check that an epoch was seen exactly once in the stream's order.
//
// <out_dir>/ledger/runs.jsonl    one line per invocation (rank 0): {"run", "resumed_from", "dp",
//                                "micro_batch", "seed", "windows"}
// <out_dir>/ledger/dp<r>.jsonl   one line per micro-batch of data-parallel rank r (the replica's
//                                first tp / pp rank): {"run", "step", "micro", "samples": [[epoch,
//                                position, window], ...]}
// A run that resumed from step S voids what earlier invocations recorded for steps after S (they
// were rolled back: a crash, or a fall-back to an older checkpoint); the rest must cover each
// epoch's positions 0, 1, ... once, with the window the stream puts there (epoch_permutation).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "data/loader.h"

namespace tessera {

struct LedgerRun {
  std::string run;           // this invocation's id (the same on every rank)
  int64_t resumed_from = 0;  // the step it resumed from (0: a fresh start)
  int64_t dp = 1, micro_batch = 1;
  uint64_t seed = 0, windows = 0;
};

std::string ledger_dir(const std::string& out_dir);

// Appends one data-parallel rank's lines; every line is flushed (a crash loses nothing recorded).
class SampleLedgerWriter {
 public:
  // Rank 0 of the job passes `run_line` (it appends it to runs.jsonl first); the others pass null.
  static Result<SampleLedgerWriter> open(const std::string& out_dir, const std::string& run, int dp_rank,
                                         const LedgerRun* run_line);
  SampleLedgerWriter(SampleLedgerWriter&& o) noexcept;
  SampleLedgerWriter& operator=(SampleLedgerWriter&&) = delete;
  ~SampleLedgerWriter();
  // One micro-batch of step `step` (1-based: the step being trained).
  Status record(int64_t step, const std::vector<SampleId>& samples);

 private:
  SampleLedgerWriter(std::FILE* f, std::string path, std::string run) : f_(f), path_(std::move(path)), run_(std::move(run)) {}
  std::FILE* f_ = nullptr;
  std::string path_, run_;
  int64_t step_ = -1;
  int micro_ = 0;
};

// What the check found.
struct LedgerReport {
  int runs = 0;
  int64_t recorded = 0;  // samples recorded, voided ones included
  int64_t voided = 0;    // recorded for steps a later run rolled back
  int64_t counted = 0;   // the rest: the samples the training used
  uint64_t windows = 0;  // per epoch
  int64_t complete_epochs = 0;
  int64_t last_epoch_positions = 0;  // positions seen of the epoch in progress
  std::vector<std::string> duplicates, missing, misplaced;  // one line each (the first 20 of each)
  int64_t duplicate_count = 0, missing_count = 0, misplaced_count = 0;
  bool ok() const { return duplicate_count == 0 && missing_count == 0 && misplaced_count == 0; }
  nlohmann::json to_json() const;
};

// Reads <out_dir>/ledger and checks it; an error when there is no ledger or a line is damaged.
Result<LedgerReport> check_sample_ledger(const std::string& out_dir);

}  // namespace tessera
