// Parameter-server vocabulary: consistency names and the per-worker link communicators.
#include "parallel/param_server_protocol.h"

namespace tessera {

std::string_view ps_consistency_name(PsConsistency c) {
  switch (c) {
    case PsConsistency::sync: return "sync";
    case PsConsistency::async: return "async";
    case PsConsistency::ssp: return "ssp";
  }
  return "?";
}

Result<PsConsistency> parse_ps_consistency(std::string_view name) {
  for (PsConsistency c : {PsConsistency::sync, PsConsistency::async, PsConsistency::ssp})
    if (ps_consistency_name(c) == name) return c;
  return invalid_argument("ps.consistency must be \"sync\", \"async\" or \"ssp\" (got \"" + std::string(name) + "\")");
}

Result<std::vector<std::unique_ptr<Communicator>>> make_ps_links(Communicator& world, const PsRoles& roles) {
  const int r = world.rank();
  std::vector<std::unique_ptr<Communicator>> links(static_cast<size_t>(roles.links()));
  for (int w = 0; w < roles.links(); ++w) {
    const bool own = !roles.is_server(r) && roles.link_of(r) == w;
    const bool member = own || roles.is_server(r);
    const int key = own ? 0 : 1 + roles.server_index(r);
    TS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> link,
                        world.split_point_to_point(member ? 0 : -1, key, "ps_link_w" + std::to_string(w)));
    links[static_cast<size_t>(w)] = std::move(link);
  }
  return links;
}

}  // namespace tessera
