// What a sweep will cost before it runs (SubmitSweepResponse.estimate):
// each trial's FLOPs from its resolved config (trainer/settings/flops.h),
// divided by the FLOP/s of one trial slot, measured on the live workers'
// finished trials or, where there are none, an assumed per-core figure.
// Pure functions; the scheduler reads the workers and their trials from the
// store and passes them in.
#ifndef NORMSWEEP_SCHEDULER_COST_ESTIMATE_H_
#define NORMSWEEP_SCHEDULER_COST_ESTIMATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "scheduler/sweep_spec.h"

namespace normsweep::scheduler {

// FLOP/s of one CPU core training the paper sweep's model, for an estimate
// without a finished trial to measure. From docs/performance.md, "Fused
// trials" (2026-12-02, nproc 2, AMD EPYC): the solo reference, one-thread
// processes on each core as the local stack runs them, did a median of
// 1,447 trials/hour of that model (100 steps, eval every 25, 16 eval
// batches: 4.08e11 FLOPs each by TrialFlops), 82 GFLOP/s per core; the main
// job's wall time there (516 s for paper.yaml's 60 trials of 1.37e12 on 2
// cores) gives 80, with its queueing and start-up in it. Rounded down to 80.
inline constexpr double kAssumedFlopsPerSecondPerCore = 80e9;

// How many of each live worker's latest finished trials the measured
// throughput takes (Store::RecentTrialSpeeds).
inline constexpr int kThroughputTrialsPerWorker = 20;

// FLOP/s of one trial slot and where it comes from.
struct SlotThroughput {
  double flops_per_s = 0;
  bool measured = false;
  std::string source;  // CostEstimate.throughput_source
};

// The median over workers of the median of tokens_per_s x
// TrainingFlopsPerToken(config) over each worker's trials (a stored config
// the trainer no longer accepts is left out); without any, threads x
// kAssumedFlopsPerSecondPerCore.
SlotThroughput MeasureSlotThroughput(const std::vector<db::WorkerSpeeds>& speeds, int threads);

// The time to run jobs of these lengths on `slots` slots, longest first,
// each on the slot that frees first (LPT scheduling: at most 4/3 of the
// best packing). 0 for no jobs; slots must be > 0.
double PackedSeconds(std::vector<double> job_seconds, int slots);

// The estimate of trials (ExpandSweep's, of spec) on live_workers (their
// devices are the slots), with the measured throughput of speeds.
// boundary_search: the initial points only, and note says how many trials
// the bisection may add.
absl::StatusOr<v1::CostEstimate> EstimateCost(const ValidSpec& spec, const std::vector<db::NewTrial>& trials,
                                              const std::vector<v1::Worker>& live_workers,
                                              const std::vector<db::WorkerSpeeds>& speeds);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_COST_ESTIMATE_H_
