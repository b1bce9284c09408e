// A parameter-server worker's error path (ParamServerWorker::abandon_exchange), 2 ranks: worker
// (rank 0) and server (rank 1). The server sends the initial parameters, then answers nothing. The
// worker pushes (its answer's receives posted, its gradient data not yet received: a send MPI
// cannot withdraw), abandons the exchange and is destroyed: both must return at once (waiting would
// take the communicator timeout, 30 s), the receives be withdrawn, the push handed to MPI with its
// bytes counted as kept, and nothing left running. Then the server takes the push after all: it
// must arrive intact, read from the buffers that were kept (the chunk store, here the caller's).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_runtime.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "parallel/param_server_worker.h"

using namespace tessera;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

float pattern(int64_t i) { return 1e-3f * static_cast<float>(i % 11); }

void or_abort(const Status& s, const char* what) {
  if (!s.ok()) abort_job(Status(s.code(), std::string(what) + ": " + s.message()));
}

int run_worker(Backend& backend, const PsRoles& roles, std::unique_ptr<Communicator> link, Communicator& self,
               ParamStore& store, Communicator& world) {
  ModelParallelGroups groups;
  groups.dp = groups.tp = groups.pp = &self;
  auto worker = std::make_unique<ParamServerWorker>(backend, roles, PsConsistency::async, std::move(link), groups,
                                                    nullptr, std::vector<ParamStore*>{&store}, 0.f);
  or_abort(worker->broadcast_parameters(), "worker: initial parameters");
  for (int64_t i = 0; i < store.numel(); ++i) store.grads()[i] = pattern(i);
  or_abort(worker->finish(), "worker: push");
  const double t0 = now_s();
  const ReleasedWorker r = worker->abandon_exchange();
  const double abandon_s = now_s() - t0;
  const double t1 = now_s();
  worker.reset();
  const double destroy_s = now_s() - t1;
  std::printf("worker: abandoned in %.3f s, destroyed in %.3f s: %d receive(s) withdrawn, %d handed over, "
              "%lld bytes kept, %d op(s) left running\n",
              abandon_s, destroy_s, r.receives_withdrawn, r.handed_over, (long long)r.bytes_kept, r.ops_left_running);
  int fail = 0;
  if (abandon_s > 1.0 || destroy_s > 1.0) std::printf("FAIL: the error path waited for the server\n"), fail = 1;
  // The answer's header and data receives; the push's data (rendezvous: the server never matched it).
  const int64_t store_bytes = 2 * store.numel() * static_cast<int64_t>(sizeof(float));
  if (r.receives_withdrawn != 2 || r.handed_over < 1 || r.ops_left_running != 0 || r.bytes_kept < store_bytes)
    std::printf("FAIL: expected 2 receives withdrawn, the push handed over with >= %lld bytes kept, nothing running\n",
                (long long)store_bytes), fail = 1;
  or_abort(world.barrier(), "worker: barrier");  // the server takes the push now ...
  or_abort(world.barrier(), "worker: barrier");  // ... and has it: the store may go
  if (fail == 0) std::printf("worker: all checks passed\n");
  return fail;
}

int run_server(std::unique_ptr<Communicator> link, ParamStore& store, Communicator& world) {
  ReplyHeader h;
  Work a = link->send_async(&h, sizeof h, DType::u8, 0, kReplyHeaderTag);
  Work b = link->send_async(store.params(), store.numel(), DType::f32, 0, kReplyDataTag);
  or_abort(a.wait(), "server: initial header");
  or_abort(b.wait(), "server: initial parameters");
  or_abort(world.barrier(), "server: barrier");  // the worker has abandoned its push
  PushHeader push;
  std::vector<float> got(static_cast<size_t>(store.numel()));
  Work c = link->recv_async(&push, sizeof push, DType::u8, 0, kPushHeaderTag);
  Work d = link->recv_async(got.data(), store.numel(), DType::f32, 0, kPushDataTag);
  or_abort(c.wait(), "server: push header");
  or_abort(d.wait(), "server: push data");
  or_abort(world.barrier(), "server: barrier");
  int64_t wrong = 0;
  for (int64_t i = 0; i < store.numel(); ++i) wrong += got[static_cast<size_t>(i)] != pattern(i);
  std::printf("server: the push handed to MPI arrived with %lld wrong value(s) of %lld\n", (long long)wrong,
              (long long)store.numel());
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main() {
  MpiRuntime mpi;
  CommOptions opt;
  opt.timeout_s = 30;
  auto made = MpiCommunicator::create_world(opt);
  if (!made.ok()) abort_job(made.status());
  Communicator& world = **made;
  if (world.size() != 2) abort_job(invalid_argument("test_mpi_ps_error_path runs on 2 ranks"));
  const PsRoles roles(1, 1);
  auto self = world.split(world.rank(), 0, "self");
  auto links = make_ps_links(world, roles);
  if (!self.ok() || !links.ok()) abort_job(internal_error("communicator set-up failed"));
  CpuBackend backend;
  ParamStore store{ParamLayout(model_preset("tiny").value())};
  const int fail = world.rank() == 0
                       ? run_worker(backend, roles, std::move((*links)[0]), **self, store, world)
                       : run_server(std::move((*links)[0]), store, world);
  std::fflush(stdout);
  return fail;
}
