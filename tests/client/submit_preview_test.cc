// `normsweep submit --dry-run`'s text from hand-built SubmitSweepResponses:
// the grid, the trials per placement and variant, the estimate, the
// warnings (the scheduler's and this host's), and a response from a
// scheduler that sends none of them.
#include "client/submit_preview.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

v1::GridAxis* Axis(v1::SubmitSweepResponse& r, const std::string& name, const std::vector<std::string>& values) {
  v1::GridAxis* a = r.add_axes();
  a->set_name(name);
  for (const std::string& v : values) a->add_values(v);
  return a;
}

void Group(v1::SubmitSweepResponse& r, const std::string& placement, const std::string& variant, int trials) {
  v1::GridGroup* g = r.add_groups();
  g->set_placement(placement);
  g->set_variant(variant);
  g->set_trials(trials);
}

// post, pre x two warm-ups x three lrs x two seeds x qk_norm off and on.
v1::SubmitSweepResponse Grid() {
  v1::SubmitSweepResponse r;
  r.mutable_sweep()->set_name("qk");
  r.mutable_sweep()->set_trial_count(48);
  Axis(r, "placement", {"post", "pre"});
  Axis(r, "warmup_steps", {"0", "100"});
  Axis(r, "peak_lr", {"0.0005", "0.001", "0.003"});
  Axis(r, "seed", {"0", "1"});
  Axis(r, "qk_norm", {"false", "true"});
  for (const char* p : {"post", "pre"}) {
    for (const char* v : {"qk_norm=false", "qk_norm=true"}) Group(r, p, v, 12);
  }
  v1::CostEstimate* e = r.mutable_estimate();
  e->set_flops(1.2345e15);
  e->set_training_tokens(4915200);
  e->set_flops_per_s_per_slot(2.1e9);
  e->set_throughput_source("measured: 12 trials on 2 workers");
  e->set_throughput_measured(true);
  e->set_slot_hours(163.3);
  e->set_core_hours(653.2);
  e->set_slots(4);
  e->set_wall_seconds(147000);
  return r;
}

TEST(SubmitPreviewTest, TheGridTheGroupsAndTheEstimate) {
  EXPECT_EQ(RenderSubmitPreview(Grid(), {}),
            "valid: 48 trials (a dry run: nothing was stored)\n"
            "\n"
            "grid (axes in expansion order):\n"
            "  placement     post, pre\n"
            "  warmup_steps  0, 100\n"
            "  peak_lr       0.0005, 0.001, 0.003\n"
            "  seed          0, 1\n"
            "  qk_norm       false, true\n"
            "\n"
            "trials per placement and variant:\n"
            "  placement  variant        trials\n"
            "  post       qk_norm=false      12\n"
            "  post       qk_norm=true       12\n"
            "  pre        qk_norm=false      12\n"
            "  pre        qk_norm=true       12\n"
            "\n"
            "estimate:\n"
            "  compute     1.23 PFLOP over 4,915,200 training tokens\n"
            "  throughput  2.1 GFLOP/s per slot (measured: 12 trials on 2 workers)\n"
            "  time        163 slot-hours, 653 core-hours\n"
            "  wall time   40h50m on 4 slots\n");
}

TEST(SubmitPreviewTest, NoVariantNoWorkerAndANote) {
  v1::SubmitSweepResponse r;
  r.mutable_sweep()->set_trial_count(12000);
  Axis(r, "placement", {"pre"});
  Axis(r, "peak_lr", {"log-uniform in [1e-4, 1e-2]"});
  Group(r, "pre", "", 12000);
  v1::CostEstimate* e = r.mutable_estimate();
  e->set_flops(5e11);
  e->set_training_tokens(1000);
  e->set_flops_per_s_per_slot(2e9);
  e->set_throughput_source("assumed: 2 GFLOP/s per core, no finished trials");
  e->set_slot_hours(0.0694);
  e->set_core_hours(0.0694);
  e->set_note("the bisection adds up to 6 trials per line");
  const std::string out = RenderSubmitPreview(r, {});
  EXPECT_THAT(out, HasSubstr("valid: 12,000 trials"));
  EXPECT_THAT(out, HasSubstr("  peak_lr    log-uniform in [1e-4, 1e-2]\n"));
  EXPECT_THAT(out, HasSubstr("  pre        -        12,000\n"));  // no extra axis: no variant
  EXPECT_THAT(out, HasSubstr("  compute     500 GFLOP over 1,000 training tokens\n"));
  EXPECT_THAT(out, HasSubstr("  throughput  2 GFLOP/s per slot (assumed: 2 GFLOP/s per core, no finished trials)\n"));
  EXPECT_THAT(out, HasSubstr("  time        0.0694 slot-hours, 0.0694 core-hours\n"));
  EXPECT_THAT(out, HasSubstr("  wall time   unknown: no live worker is registered\n"));
  EXPECT_THAT(out, HasSubstr("  note        the bisection adds up to 6 trials per line\n"));
}

