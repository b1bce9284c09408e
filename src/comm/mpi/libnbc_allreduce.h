// Which algorithm Open MPI's libnbc runs for MPI_Iallreduce, and a knob that picks it for one call.
// Open MPI 4.1 (ompi/mca/coll/libnbc/nbc_iallreduce.c, nbc_allreduce_init) chooses per call from its
// control variable coll_libnbc_iallreduce_algorithm; left at 0 it takes a binomial tree (reduce to
// rank 0, then broadcast) for every in-place call, even where the same call out of place gets
// Rabenseifner's reduce-scatter + all-gather, and for every call at 2 or 3 ranks. The trainer's
// buckets are in place, so on a slow link they paid 2-3x (docs/performance.md, "Slow network"). The
// knob sets that variable through MPI_T around one call so it runs a bandwidth-optimal algorithm:
// no copy, no memory.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace tessera {

// Values of coll_libnbc_iallreduce_algorithm (coll_libnbc_component.c). library = 0: libnbc decides.
enum class NbcAllreduceAlg : int { library = 0, ring = 1, binomial = 2, rabenseifner = 3, recursive_doubling = 4 };
std::string_view nbc_allreduce_alg_name(NbcAllreduceAlg alg);

// libnbc 4.1's own choice with the variable at 0 (nbc_iallreduce.c, v4.1.4 lines 115-123): binomial
// when p < 4, under 64 KiB, a non-commutative op, or in place; else Rabenseifner when
// count >= the largest power of two <= p; else the ring.
NbcAllreduceAlg libnbc_default_allreduce(int p, int64_t count, size_t elem_bytes, bool commutative, bool in_place);

// What the communicator pins for one MPI_Iallreduce; library = leave libnbc be. Only where libnbc
// would take its binomial tree for a message of >= 64 KiB with a commutative op (below 64 KiB the
// tree's fewer steps are the better bet, as libnbc assumes):
// - p >= 4, in place: Rabenseifner, libnbc's own choice for the same call out of place;
// - p = 2 or 3, in place or not: the ring (libnbc has no other choice there but the tree; measured
//   1.6x (2 ranks) and 2.3x (3 ranks) faster at 100 Mbit/s, 2x at 4 MiB on shared memory, 2 ranks).
NbcAllreduceAlg allreduce_pin(int p, int64_t count, size_t elem_bytes, bool commutative, bool in_place);

// The MPI_T handle on coll_libnbc_iallreduce_algorithm. Not usable (call() just calls) when MPI_T or
// the variable is missing (another MPI, or libnbc not loaded), when it cannot be written, or when
// the user set it (e.g. --mca coll_libnbc_iallreduce_algorithm 1): a user's choice is never overridden.
class LibnbcAllreduceKnob {
 public:
  // Needs MPI initialised. Never fails: an unusable knob says why (why_not()).
  static std::shared_ptr<LibnbcAllreduceKnob> create();
  // A knob that never pins, without touching MPI_T.
  static std::shared_ptr<LibnbcAllreduceKnob> unusable(std::string why_not);
  ~LibnbcAllreduceKnob();
  LibnbcAllreduceKnob(const LibnbcAllreduceKnob&) = delete;
  LibnbcAllreduceKnob& operator=(const LibnbcAllreduceKnob&) = delete;

  bool usable() const { return handle_ != MPI_T_CVAR_HANDLE_NULL; }
  const std::string& why_not() const { return why_not_; }
  // The variable's value as MPI_T reads it now (-1 when unusable). Tests use it.
  int current() const;

  // Runs start() (which must start the MPI_Iallreduce) with the variable set to alg, then sets it
  // back to 0. libnbc reads the variable inside MPI_Iallreduce, so only that call sees it. Every
  // rank makes the same choice for the same call (a function of p, count, dtype and op), so the
  // ranks' schedules match. Set, start and reset run under one process-wide lock: the variable is
  // process-wide, and two threads' communicators must not see each other's setting (ranks would
  // then run different schedules of one collective). alg == library or an unusable knob: start().
  // Returns start()'s MPI error code, or MPI_ERR_INTERN without starting when the variable could not
  // be set (its peers may have set it: starting with another algorithm would mismatch them).
  template <typename Start>
  int call(NbcAllreduceAlg alg, Start&& start) {
    if (alg == NbcAllreduceAlg::library || !usable()) return start();
    std::lock_guard<std::mutex> lock(process_lock());
    if (!set(static_cast<int>(alg))) return MPI_ERR_INTERN;
    const int err = start();
    set(0);
    return err;
  }
  // Usable on every rank of comm or on none (collective): ranks must agree on pinning.
  void agree(MPI_Comm comm);

 private:
  LibnbcAllreduceKnob() = default;
  static std::mutex& process_lock();
  bool set(int value);
  bool mpit_ = false;  // MPI_T_init_thread succeeded: finalize it with us
  MPI_T_cvar_handle handle_ = MPI_T_CVAR_HANDLE_NULL;
  std::string why_not_;
};

}  // namespace tessera
