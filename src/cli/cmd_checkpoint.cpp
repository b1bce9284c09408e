// tessera checkpoint inspect|fingerprint|diff|convert: verifying a checkpoint, its logical
// fingerprints, comparing two, and converting one to and from a consolidated safetensors directory.
#include <cstdio>
#include <memory>

#include "cli/cmd_checkpoint_compare.h"
#include "cli/cmd_checkpoint_inspect.h"
#include "cli/commands.h"
#include "train/checkpoint_convert.h"

namespace tessera::cli {
namespace {

int run_convert(const std::string& src, const std::string& out) {
  if (is_consolidated_dir(src)) {
    auto r = import_consolidated(src, out);
    if (!r.ok()) return fail(r.status());
    std::printf("wrote checkpoint %s (step %lld, 1 rank, %lld tensors, %lld bytes of parameters and moments) from %s\n",
                r->to.c_str(), (long long)r->step, (long long)r->tensors, (long long)r->bytes, src.c_str());
    std::printf("continue training with: tessera train --config <its config> train.out_dir=%s --resume\n", out.c_str());
    return 0;
  }
  auto arg = resolve_checkpoint_arg(src);
  if (!arg.ok())
    return fail(arg.status().message() + " (or a directory written by `tessera checkpoint convert`, with " +
                kConsolidatedStateFile + ")");
  auto r = export_consolidated(arg->dir, out);
  if (!r.ok()) return fail(r.status());
  std::printf("converted %s (step %lld, saved by %d rank%s%s) into %s: %s, %s, %s\n", arg->dir.c_str(),
              (long long)r->step, r->ranks, r->ranks == 1 ? "" : "s",
              arg->run.empty() ? "" : ", the latest complete checkpoint of the run", out.c_str(),
              kConsolidatedModelFile, kConsolidatedOptimizerFile, kConsolidatedStateFile);
  return 0;
}

}  // namespace

Runner add_checkpoint(CLI::App& app) {
  struct Args {
    InspectOptions inspect;
    FingerprintOptions fingerprint;
    DiffOptions diff;
    std::string src, out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("checkpoint", "Inspect and verify a checkpoint, print its fingerprints, compare two, or convert one to and from safetensors");

  CLI::App* ins = c->add_subcommand(
      "inspect",
      "Print what a checkpoint holds (step, the layout that saved it, model, tensors) and verify the checksum of "
      "every piece by reading all of it. Exit status 0 when every piece verifies, 1 otherwise");
  ins->add_option("path", a->inspect.path,
                  "A checkpoint directory (<run>/checkpoints/step_<N>) or a run directory (its latest complete "
                  "checkpoint)")
      ->required();
  ins->add_flag("--json", a->inspect.json, "Machine-readable output on stdout (one JSON object)");
  ins->add_flag("--quiet", a->inspect.quiet, "No progress lines on stderr while verifying large checkpoints");

  CLI::App* fp = c->add_subcommand(
      "fingerprint",
      "Print each tensor's logical fingerprint (of its unsharded contents, the same under every layout) and check "
      "it against the stored pieces, read whole. Exit status 0 when every fingerprinted tensor matches, 1 otherwise");
  fp->add_option("path", a->fingerprint.path, "A checkpoint directory or a run directory (its latest complete one)")
      ->required();
  fp->add_flag("--json", a->fingerprint.json, "Machine-readable output on stdout (one JSON object)");

  CLI::App* df = c->add_subcommand(
      "diff",
      "Compare two checkpoints tensor by tensor, whatever layouts saved them: equal, or how many elements differ, "
      "the max abs difference and which ranks' pieces hold them; also the model config and training state. Exit "
      "status 0 when everything is equal, 1 otherwise");
  df->add_option("a", a->diff.a, "A checkpoint directory or a run directory (its latest complete one)")->required();
  df->add_option("b", a->diff.b, "The other checkpoint or run directory")->required();
  df->add_flag("--json", a->diff.json, "Machine-readable output on stdout (one JSON object)");

  CLI::App* conv = c->add_subcommand(
      "convert",
      "Convert in the direction <src> implies. A checkpoint (step_<N> directory, or a run directory: its latest "
      "complete checkpoint), saved under any layout -> directory --out with model.safetensors (Hugging Face names, "
      "loads in PyTorch), optimizer.safetensors (AdamW m and v, whole tensors, keys adam_m/<name> and "
      "adam_v/<name>) and state.json (step, data position, adam_steps, run and model config). Such a directory "
      "(it holds state.json) -> a new one-rank checkpoint --out/checkpoints/step_<N> of run directory --out, "
      "which `tessera train ... --resume` continues exactly. Nothing existing is ever overwritten");
  conv->add_option("src", a->src, "Checkpoint, run directory, or converted directory")->required();
  conv->add_option("--out", a->out, "Directory to write (a run directory when <src> is a converted directory)")
      ->required();

  return [a, ins, fp, df, conv] {
    if (ins->parsed()) return run_checkpoint_inspect(a->inspect);
    if (fp->parsed()) return run_checkpoint_fingerprint(a->fingerprint);
    if (df->parsed()) return run_checkpoint_diff(a->diff);
    if (conv->parsed()) return run_convert(a->src, a->out);
    return fail("tessera checkpoint needs a subcommand: inspect, fingerprint, diff or convert (see tessera checkpoint "
                "--help)");
  };
}

}  // namespace tessera::cli