TEST(SubmitPreviewTest, WarningsOfTheSchedulerThenOfThisHost) {
  v1::SubmitSweepResponse r = Grid();
  r.add_warnings("spec.warmup_steps[1]: 100 is longer than the run (base.steps 50): the peak lr is never reached");
  const std::string out = RenderSubmitPreview(r, {"base.data_file '/x' does not exist on this host"});
  EXPECT_THAT(out, HasSubstr("  wall time   40h50m on 4 slots\n"
                             "\n"
                             "warnings (a real submit stops on these unless --force):\n"
                             "  - spec.warmup_steps[1]: 100 is longer than the run (base.steps 50): the peak lr is "
                             "never reached\n"
                             "  - base.data_file '/x' does not exist on this host\n"));
  EXPECT_THAT(AllWarnings(r, {"host"}), ElementsAre(HasSubstr("spec.warmup_steps[1]"), "host"));
  EXPECT_EQ(RenderWarnings({"a", "b"}), "warning: a\nwarning: b\n");
  EXPECT_EQ(RenderWarnings({}), "");
  EXPECT_THAT(RenderSubmitPreview(Grid(), {}), Not(HasSubstr("warning")));
}

// A scheduler from before the grid and the estimate: the count, and why
// nothing more.
TEST(SubmitPreviewTest, AnOlderSchedulerSendsOnlyTheCount) {
  v1::SubmitSweepResponse r;
  r.mutable_sweep()->set_trial_count(4);
  EXPECT_EQ(RenderSubmitPreview(r, {}),
            "valid: 4 trials (a dry run: nothing was stored)\n"
            "(the scheduler sent no grid and no estimate: an older normsweep-scheduler?)\n");
}

TEST(SubmitPreviewTest, SiPrefixes) {
  EXPECT_EQ(SiPrefixed(0, "FLOP"), "0 FLOP");
  EXPECT_EQ(SiPrefixed(950, "FLOP/s"), "950 FLOP/s");
  EXPECT_EQ(SiPrefixed(999.4, "FLOP"), "999 FLOP");
  EXPECT_EQ(SiPrefixed(999.6, "FLOP"), "1 kFLOP");
  EXPECT_EQ(SiPrefixed(1.2345e15, "FLOP"), "1.23 PFLOP");
  EXPECT_EQ(SiPrefixed(3e18, "FLOP"), "3 EFLOP");
  EXPECT_EQ(SiPrefixed(4.2e21, "FLOP"), "4.2e+21 FLOP");
}

// A data_file that is not on this host: a warning that says the workers
// read it on theirs; base's and an extra axis's values alike.
TEST(HostWarningsTest, DataFileMissingOnThisHost) {
  char dir[] = "/tmp/submit_preview_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string here = std::string(dir) + "/corpus.txt";
  std::ofstream(here) << "text";
  const std::string missing = std::string(dir) + "/missing.txt";
  v1::SweepSpec spec;
  EXPECT_THAT(HostWarnings(spec), IsEmpty());  // no data_file: a built-in task
  spec.mutable_base()->set_data_file(here);
  EXPECT_THAT(HostWarnings(spec), IsEmpty());
  spec.mutable_base()->set_data_file(missing);
  v1::ExtraAxis* layers = spec.add_extra_axes();
  layers->set_field("layers");
  layers->add_values("2");
  v1::ExtraAxis* files = spec.add_extra_axes();
  files->set_field("data_file");
  files->add_values(here);
  files->add_values(missing);
  EXPECT_THAT(HostWarnings(spec),
              ElementsAre("base.data_file '" + missing +
                              "' does not exist on this host; the workers read it on theirs, so it may still be "
                              "right there",
                          HasSubstr("extra_axes[1].values[1] (data_file) '" + missing + "' does not exist")));
  std::remove(here.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace normsweep::client
