// A Backend that forwards everything to another: tests derive from it to perturb one op (a planted
// bug) or to change what device memory is (a scrambled test device), leaving the rest as it was.
#pragma once
#include "backend/backend.h"

namespace tessera::testing {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : inner_(inner) {}
  Device device() const override { return inner_.device(); }
#define TESSERA_FORWARD_OP(name, ret, params, args) \
  ret name params override { return inner_.name args; }
  TESSERA_BACKEND_OPS(TESSERA_FORWARD_OP)
#undef TESSERA_FORWARD_OP
  void copy_to_device(void* d, const void* h, size_t bytes) override { inner_.copy_to_device(d, h, bytes); }
  void copy_to_host(void* h, const void* d, size_t bytes) override { inner_.copy_to_host(h, d, bytes); }
  bool is_device_memory(const void* p) const override { return inner_.is_device_memory(p); }
  void synchronize() override { inner_.synchronize(); }
  Buffer allocate(size_t bytes, MemCategory c, Residency r) override { return inner_.allocate(bytes, c, r); }
  MemoryStats memory_counters() const override { return inner_.memory_counters(); }
  Stream set_stream(Stream s) override { return inner_.set_stream(s); }
  Event record_event(Stream s) override { return inner_.record_event(s); }
  void wait_event(Stream s, Event e) override { inner_.wait_event(s, e); }
  void synchronize_event(Event e) override { inner_.synchronize_event(e); }

 protected:
  Backend& inner_;
};

}  // namespace tessera::testing
