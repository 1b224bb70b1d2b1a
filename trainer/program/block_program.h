// The model, written once: the forward and backward passes of every
// placement and switch (qk_norm, the norm kind, z-loss, DeepNorm's
// residual scale, Mix-LN's split, Peri-LN's output norms) as a straight
// sequence of op calls (trainer/program/ops.h), as llm.c's gpt2_forward and
// gpt2_backward read. Both backends run it: the CPU once per part of a
// batch, each part with its own Ops, activations and gradient buffer; the
// CUDA backend once for the whole batch, enqueueing on its stream. The op
// traces of tests/trainer/op_traces/ record what it calls for each scheme.
//
// It reads and writes no buffer itself (they may be device memory): it
// chooses buffers, shapes and scalars, and calls ops.
#ifndef NORMSWEEP_TRAINER_PROGRAM_BLOCK_PROGRAM_H_
#define NORMSWEEP_TRAINER_PROGRAM_BLOCK_PROGRAM_H_

#include "trainer/settings/config.h"
#include "trainer/param_layout.h"
#include "trainer/program/activations.h"
#include "trainer/program/ops.h"

namespace normsweep::trainer {

// One pass over B sequences of T tokens.
struct PassArgs {
  int B = 0, T = 0;
  const float* params = nullptr;     // ParamLayout order
  float* grads = nullptr;            // BackwardPass: the weights' gradients (=), layout order
  const float* sin_pos = nullptr;    // the sinusoidal table (T,C), used without a learned pos_emb
  bool training = false;             // a training pass: dropout on where the model has it
  double z_loss = 0.0;               // BackwardPass: the z-loss coefficient, 0 = off
};

// The forward pass, saving its activations in acts (which
// PlanActivations laid out for at least B sequences): the logits, the
// softmax probabilities and each row's loss and log Z, through ops.
void ForwardPass(const ModelConfig& model, const ParamLayout& layout, Ops& ops, Activations& acts,
                 const PassArgs& args);

// The backward pass after ForwardPass with the same args: the gradient of
// the mean cross-entropy (plus the z term) into args.grads (=).
void BackwardPass(const ModelConfig& model, const ParamLayout& layout, Ops& ops, Activations& acts,
                  const PassArgs& args);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PROGRAM_BLOCK_PROGRAM_H_
