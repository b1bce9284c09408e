// Preemption in the parameter server's asynchronous modes: how the servers agree on the step every
// rank stops after (param_server_protocol.h). Server 0 decides; the others send it their own signal
// and follow its decision. Point-to-point messages on the servers' communicator, polled: a server
// never blocks on another.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace tessera {

class PsStopAgreement {
 public:
  // index: this server's (0 decides); refresh_s: a posted receive is withdrawn and posted again
  // this often, so it never reaches the communicator's timeout while nothing is sent.
  PsStopAgreement(Communicator& servers, int index, double refresh_s);
  ~PsStopAgreement();
  PsStopAgreement(const PsStopAgreement&) = delete;
  PsStopAgreement& operator=(const PsStopAgreement&) = delete;

  // One look, once per loop of the server: own_signal (this server's, 0: none), pushed_signal (the
  // largest in the live workers' latest pushes), newest (the highest step any worker has pushed to
  // this server), final_step (the planned last one). Returns true when a stop has just become
  // known here.
  Result<bool> poll(int own_signal, int pushed_signal, int64_t newest, int64_t final_step);
  // The decision: stop after stop_after() on signal() (0, 0: none, or not known here yet).
  int64_t stop_after() const { return decision_[0]; }
  int signal() const { return static_cast<int>(decision_[1]); }
  // Withdraws the receives still posted and completes the sends (at the end of serve()).
  Status finish();
  // The error path (ParamServer::abandon_exchange): waits for nothing. Each posted receive is
  // withdrawn, each unfinished send handed to MPI (Work::abandon). Returns how many were handed
  // over: while any was, MPI may still use this object's buffers, so the caller must keep it.
  int abandon();
  // The bytes of this object and its buffers (what keeping it costs).
  int64_t bytes() const { return static_cast<int64_t>(sizeof(*this) + requests_.size() * sizeof(int32_t)); }

 private:
  void post(size_t i);
  Result<bool> arrived(size_t i);
  Communicator& servers_;
  int index_;
  double refresh_s_;
  bool decided_ = false;           // server 0: it decided (stop or not); others: its decision arrived
  int64_t decision_[2] = {0, 0};   // {stop_after, signal}
  int64_t incoming_[2] = {0, 0};   // others: the decision being received
  std::vector<int32_t> requests_;  // server 0: the signal each other server sent
  // server 0: [s] the request of server s (s >= 1); the others: [0] the decision.
  std::vector<std::unique_ptr<Work>> recvs_;
  std::vector<double> posted_at_;
  std::vector<std::unique_ptr<Work>> sends_;
  int32_t sent_signal_ = 0;  // others: the signal sent to server 0 (once)
};

}  // namespace tessera
