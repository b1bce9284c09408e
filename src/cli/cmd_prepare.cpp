// tessera prepare: text -> tokenizer -> token shards + manifest, with a progress bar.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "data/corpus.h"
#include "data/import_shards.h"
#include "data/prepare.h"

namespace tessera::cli {

namespace {
struct PrepareArgs {
  std::vector<std::string> inputs;
  std::string out, tokenizer = "byte", model;
  int vocab_size = 4096;
  double val_fraction = 0.01;
  int64_t shard_tokens = 10'000'000;
  bool kjv = false, overwrite = false;
  std::vector<std::string> import_train, import_val;
};

void draw_bar(const PrepareProgress& p) {
  static const bool tty = isatty(STDERR_FILENO);
  static int last_pct = -1;
  const int pct = p.bytes_total ? static_cast<int>(100.0 * p.bytes_done / p.bytes_total) : 100;
  if (pct == last_pct && p.phase != "done") return;
  last_pct = pct;
  if (!tty && pct % 25 != 0) return;
  const int width = 30, filled = pct * width / 100;
  std::fprintf(stderr, "%s%-16.*s [%.*s%*s] %3d%%%s", tty ? "\r" : "", static_cast<int>(p.phase.size()),
               p.phase.data(), filled, "##############################", width - filled, "", pct, tty ? "" : "\n");
  if (p.phase == "done" && tty) std::fprintf(stderr, "\n");
}

int run_import(const PrepareArgs& a) {
  ImportShardsOptions o;
  o.train_shards = a.import_train;
  o.val_shards = a.import_val;
  o.output_dir = a.out;
  o.vocab_size = static_cast<uint32_t>(a.vocab_size);
  o.overwrite = a.overwrite;
  auto m = import_shards(o);
  if (!m.ok()) return fail(m.status());
  std::printf("imported into %s: %llu train tokens, %llu val tokens (vocab %u, no tokenizer)\n", a.out.c_str(),
              (unsigned long long)m->train_tokens, (unsigned long long)m->val_tokens, m->vocab_size);
  return 0;
}

int run_prepare(const PrepareArgs& a) {
  if (!a.import_train.empty()) return run_import(a);
  PrepareOptions o;
  o.inputs = a.inputs;
  o.output_dir = a.out;
  auto kind = parse_tokenizer_kind(a.tokenizer);
  if (!kind.ok()) return fail(kind.status());
  o.tokenizer = kind.value();
  o.tokenizer_model = a.model;
  o.vocab_size = a.vocab_size;
  o.val_fraction = a.val_fraction;
  o.shard_tokens = static_cast<uint64_t>(a.shard_tokens);
  o.overwrite = a.overwrite;
  o.progress = draw_bar;
  if (a.kjv) {
    // The corpus text sits beside the dataset so the manifest's source path stays valid.
    const std::filesystem::path out = std::filesystem::path(a.out).lexically_normal();
    std::error_code ec;
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
    const std::string corpus = out.string() + ".txt";
    Status s = write_default_corpus(corpus);
    if (!s.ok()) return fail(s);
    o.inputs.push_back(corpus);
  }
  if (o.inputs.empty()) return fail("no input: give text files or directories, or --kjv for the King James Bible");
  auto m = prepare_dataset(o);
  if (!m.ok()) return fail(m.status());
  std::printf("prepared %s: %llu train tokens, %llu val tokens, tokenizer %s (vocab %u)\n", a.out.c_str(),
              (unsigned long long)m->train_tokens, (unsigned long long)m->val_tokens, m->tokenizer_kind.c_str(),
              m->vocab_size);
  return 0;
}
}  // namespace

Runner add_prepare(CLI::App& app) {
  auto a = std::make_shared<PrepareArgs>();
  CLI::App* c = app.add_subcommand("prepare", "Tokenize text into train/val token shards with a manifest");
  c->add_option("inputs", a->inputs, "Text files or directories (recursively)");
  c->add_option("--out", a->out, "Output dataset directory")->required();
  c->add_flag("--kjv", a->kjv, "Add the King James Bible (Debian package bible-kjv) as input");
  c->add_option("--tokenizer", a->tokenizer, "byte | bpe | unigram | sentencepiece")->capture_default_str();
  c->add_option("--model", a->model, "Existing SentencePiece .model (with --tokenizer sentencepiece)");
  c->add_option("--vocab-size", a->vocab_size, "Vocabulary size for bpe / unigram training")->capture_default_str()
      ->check(CLI::Range(1, 16777216));
  c->add_option("--val-fraction", a->val_fraction, "Share of the input kept for validation")->capture_default_str();
  c->add_option("--shard-tokens", a->shard_tokens, "Tokens per shard file")->capture_default_str()
      ->check(CLI::Range(1, 2147483647));
  c->add_option("--import-train", a->import_train,
                 "Instead of text: token shards tokenized elsewhere (e.g. llm.c's GPT-2 .bin files) for training; "
                 "with --vocab-size of their tokenizer");
  c->add_option("--import-val", a->import_val, "Token shards for validation (with --import-train)");
  c->add_flag("--overwrite", a->overwrite, "Replace a dataset already in --out (only prepare's own files)");
  return [a] { return run_prepare(*a); };
}

}  // namespace tessera::cli
