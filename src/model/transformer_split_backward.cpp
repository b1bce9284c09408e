// The split backward of zero-bubble pipelines (transformer.h, set_split_backward): where each
// layer keeps its linear output gradients between backward() and backward_weights(), and the weight
// pass itself. backward() (transformer_passes.cpp) copies the gradients into the places set here.
#include "core/log.h"
#include "model/linear_precision.h"
#include "model/transformer.h"
#include "model/transformer_state.h"

namespace tessera {

void Transformer::set_split_backward(bool split) {
  if (split == split_backward_) return;
  TS_CHECK(!split || (recompute_ == Recompute::none && !sp_))
      << "a split backward reads each layer's saved linear inputs: it needs train.recompute = \"none\" and no "
         "sequence parallelism";
  split_backward_ = split;
  allocate_activations();
}

// Each gradient goes into a buffer of its layer that the backward has finished reading by then
// (see Acts::LinearOutputGrads); only the last owned layer's MLP output gradient needs its own.
void Transformer::place_kept_output_grads() {
  Acts& a = *acts_;
  a.deferred.clear();
  for (int l = first_; l < last_; ++l) {
    LayerActs& own = a.layers[l - first_];
    Acts::LinearOutputGrads g;
    if (cfg_.has_dense_mlp(l)) {
      g.d_mproj = l + 1 < last_ ? own.residual3.as<float>() : a.last_d_mproj.as<float>();
      g.d_fc = own.fch.as<float>();
    }
    g.d_proj = own.residual2.as<float>();
    g.d_qkv = own.qkv.as<float>();
    a.deferred.push_back(g);
  }
}

void Transformer::backward_weights() {
  TS_CHECK(split_backward_) << "backward_weights() needs set_split_backward(true) and a backward() before it";
  const Dims d = dims();
  const int64_t N = d.N, C = d.C, Q = d.Q, A = d.A, F = d.F, FC = d.FC, V = d.V;
  const Weights& w = *w_;
  Acts& a = *acts_;
  OpProfile& prof = profile_;
  const int L = static_cast<int>(cfg_.n_layer);
  // Sequence parallelism is refused, so every rank owns its biases' whole gradient.
  auto weights = [&](float* dweight, float* dbias, const float* dout, const float* inp, const float* weight,
                     int64_t in_features, int64_t out_features) {
    profiled(prof, OpGroup::matmul, [&] {
      linear_backward(be_, precision_, nullptr, dweight, dbias, dout, inp, weight, N, in_features, out_features);
    });
  };
  if (is_last_stage()) {
    weights(w.dhead, nullptr, a.logits.as<float>(), a.lnf.as<float>(), w.head, C, V);
    grad_ready(L);
  }
  for (int l = last_ - 1; l >= first_; --l) {
    const LayerView v = layer_view(l);
    const TensorPtrs& p = w.p[l - first_];
    const TensorPtrs& g = w.g[l - first_];
    const Acts::LinearOutputGrads& kept = a.deferred[static_cast<size_t>(l - first_)];
    if (cfg_.has_dense_mlp(l)) {
      weights(g.mproj_w, g.mproj_b, kept.d_mproj, v.fch_act, p.mproj_w, F, C);
      weights(g.fc_w, g.fc_b, kept.d_fc, v.ln2, p.fc_w, C, FC);
    }
    weights(g.proj_w, g.proj_b, kept.d_proj, v.atty, p.proj_w, A, C);
    weights(g.qkv_w, g.qkv_b, kept.d_qkv, v.ln1, p.qkv_w, C, Q);
    grad_ready(l);
  }
  if (is_first_stage()) grad_ready(-1);
}

}  // namespace tessera
