// The world communicator shared by the tests of one multi-rank test program.
#pragma once
#include "comm/mpi/mpi_communicator.h"

namespace tessera::testing {
extern MpiCommunicator* g_world;
inline MpiCommunicator& world() { return *g_world; }
}  // namespace tessera::testing
