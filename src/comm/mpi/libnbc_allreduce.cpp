// libnbc's MPI_Iallreduce choice (mirrored from Open MPI 4.1.4) and the MPI_T knob that pins it.
#include "comm/mpi/libnbc_allreduce.h"

namespace tessera {

namespace {
constexpr const char* kVariable = "coll_libnbc_iallreduce_algorithm";
// nbc_iallreduce.c: `size*count < 65536` sends every smaller call to the binomial tree.
constexpr size_t kSmallBytes = 65536;

int largest_power_of_two_at_most(int p) {
  int pof2 = 1;
  while (pof2 * 2 <= p) pof2 *= 2;
  return pof2;
}
}  // namespace

std::string_view nbc_allreduce_alg_name(NbcAllreduceAlg alg) {
  switch (alg) {
    case NbcAllreduceAlg::library: return "library";
    case NbcAllreduceAlg::ring: return "ring";
    case NbcAllreduceAlg::binomial: return "binomial";
    case NbcAllreduceAlg::rabenseifner: return "rabenseifner";
    case NbcAllreduceAlg::recursive_doubling: return "recursive_doubling";
  }
  return "?";
}

NbcAllreduceAlg libnbc_default_allreduce(int p, int64_t count, size_t elem_bytes, bool commutative, bool in_place) {
  // nprocs_pof2 = opal_next_poweroftwo(p) >> 1: the largest power of two <= p.
  if (p < 4 || static_cast<size_t>(count) * elem_bytes < kSmallBytes || !commutative || in_place)
    return NbcAllreduceAlg::binomial;
  if (count >= largest_power_of_two_at_most(p)) return NbcAllreduceAlg::rabenseifner;
  return NbcAllreduceAlg::ring;
}

NbcAllreduceAlg allreduce_pin(int p, int64_t count, size_t elem_bytes, bool commutative, bool in_place) {
  if (p < 2 || !commutative || static_cast<size_t>(count) * elem_bytes < kSmallBytes) return NbcAllreduceAlg::library;
  // 2 and 3 ranks: the ring moves 2(p-1)/p of the buffer per link, both directions at once; the tree
  // funnels p-1 buffers into rank 0 and as many out again, one phase after the other.
  if (p < 4) return NbcAllreduceAlg::ring;
  const NbcAllreduceAlg mine = libnbc_default_allreduce(p, count, elem_bytes, commutative, in_place);
  const NbcAllreduceAlg out = libnbc_default_allreduce(p, count, elem_bytes, commutative, false);
  return mine == out ? NbcAllreduceAlg::library : out;
}

std::mutex& LibnbcAllreduceKnob::process_lock() {
  // The variable is one per process, so is its lock (the only process-wide state here, on purpose).
  static std::mutex mu;
  return mu;
}

std::shared_ptr<LibnbcAllreduceKnob> LibnbcAllreduceKnob::unusable(std::string why_not) {
  std::shared_ptr<LibnbcAllreduceKnob> k(new LibnbcAllreduceKnob());
  k->why_not_ = std::move(why_not);
  return k;
}

std::shared_ptr<LibnbcAllreduceKnob> LibnbcAllreduceKnob::create() {
  std::shared_ptr<LibnbcAllreduceKnob> k(new LibnbcAllreduceKnob());
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
    k->why_not_ = "MPI_T_init_thread failed";
    return k;
  }
  k->mpit_ = true;
  int index = -1;
  if (MPI_T_cvar_get_index(kVariable, &index) != MPI_SUCCESS) {
    k->why_not_ = std::string("this MPI has no control variable ") + kVariable + " (not Open MPI's libnbc)";
    return k;
  }
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  int n = 0;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &n) != MPI_SUCCESS || n != 1) {
    k->why_not_ = std::string("cannot open ") + kVariable + " through MPI_T";
    return k;
  }
  int value = -1;
  if (MPI_T_cvar_read(handle, &value) != MPI_SUCCESS) {
    MPI_T_cvar_handle_free(&handle);
    k->why_not_ = std::string("cannot read ") + kVariable + " through MPI_T";
    return k;
  }
  if (value != 0) {  // the user chose an algorithm (--mca, OMPI_MCA_..., a params file): theirs
    MPI_T_cvar_handle_free(&handle);
    k->why_not_ = std::string(kVariable) + " is set to " + std::to_string(value) + " by the user";
    return k;
  }
  // A write of the value it already has tells whether MPI_T accepts writes to it at all.
  if (MPI_T_cvar_write(handle, &value) != MPI_SUCCESS) {
    MPI_T_cvar_handle_free(&handle);
    k->why_not_ = std::string(kVariable) + " cannot be written through MPI_T";
    return k;
  }
  k->handle_ = handle;
  return k;
}

void LibnbcAllreduceKnob::agree(MPI_Comm comm) {
  int mine = usable() ? 1 : 0, all = 0;
  if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
  if (all || !usable()) return;
  MPI_T_cvar_handle_free(&handle_);
  handle_ = MPI_T_CVAR_HANDLE_NULL;
  why_not_ = std::string("another rank cannot set ") + kVariable;
}

LibnbcAllreduceKnob::~LibnbcAllreduceKnob() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // as the communicators do: the process is ending, MPI takes it all with it
  if (handle_ != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&handle_);
  if (mpit_) MPI_T_finalize();
}

int LibnbcAllreduceKnob::current() const {
  if (!usable()) return -1;
  int value = -1;
  if (MPI_T_cvar_read(handle_, &value) != MPI_SUCCESS) return -1;
  return value;
}

bool LibnbcAllreduceKnob::set(int value) { return MPI_T_cvar_write(handle_, &value) == MPI_SUCCESS; }

}  // namespace tessera
