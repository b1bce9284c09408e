// The error path of a parameter-server run (ps_error_path.h): every pending message abandoned,
// every buffer freed except those MPI may still use.
#include "train/ps_error_path.h"

#include <chrono>
#include <string>

#include "core/log.h"
#include "parallel/param_server.h"
#include "parallel/param_server_worker.h"
#include "train/training_run.h"

namespace tessera {

void abandon_param_server_exchange(TrainingRun& run) {
  const auto t0 = std::chrono::steady_clock::now();
  ReleasedWorker total;
  int links = 0;
  std::string what = "before its exchange was built";
  int64_t stores_kept = 0;
  auto add = [&total](const ReleasedWorker& r) {
    total.receives_withdrawn += r.receives_withdrawn;
    total.handed_over += r.handed_over;
    total.bytes_kept += r.bytes_kept;
    total.ops_left_running += r.ops_left_running;
  };
  if (auto* worker = dynamic_cast<ParamServerWorker*>(run.sync.get())) {
    const ReleasedWorker r = worker->abandon_exchange();
    add(r);
    links = 1;
    what = "worker";
    if (r.handed_over > 0) {
      // MPI may still write the answers into the parameter buffers (and read pushes from the
      // gradient buffers): the chunk stores that hold them are kept, moved (their storage stays
      // where it is) into a vector that is never freed. The run's other state is freed.
      auto* kept = new std::vector<std::unique_ptr<ParamStore>>(std::move(run.stores));
      stores_kept = static_cast<int64_t>(kept->size());
    }
  }
  if (run.server) {
    auto [released, agreement_kept] = run.server->abandon_exchange();
    for (const ReleasedWorker& r : released) add(r);
    links = static_cast<int>(released.size());
    total.bytes_kept += agreement_kept;
    what = "server";
  }
  // The role group's and the survivors' heartbeat windows are freed collectively: abandoned, the
  // destructors free everything local and leave the windows to the job's end.
  for (Communicator* c : {run.ps_role.get(), run.world_survivors.get(), run.dp_survivors.get()})
    if (c) c->abandon();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info("parameter-server error path (" + what + "): " + std::to_string(total.receives_withdrawn) +
           " receive(s) withdrawn, " + std::to_string(total.handed_over) + " unfinished message(s) handed to MPI (" +
           std::to_string(total.bytes_kept) + " bytes kept" +
           (stores_kept > 0 ? ", in " + std::to_string(stores_kept) + " chunk store(s) and headers" : "") + "), " +
           std::to_string(total.ops_left_running) + " op(s) left running, " + std::to_string(links) +
           " link(s) and the role group freed without waiting, in " + std::to_string(s) + " s");
}

}  // namespace tessera
