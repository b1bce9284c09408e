// The single-process MPI world for unit tests that need a real communicator (MPI starts on first
// use, so listing the tests does not start it).
#pragma once
#include <memory>

#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"

namespace tessera::testing {

inline MpiCommunicator& world_of_one() {
  static MpiRuntime runtime;
  static std::unique_ptr<MpiCommunicator> comm = std::move(MpiCommunicator::create_world().value());
  return *comm;
}

}  // namespace tessera::testing
