// What a trial computes, from its resolved settings: PaLM's count of
// training FLOPs per token (Chowdhery et al. 2022, appendix B), and a
// trial's total with its evaluations. The C++ definition, which the
// scheduler's cost estimate uses (scheduler/cost_estimate.h);
// tests/reference/model.py's training_flops_per_token, which the benchmarks
// use, is the same count, held to it by tests/trainer/flops_test.cc. Pure
// functions, standard C++.
#ifndef NORMSWEEP_TRAINER_SETTINGS_FLOPS_H_
#define NORMSWEEP_TRAINER_SETTINGS_FLOPS_H_

#include <cstdint>

#include "trainer/settings/config.h"

namespace normsweep::trainer {

// The weights that take part in a matrix product: per block q, k, v and the
// attention's projection (4 d^2), fc1 and fc2 (2 d d_ff), and the head
// (kVocabSize x d). The embedding is a lookup; norms (qk_norm's included)
// and biases do no matrix product; placement does not change the count.
int64_t MatmulParams(const ModelConfig& m);

// 6 x MatmulParams + 12 x layers x seq_len x d_model: the forward pass is 2
// FLOPs per matmul weight plus 4 T d per layer for q k^T and att v over the
// full T x T score matrix (no saving from the causal mask); the backward
// pass is twice the forward.
int64_t TrainingFlopsPerToken(const ModelConfig& m);

// One forward pass per token: a third of TrainingFlopsPerToken.
int64_t ForwardFlopsPerToken(const ModelConfig& m);

// steps x batch_size x seq_len.
int64_t TrainingTokens(const TrainSettings& s);

// The evaluations of a run that reaches its last step, as trainer.cc's run
// makes them: one at step 0 (l0; the worker runs the trainer with its
// diagnostics on), one after each step that is a multiple of eval_every
// below steps, and one after the last step.
int64_t EvaluationCount(const TrainSettings& s);

// A trial's FLOPs if it runs to its last step: TrainingTokens x
// TrainingFlopsPerToken, plus EvaluationCount x eval_batches x batch_size x
// seq_len x ForwardFlopsPerToken. An upper bound for a run that diverges or
// is stopped, and for data with fewer than eval_batches validation batches
// (the trainer evaluates the batches there are). A double: steps x tokens
// x FLOPs can pass 2^63.
double TrialFlops(const TrainSettings& s);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_SETTINGS_FLOPS_H_
