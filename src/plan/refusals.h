// The combinations of run-config settings Tessera refuses, in one declarative table: for each, the
// condition in config keys, why it is not built, and the way out. plan_parallel_layout checks them
// (the first that applies is the error); `tessera config reference` prints the table for the docs.
// Value errors of one key (parallel.zero = 5) and layout arithmetic (world size, micro-batches) are
// not here: they are checks of a value, not combinations.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"

namespace tessera {

struct Refusal {
  std::string_view when;                  // the combination, as keys: "parallel.zero >= 2 with train.precision = \"fp16\""
  std::vector<std::string_view> keys;     // the keys it reads, whose values the error names
  bool (*applies)(const RunConfig& cfg);  // the condition
  std::string_view why;                   // what the code would have to do that it does not
  std::string_view fix;                   // the settings that work instead
};

std::span<const Refusal> refusals();
// The first row that applies to `cfg`, or nullptr.
const Refusal* first_refusal(const RunConfig& cfg);

// ok, or the first refusal that applies to `cfg`: "<when> is not supported (here: k = v, ...):
// <why>; <fix>".
Status check_refusals(const RunConfig& cfg);

// The table as Markdown (a heading, one row per refusal), for the config reference.
std::string refusals_markdown();

}  // namespace tessera
