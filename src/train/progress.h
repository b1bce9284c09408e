// The live progress line of a training run (rank 0): step, loss, lr, grad norm, tokens/s, MFU,
// memory and ETA; redrawn in place on a terminal, one line per log interval otherwise.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

struct ProgressFields {
  int64_t step = 0, total_steps = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, mfu = 0, mem_mb = 0, eta_s = 0;
};

std::string format_progress(const ProgressFields& f);
std::string format_duration(double seconds);  // "1h02m", "5m12s", "42s"
// Prints the line; on a terminal it overwrites the previous one unless `final_line`.
void print_progress(const ProgressFields& f, bool final_line = false);

}  // namespace tessera
