// MPI datatypes and the bf16/f16 reduction ops.
#include "comm/mpi/mpi_types.h"

#include <algorithm>
#include <cstdint>

namespace tessera {

MPI_Datatype mpi_datatype(DType dt) {
  switch (dt) {
    case DType::f32: return MPI_FLOAT;
    case DType::i32: return MPI_INT32_T;
    case DType::bf16: case DType::f16: case DType::u16: return MPI_UINT16_T;
    case DType::u8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

namespace {
struct Bf16 {
  static float load(uint16_t h) { return bf16_to_f32(h); }
  static uint16_t store(float f) { return f32_to_bf16(f); }
};
struct F16 {
  static float load(uint16_t h) { return f16_to_f32(h); }
  static uint16_t store(float f) { return f32_to_f16(f); }
};
struct Sum { static float apply(float a, float b) { return a + b; } };
struct Max { static float apply(float a, float b) { return std::max(a, b); } };
struct Min { static float apply(float a, float b) { return std::min(a, b); } };

// MPI user op signature: inout[i] = in[i] (op) inout[i].
template <typename Fmt, typename Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Fmt::store(Op::apply(Fmt::load(a[i]), Fmt::load(b[i])));
}

template <typename Fmt>
void create_ops(MPI_Op* ops) {
  MPI_Op_create(&half_op<Fmt, Sum>, 1, &ops[0]);
  MPI_Op_create(&half_op<Fmt, Max>, 1, &ops[1]);
  MPI_Op_create(&half_op<Fmt, Min>, 1, &ops[2]);
}
int op_index(ReduceOp op) { return op == ReduceOp::max ? 1 : op == ReduceOp::min ? 2 : 0; }
}  // namespace

MpiReduceOps::MpiReduceOps() {
  create_ops<Bf16>(half_ops_[0]);
  create_ops<F16>(half_ops_[1]);
}

MpiReduceOps::~MpiReduceOps() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& row : half_ops_)
    for (MPI_Op& op : row) MPI_Op_free(&op);
}

MPI_Op MpiReduceOps::get(DType dt, ReduceOp op) const {
  if (dt == DType::bf16) return half_ops_[0][op_index(op)];
  if (dt == DType::f16) return half_ops_[1][op_index(op)];
  switch (op) {
    case ReduceOp::sum: case ReduceOp::avg: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

void divide_in_place(void* buf, int64_t count, DType dt, int n) {
  const float fn = static_cast<float>(n);
  if (dt == DType::f32) {
    float* p = static_cast<float*>(buf);
    for (int64_t i = 0; i < count; ++i) p[i] /= fn;
  } else if (dt == DType::bf16) {
    uint16_t* p = static_cast<uint16_t*>(buf);
    for (int64_t i = 0; i < count; ++i) p[i] = f32_to_bf16(bf16_to_f32(p[i]) / fn);
  } else if (dt == DType::f16) {
    uint16_t* p = static_cast<uint16_t*>(buf);
    for (int64_t i = 0; i < count; ++i) p[i] = f32_to_f16(f16_to_f32(p[i]) / fn);
  }
}

}  // namespace tessera
