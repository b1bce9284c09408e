// Which settings changed between a saved run config (its JSON form, e.g. from a checkpoint) and the
// current one, among the keys whose schema row says a change alters the training trajectory.
#include <nlohmann/json.hpp>

#include "config/run_config.h"
#include "config/run_config_schema.h"

namespace tessera {

std::string describe_resume_changes(const nlohmann::json& saved, const nlohmann::json& now) {
  std::string changed;
  for (const SectionSpec& sec : run_config_schema())
    for (const KeySpec& key : sec.keys) {
      if (key.on_resume != OnResume::warn) continue;
      const std::string section(sec.name), name(key.name);
      // A key absent from either side (an older saved config) reads as null, so it counts as changed.
      const nlohmann::json before = saved.value(section, nlohmann::json::object()).value(name, nlohmann::json());
      const nlohmann::json after = now.value(section, nlohmann::json::object()).value(name, nlohmann::json());
      if (before != after)
        changed += (changed.empty() ? "" : ", ") + section + "." + name + " " + before.dump() + " -> " + after.dump();
    }
  // train.steps is the length of the run, harmless to change, except that a decaying learning-rate
  // schedule spreads its decay over it: the remaining steps then follow a different curve.
  const nlohmann::json steps_before = saved.value("train", nlohmann::json::object()).value("steps", nlohmann::json());
  const nlohmann::json steps_after = now.value("train", nlohmann::json::object()).value("steps", nlohmann::json());
  const std::string schedule = now.value("optim", nlohmann::json::object()).value("schedule", std::string());
  if (steps_before != steps_after && schedule != "constant")
    changed += (changed.empty() ? "" : ", ") + std::string("train.steps ") + steps_before.dump() + " -> " +
               steps_after.dump() + " (the " + schedule + " learning-rate schedule now decays over " +
               steps_after.dump() + " steps)";
  return changed;
}

}  // namespace tessera
