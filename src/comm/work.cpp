// Work handle: caches the final status; waits on destruction so buffers are never left in flight.
#include "comm/work.h"

#include "core/log.h"

namespace tessera {

Work Work::failed(Status s) {
  Work w;
  w.status_ = std::move(s);
  return w;
}

Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    finish_wait();
    impl_ = std::move(other.impl_);
    status_ = std::move(other.status_);
  }
  return *this;
}

Work::~Work() { finish_wait(); }

void Work::finish_wait() {
  if (!impl_) return;
  Status s = wait();
  if (!s.ok()) log_error("communication op dropped without wait() failed: " + s.to_string());
}

Status Work::wait() {
  if (impl_) {
    status_ = impl_->wait();
    impl_.reset();
  }
  return status_;
}

bool Work::cancel() {
  if (!impl_) return false;
  const bool withdrawn = impl_->cancel();
  if (!withdrawn) status_ = impl_->wait();
  impl_.reset();
  return withdrawn;
}

Abandoned Work::abandon() {
  if (!impl_) return Abandoned::finished;
  const Abandoned a = impl_->abandon();
  impl_.reset();  // its status is not waited for: the peer is gone
  return a;
}

bool Work::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  status_ = impl_->wait();  // already finished: returns at once with the final status
  impl_.reset();
  return true;
}

}  // namespace tessera
