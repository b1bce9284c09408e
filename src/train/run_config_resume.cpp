// Which settings changed between a saved run config (its JSON form, e.g. from a checkpoint) and the
// current one, among the keys whose schema row says a change alters the training trajectory.
#include <nlohmann/json.hpp>

#include "train/run_config.h"
#include "train/run_config_schema.h"

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
  return changed;
}

}  // namespace tessera
