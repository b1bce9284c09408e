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
// Whether `fd` is a terminal a person watches. Under mpirun a rank's stdout is a pseudo-terminal even
// when mpirun's own output goes to a file (a Slurm or CI log), so then mpirun's descriptor decides.
bool is_live_terminal(int fd);
// "\r\033[K" on a live stdout (erases the progress line before other output), else "".
const char* clear_progress_line();
std::string format_duration(double seconds);  // "1h02m", "5m12s", "42s"
// Prints the line; on a terminal it overwrites the previous one unless `final_line`.
void print_progress(const ProgressFields& f, bool final_line = false);

}  // namespace tessera
