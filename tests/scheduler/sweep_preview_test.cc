// What SubmitSweep says before a sweep runs, as pure functions: the grid's
// axes and groups (sweep_preview.h) for a grid, a random search and a
// boundary search; the warnings; the cost estimate (cost_estimate.h).
// tests/scheduler/submit_preview_test.cc checks them through the gRPC API
// on both stores.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/cost_estimate.h"
#include "scheduler/sweep_expander.h"
#include "scheduler/sweep_preview.h"
#include "scheduler/sweep_spec.h"
#include "tests/common/specs.h"
#include "trainer/settings/flops.h"

namespace normsweep::scheduler {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

struct Expanded {
  ValidSpec valid;
  std::vector<db::NewTrial> trials;
};

// spec parsed and expanded.
absl::StatusOr<Expanded> Expand(const v1::SweepSpec& spec) {
  absl::StatusOr<ValidSpec> valid = ValidSpec::Parse(spec);
  if (!valid.ok()) return valid.status();
  absl::StatusOr<std::vector<db::NewTrial>> trials = ExpandSweep(*valid);
  if (!trials.ok()) return trials.status();
  return Expanded{*std::move(valid), *std::move(trials)};
}

std::vector<std::string> Names(const std::vector<v1::GridAxis>& axes) {
  std::vector<std::string> out;
  for (const v1::GridAxis& a : axes) out.push_back(a.name());
  return out;
}

std::vector<std::string> Values(const v1::GridAxis& axis) { return {axis.values().begin(), axis.values().end()}; }

// "placement/variant: trials" per group.
std::vector<std::string> Groups(const std::vector<v1::GridGroup>& groups) {
  std::vector<std::string> out;
  for (const v1::GridGroup& g : groups) out.push_back(absl::StrCat(g.placement(), "/", g.variant(), ": ", g.trials()));
  return out;
}

TEST(SweepPreviewTest, GridAxesAreInExpansionOrderWithTheTrialsValues) {
  v1::SweepSpec spec = testing::SmallSpec("grid");
  spec.set_placements(0, "post-ln");  // an alias: the axis says the canonical name
  spec.add_warmup_steps(50);
  spec.add_peak_lrs(1e-3);
  spec.add_peak_lrs(3e-4);
  spec.add_seeds(0);
  spec.add_seeds(1);
  testing::AddAxis(&spec, "layers", {"02", "4"});
  auto expanded = Expand(spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const Expanded& e = *expanded;
  const std::vector<v1::GridAxis> axes = GridAxes(e.valid);
  EXPECT_THAT(Names(axes), ElementsAre("seed", "layers", "warmup_steps", "peak_lr", "placement"));
  EXPECT_THAT(Values(axes[0]), ElementsAre("0", "1"));
  EXPECT_THAT(Values(axes[1]), ElementsAre("2", "4"));
  EXPECT_THAT(Values(axes[2]), ElementsAre("0", "50"));
  EXPECT_THAT(Values(axes[3]), ElementsAre("0.001", "0.0003"));
  EXPECT_THAT(Values(axes[4]), ElementsAre("post", "pre"));
  ASSERT_EQ(e.trials.size(), 32u);
  EXPECT_THAT(Groups(GridGroups(e.trials)),
              ElementsAre("post/layers=2: 8", "pre/layers=2: 8", "post/layers=4: 8", "pre/layers=4: 8"));
  EXPECT_THAT(SweepWarnings(e.valid, e.trials), IsEmpty());
}

TEST(SweepPreviewTest, RandomSearchAxesSayHowTheyAreSampled) {
  v1::SweepSpec spec = testing::SmallSpec("random");
  spec.clear_warmup_steps();
  spec.add_seeds(0);
  v1::RandomSearch* rs = spec.mutable_random_search();
  rs->set_samples(5);
  rs->set_lr_min(1e-4);
  rs->set_lr_max(1e-2);
  rs->set_warmup_min(0);
  rs->set_warmup_max(50);
  rs->set_seed(7);
  auto expanded = Expand(spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const Expanded& e = *expanded;
  const std::vector<v1::GridAxis> axes = GridAxes(e.valid);
  EXPECT_THAT(Names(axes), ElementsAre("seed", "warmup_steps", "peak_lr", "placement"));
  const std::string drawn = "5 samples drawn together (random_search.seed 7)";
  EXPECT_THAT(Values(axes[1]), ElementsAre("uniform integers in [0, 50], " + drawn));
  EXPECT_THAT(Values(axes[2]), ElementsAre("log-uniform in [0.0001, 0.01], " + drawn));
  EXPECT_THAT(Groups(GridGroups(e.trials)), ElementsAre("post/: 5", "pre/: 5"));
  EXPECT_THAT(SweepWarnings(e.valid, e.trials), IsEmpty());
}

TEST(SweepPreviewTest, BoundarySearchAxisAndNoteSayWhatTheBisectionAdds) {
  // lr 1e-4 .. 1e-1: 4 initial points by default; the widest coarse interval
  // (a decade) halves 4 times to within the resolution 1.25.
  auto expanded = Expand(testing::BoundarySpec("boundary"));
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const Expanded& e = *expanded;
  const std::vector<v1::GridAxis> axes = GridAxes(e.valid);
  EXPECT_THAT(Names(axes), ElementsAre("seed", "warmup_steps", "peak_lr", "placement"));
  EXPECT_THAT(Values(axes[2]), ElementsAre(AllOf(StartsWith("searched per line in [0.0001, 0.1]: first 0.0001, "),
                                                 EndsWith(", 0.1, then bisection to a factor of 1.25"))));
  EXPECT_THAT(Groups(GridGroups(e.trials)), ElementsAre("post/: 4", "pre/: 4"));
  auto estimate = EstimateCost(e.valid, e.trials, {}, {});
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  EXPECT_EQ(estimate->note(),
            "boundary_search: these figures count the 8 initial points (4 on each of 2 lines); the bisection then adds "
            "up to 4 trials per line (8 in all, an upper bound: a line stops early when its coarse points hold no "
            "boundary), up to 100% more");
}

TEST(SweepPreviewTest, AWarmUpLongerThanTheRunIsAWarningAndOneEqualToItIsNot) {
  v1::SweepSpec spec = testing::SmallSpec("warmups");  // steps 100
  spec.add_warmup_steps(100);  // a full ramp, as deploy/sweeps/paper.yaml's 400 of 400
  spec.add_peak_lrs(1e-3);
  spec.add_seeds(0);
  auto e = Expand(spec);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(SweepWarnings(e->valid, e->trials), IsEmpty());

  spec.add_warmup_steps(150);
  spec.mutable_base()->clear_steps();
  testing::AddAxis(&spec, "steps", {"100", "200"});  // 150 is longer than 100 steps only
  e = Expand(spec);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(SweepWarnings(e->valid, e->trials),
              ElementsAre("warmup_steps 150 is longer than the run (steps 100): its 2 trials never reach the peak lr "
                          "(their last step runs at 66% of it; a warm-up equal to steps ends at the peak)"));

  v1::SweepSpec random = testing::SmallSpec("random");
  random.clear_warmup_steps();
  random.add_seeds(0);
  v1::RandomSearch* rs = random.mutable_random_search();
  rs->set_samples(20);
  rs->set_lr_min(1e-4);
  rs->set_lr_max(1e-2);
  rs->set_warmup_max(300);
  e = Expand(random);
  ASSERT_TRUE(e.ok()) << e.status();
  int longer = 0;
  for (const db::NewTrial& t : e->trials) longer += t.config.warmup_steps() > 100;
  ASSERT_GT(longer, 0);
  EXPECT_THAT(SweepWarnings(e->valid, e->trials),
              ElementsAre(absl::StrCat("random_search.warmup_max 300 is longer than the run (steps 100): ", longer,
                                       " of 40 trials draw a warm-up longer than their run and never reach the "
                                       "peak lr")));
}

TEST(SweepPreviewTest, MoreThanAThousandTrialsIsAWarningAndAThousandIsNot) {
  v1::SweepSpec spec = testing::SmallSpec("large");
  spec.add_peak_lrs(1e-3);
  for (int s = 0; s < 500; ++s) spec.add_seeds(s);
  auto e = Expand(spec);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->trials.size(), 1000u);
  EXPECT_THAT(SweepWarnings(e->valid, e->trials), IsEmpty());
  spec.add_seeds(500);
  e = Expand(spec);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(SweepWarnings(e->valid, e->trials),
              ElementsAre("the sweep has 1002 trials (placements 2 x warmup_steps 1 x peak_lrs 1 x seeds 501), over "
                          "1000: check that every axis needs all its values"));
}

TEST(SweepPreviewTest, RefusalListsTheWarningsAndHowToInsist) {
  const absl::Status refused = RefuseWarnings({"first thing", "second thing"});
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "the sweep was not stored: the scheduler has 2 warnings about it: (1) first thing. (2) second thing. To "
            "submit it as it is: normsweep submit --force (Python: submit(..., force=True); "
            "SubmitSweepRequest.allow_warnings).");
}

TEST(CostEstimateTest, TrialsArePackedLongestFirstOnTheSlotThatFreesFirst) {
  EXPECT_DOUBLE_EQ(PackedSeconds({3, 5, 3, 4, 3}, 2), 10);  // 5+3 | 4+3+3
  EXPECT_DOUBLE_EQ(PackedSeconds({3, 5, 3, 4, 3}, 1), 18);
  EXPECT_DOUBLE_EQ(PackedSeconds({3, 5, 3, 4, 3}, 10), 5);
  EXPECT_DOUBLE_EQ(PackedSeconds({}, 3), 0);
}

// deploy/sweeps/paper.yaml's model: 1,572,864 training FLOPs per token.
v1::TrainConfig PaperModel() {
  v1::TrainConfig c;
  c.set_d_model(64);
  c.set_heads(4);
  c.set_d_ff(128);
  c.set_lr(1e-3);
  return c;
}

TEST(CostEstimateTest, SlotThroughputIsTheMedianOverWorkersOfTheirMedians) {
  constexpr double kPerToken = 1572864;
  v1::TrainConfig refused = PaperModel();
  refused.set_heads(5);  // 64 is not a multiple of 5: left out
  const std::vector<db::WorkerSpeeds> speeds = {
      {1, {{PaperModel(), 1000}, {PaperModel(), 3000}, {PaperModel(), 2000}, {refused, 1e9}}},  // median 2000
      {2, {{PaperModel(), 4000}}},
      {3, {{refused, 1e9}}},  // nothing usable: not a worker of the median
  };
  const SlotThroughput measured = MeasureSlotThroughput(speeds, 1);
  EXPECT_TRUE(measured.measured);
  EXPECT_DOUBLE_EQ(measured.flops_per_s, 3000 * kPerToken);  // the median of 2000 and 4000
  EXPECT_EQ(measured.source,
            "measured: 4 trials on 2 workers (the median of each live worker's last 20 finished, then over workers)");
  const SlotThroughput assumed = MeasureSlotThroughput({{3, {{refused, 1e9}}}}, 2);
  EXPECT_FALSE(assumed.measured);
  EXPECT_DOUBLE_EQ(assumed.flops_per_s, 2 * kAssumedFlopsPerSecondPerCore);
  EXPECT_EQ(assumed.source,
            "assumed: 80 GFLOP/s per core x 2 threads, no finished trials on a live worker (the trainer's CPU figure "
            "in docs/performance.md)");
}

v1::Worker LiveWorker(int devices) {
  v1::Worker w;
  for (int i = 0; i < devices; ++i) w.add_devices("cpu");
  w.set_live(true);
  return w;
}

TEST(CostEstimateTest, EstimateIsTheTrialsFlopsOverTheSlotsThroughput) {
  v1::SweepSpec spec = testing::SmallSpec("cost");  // d_model 64 (d_ff 256), 100 steps
  spec.add_peak_lrs(1e-3);
  spec.add_peak_lrs(3e-3);
  spec.add_seeds(0);
  spec.mutable_base()->set_threads(2);
  auto expanded = Expand(spec);
  ASSERT_TRUE(expanded.ok()) << expanded.status();
  const Expanded& e = *expanded;
  ASSERT_EQ(e.trials.size(), 4u);
  // 2,162,688 FLOPs per token; 100 steps of 32 x 64 tokens; evaluations at
  // step 0 and 100, 8 batches each, at a third of the per-token count.
  const double trial = 204800.0 * 2162688 + 2.0 * 8 * 32 * 64 * 2162688 / 3;
  const std::vector<db::WorkerSpeeds> speeds = {{1, {{PaperModel(), 1000}}}};
  const double per_slot = 1000.0 * 1572864;
  auto est = EstimateCost(e.valid, e.trials, {LiveWorker(1), LiveWorker(2)}, speeds);
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_DOUBLE_EQ(est->flops(), 4 * trial);
  EXPECT_EQ(est->training_tokens(), 4 * 204800);
  EXPECT_TRUE(est->throughput_measured());
  EXPECT_DOUBLE_EQ(est->flops_per_s_per_slot(), per_slot);
  EXPECT_DOUBLE_EQ(est->slot_hours(), 4 * trial / per_slot / 3600);
  EXPECT_DOUBLE_EQ(est->core_hours(), 2 * est->slot_hours());  // base.threads 2
  EXPECT_EQ(est->slots(), 3);
  ASSERT_TRUE(est->has_wall_seconds());
  EXPECT_DOUBLE_EQ(est->wall_seconds(), 2 * trial / per_slot);  // 4 equal trials on 3 slots
  EXPECT_EQ(est->note(), "");

  auto no_workers = EstimateCost(e.valid, e.trials, {}, {});
  ASSERT_TRUE(no_workers.ok()) << no_workers.status();
  EXPECT_FALSE(no_workers->throughput_measured());
  EXPECT_DOUBLE_EQ(no_workers->flops_per_s_per_slot(), 2 * kAssumedFlopsPerSecondPerCore);
  EXPECT_THAT(no_workers->throughput_source(), StartsWith("assumed: 80 GFLOP/s per core x 2 threads"));
  EXPECT_EQ(no_workers->slots(), 0);
  EXPECT_FALSE(no_workers->has_wall_seconds());
  EXPECT_DOUBLE_EQ(no_workers->slot_hours(), 4 * trial / (2 * kAssumedFlopsPerSecondPerCore) / 3600);
}

}  // namespace
}  // namespace normsweep::scheduler
