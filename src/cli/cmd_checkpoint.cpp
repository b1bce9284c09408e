// tessera checkpoint inspect|convert: verifying a checkpoint, and converting it to and from one
// consolidated safetensors directory.
#include <cstdio>
#include <memory>

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
    std::string src, out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("checkpoint", "Inspect and verify a checkpoint, or convert it to and from safetensors");

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

  return [a, ins, conv] {
    if (ins->parsed()) return run_checkpoint_inspect(a->inspect);
    if (conv->parsed()) return run_convert(a->src, a->out);
    return fail("tessera checkpoint needs a subcommand: inspect or convert (see tessera checkpoint --help)");
  };
}

}  // namespace tessera::cli
