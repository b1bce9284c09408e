// Rotary position embedding, Hugging Face LLaMA "rotate_half" pairing (i, i + HS/2), in place on
// the q and k heads of a packed qkv row. cos/sin come from the workspace's table (cpu_workspace.h),
// computed in double and rebuilt only when (HS, theta) change or more positions are needed, so
// steady-state calls do not allocate. Row t of a sequence is at position pos0 + t.
#include <cmath>
#include <vector>

#include "backend/ops.h"
#include "core/log.h"

#include "backend/cpu/kernel_decls.h"
#include "backend/cpu/kernel_isa_begin.h"  // after every other header but this level's own

namespace tessera::ops::TESSERA_KERNEL_NS {

namespace {

// Positions [0, T): a table with more positions serves too (each row depends only on its position).
const RopeTable& rope_table(RopeTable& table, int64_t T, int64_t HS, float theta) {
  if (table.T < T || table.HS != HS || table.theta != theta) {
    const int64_t half = HS / 2;
    table.cos.resize(T * half);
    table.sin.resize(T * half);
    float* cos_p = table.cos.data();
    float* sin_p = table.sin.data();
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            static_cast<double>(t) * std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / HS);
        cos_p[t * half + i] = static_cast<float>(std::cos(angle));
        sin_p[t * half + i] = static_cast<float>(std::sin(angle));
      }
    }
    table.T = T;
    table.HS = HS;
    table.theta = theta;
  }
  return table;
}

// Rotates every q and k head of every row by +angle (sign = 1) or -angle (sign = -1).
void rope_apply(RopeTable& table, float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV, int64_t HS,
                float theta, float sign) {
  TS_CHECK(HS % 2 == 0) << "rope needs an even head size, got HS=" << HS;
  TS_CHECK(pos0 >= 0) << "rope positions start at pos0 >= 0, got " << pos0;
  const RopeTable& tab = rope_table(table, pos0 + T, HS, theta);
  const int64_t half = HS / 2;
  const int64_t row = (NH + 2 * NKV) * HS;
  const int64_t rotated_heads = NH + NKV;  // q heads then k heads are contiguous at the row start
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t t = pos0 + bt % T;
    const float* cs = tab.cos.data() + t * half;
    const float* sn = tab.sin.data() + t * half;
    for (int64_t h = 0; h < rotated_heads; ++h) {
      float* x = qkv + bt * row + h * HS;
#pragma omp simd
      for (int64_t i = 0; i < half; ++i) {
        const float c = cs[i], s = sign * sn[i];
        const float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

}  // namespace

void rope_forward(CpuWorkspace& ws, float* qkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS,
                  float theta) {
  rope_apply(ws.rope, qkv, B, T, 0, NH, NKV, HS, theta, 1.0f);
}

void rope_backward(CpuWorkspace& ws, float* dqkv, int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS,
                   float theta) {
  // A rotation's transpose is the rotation by the opposite angle.
  rope_apply(ws.rope, dqkv, B, T, 0, NH, NKV, HS, theta, -1.0f);
}

void rope_forward_at(CpuWorkspace& ws, float* qkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV,
                     int64_t HS, float theta) {
  rope_apply(ws.rope, qkv, B, T, pos0, NH, NKV, HS, theta, 1.0f);
}

void rope_backward_at(CpuWorkspace& ws, float* dqkv, int64_t B, int64_t T, int64_t pos0, int64_t NH, int64_t NKV,
                      int64_t HS, float theta) {
  rope_apply(ws.rope, dqkv, B, T, pos0, NH, NKV, HS, theta, -1.0f);
}

}  // namespace tessera::ops::TESSERA_KERNEL_NS

#include "backend/cpu/kernel_isa_end.h"
