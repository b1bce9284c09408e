// The error path of a parameter-server run (TrainingRun's destructor when the run did not finish):
// frees this rank's exchange state without waiting for peers that may never come.
#pragma once

namespace tessera {

struct TrainingRun;

// Abandons every pending message of this rank's worker (run.sync) or server (run.server: every
// worker's slot and the stop agreement), the links, and the role and survivors' communicators,
// so that destroying them all waits for nothing. Kept for the process's life, and only while MPI
// may still use them (a message handed to MPI: Open MPI can withdraw neither an unmatched send
// nor a matched, unfinished receive): a worker's chunk stores (its answers land in the parameter
// buffers, its pushes read the gradient buffers) and its headers, a server's slots of those
// workers and its stop agreement. Logs one line of what it released and kept (bytes).
void abandon_param_server_exchange(TrainingRun& run);

}  // namespace tessera
