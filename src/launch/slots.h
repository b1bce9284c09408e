// The number of rank slots the elastic launcher may use: read from a slots file (a single integer,
// or an Open MPI hostfile whose slots= are summed), re-read before every start of the job.
#pragma once
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::launch {

// Parses a slots file's text. Either one integer ("3"), or hostfile lines "host [slots=N] ..." where
// '#' starts a comment; a host line without slots= counts as 1 slot (Open MPI's rule when it cannot
// count the host's cores from here). `source` names the file in error messages.
Result<int> parse_slots(std::string_view text, const std::string& source);

// Reads and parses the slots file at `path`.
Result<int> read_slots_file(const std::string& path);

}  // namespace tessera::launch
