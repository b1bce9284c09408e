// GradientSync: a gradient strategy -- both halves of the seam between the backward pass and the
// next step, implemented by one object because they share the buffers: the communication
// (GradientReduction: micro-batch start, a layer's gradients ready, finish) and the update
// (ParameterUpdate: clip, optimizer step and parameter exchange as one operation, plus the owned
// state). The runners see only the reduction, checkpoints only the update.
//
// Strategies: DataParallel (all-reduce, full replicas), ZeroSharded (ZeRO 1-3), LocalSgd (local
// updates), each per model chunk (ReplicaSync) and composed over a rank's chunks with the tensor /
// pipeline corrections by ModelParallelSync; ParamServerWorker and ParamServer for parallel.mode = "ps".
#pragma once
#include "parallel/gradient_reduction.h"
#include "parallel/parameter_update.h"

namespace tessera {

class GradientSync : public GradientReduction, public ParameterUpdate {};

}  // namespace tessera
