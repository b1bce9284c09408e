// tessera checkpoint fingerprint | diff: a checkpoint's logical fingerprints recomputed from its
// stored pieces, and two checkpoints (any layouts) compared tensor by tensor.
#pragma once
#include <string>

namespace tessera::cli {

struct FingerprintOptions {
  std::string path;  // checkpoint or run directory
  bool json = false;
};
// Exit status 0 when every fingerprinted tensor's stored pieces add up to its saved fingerprint.
int run_checkpoint_fingerprint(const FingerprintOptions& o);

struct DiffOptions {
  std::string a, b;  // checkpoint or run directories
  bool json = false;
};
// Exit status 0 when the checkpoints hold equal tensors, model config and state; 1 otherwise.
int run_checkpoint_diff(const DiffOptions& o);

}  // namespace tessera::cli
