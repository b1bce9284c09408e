// Server 0 decides the asynchronous modes' stop step; the other servers ask and follow.
#include "parallel/param_server_stop.h"

#include <algorithm>
#include <chrono>

#include "parallel/param_server_protocol.h"

namespace tessera {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

PsStopAgreement::PsStopAgreement(Communicator& servers, int index, double refresh_s)
    : servers_(servers), index_(index), refresh_s_(refresh_s) {
  const auto n = static_cast<size_t>(servers_.size());
  if (n == 1) return;
  requests_.assign(n, 0);
  recvs_.resize(index_ == 0 ? n : 1);
  posted_at_.resize(recvs_.size());
  if (index_ == 0) {
    for (size_t s = 1; s < n; ++s) post(s);
  } else {
    post(0);
  }
}

PsStopAgreement::~PsStopAgreement() { (void)finish(); }

void PsStopAgreement::post(size_t i) {
  recvs_[i] = std::make_unique<Work>(
      index_ == 0 ? servers_.recv_async(&requests_[i], 1, DType::i32, static_cast<int>(i), kStopRequestTag)
                  : servers_.recv_async(incoming_, sizeof incoming_, DType::u8, 0, kStopDecisionTag));
  posted_at_[i] = now_s();
}

// true when receive i has its message (it is then no longer posted). Past refresh_s it is withdrawn
// and posted again, before the communicator's timeout could call a quiet peer stuck.
Result<bool> PsStopAgreement::arrived(size_t i) {
  std::unique_ptr<Work>& r = recvs_[i];
  if (!r) return false;
  if (r->test()) {
    const Status st = r->wait();
    r.reset();
    if (!st.ok()) return Status(st.code(), "parameter servers agreeing on a stop step: " + st.message());
    return true;
  }
  if (now_s() - posted_at_[i] < refresh_s_) return false;
  if (!r->cancel()) {  // it had matched the message
    r.reset();
    return true;
  }
  post(i);
  return false;
}

Result<bool> PsStopAgreement::poll(int own_signal, int pushed_signal, int64_t newest, int64_t final_step) {
  if (decided_) return false;
  if (index_ != 0) {
    if (own_signal != 0 && sent_signal_ == 0) {
      sent_signal_ = own_signal;
      sends_.push_back(std::make_unique<Work>(servers_.send_async(&sent_signal_, 1, DType::i32, 0, kStopRequestTag)));
    }
    TS_ASSIGN_OR_RETURN(const bool got, arrived(0));
    if (!got) return false;
    decided_ = true;
    std::copy_n(incoming_, 2, decision_);
    return decision_[0] != 0;
  }
  int sig = std::max(own_signal, pushed_signal);
  for (size_t s = 1; s < recvs_.size(); ++s) {
    TS_ASSIGN_OR_RETURN(const bool got, arrived(s));
    if (got) sig = std::max(sig, static_cast<int>(requests_[s]));
  }
  if (sig == 0) return false;
  decided_ = true;
  // No worker can have pushed newest + 2 (that needs this server's answer to newest + 1), so every
  // answer to a push of newest + 1 carries the decision. A stop at the planned last step is none.
  if (newest + 1 < final_step) {
    decision_[0] = newest + 1;
    decision_[1] = sig;
  }
  for (int s = 1; s < servers_.size(); ++s)
    sends_.push_back(std::make_unique<Work>(servers_.send_async(decision_, sizeof decision_, DType::u8, s, kStopDecisionTag)));
  return decision_[0] != 0;
}

int PsStopAgreement::abandon() {
  int handed_over = 0;
  for (auto* works : {&recvs_, &sends_})
    for (auto& w : *works)
      if (w) {
        handed_over += w->abandon() == Abandoned::handed_over;
        w.reset();
      }
  sends_.clear();  // finish() waits for what is left in it: nothing now
  return handed_over;
}

Status PsStopAgreement::finish() {
  for (auto& r : recvs_)
    if (r) {
      (void)r->cancel();  // a request that arrives now changes nothing: the run is over
      r.reset();
    }
  Status first;
  for (auto& w : sends_) {
    const Status st = w->wait();
    if (!st.ok() && first.ok()) first = st;
  }
  sends_.clear();
  return first;
}

}  // namespace tessera
