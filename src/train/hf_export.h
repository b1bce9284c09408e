// `tessera export --hf DIR`: a model as a directory Hugging Face transformers opens with
// AutoModelForCausalLM.from_pretrained(DIR): config.json, generation_config.json,
// model.safetensors (GPT2LMHeadModel / LlamaForCausalLM names, f32) and the tokenizer where it
// maps exactly (data/hf_tokenizer.h). Reading such a directory back: model/hf_directory.h.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"
#include "train/model_source.h"

namespace tessera {

struct HfExportOptions {
  std::string tokenizer_data;  // prepared dataset whose tokenizer to ship ("" = the run's, lm.data_dir)
  bool force = false;          // replace the export's files in a non-empty DIR (other files are kept)
};

struct HfExportReport {
  std::vector<std::string> files;  // names written into DIR
  std::vector<std::string> notes;  // what the user should know (tokenizer mapping, ...)
};

// Everything is built and checked in memory, then written into a staging directory beside DIR
// and moved in, so a refused export (unrepresentable config, non-empty DIR without force, a
// tokenizer that does not fit the model) leaves DIR exactly as it was.
Result<HfExportReport> export_hf_directory(const std::string& dir, const LoadedModel& lm, const HfExportOptions& opt);

}  // namespace tessera
