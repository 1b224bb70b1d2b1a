// `normsweep submit FILE` as a user runs it, against a real scheduler and
// PostgreSQL (issue 34): each --set wins over the file even when its value is
// 0, false or "" (a protobuf merge used to drop those without a word), and a
// field that an axis sets is refused in the file's base with a message that
// names it, the exit status non-zero and nothing stored.
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/served_store_test.h"

namespace normsweep {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;

// Each field of the four kinds set in base to something --set changes.
constexpr char kSweep[] = R"(name: overrides
placements: [pre]
warmup_steps: [0]
peak_lrs: [1e-3]
seeds: [0]
base:
  layers: 2
  d_model: 16
  heads: 2
  steps: 4
  qk_norm: true
  z_loss: 1e-4
  dropout: 0.1
  eval_every: 2
  norm: rmsnorm
)";

class SubmitCliTest : public testing::ServedStoreTest {
 protected:
  std::string WriteSweep(const std::string& yaml) {
    const std::string path = dir_ + "/sweep" + std::to_string(files_++) + ".yaml";
    std::ofstream(path) << yaml;
    return path;
  }

  CommandResult Submit(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"submit"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Cli(argv);
  }

  int files_ = 0;
};

TEST_F(SubmitCliTest, SetWinsOverTheFileWithZeroFalseAndEmptyValues) {
  const CommandResult r = Submit({WriteSweep(kSweep), "--set", "qk_norm=false", "--set", "z_loss=0", "--set",
                                  "dropout=0", "--set", "eval_every=0", "--set", "norm="});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  int64_t id = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(r.output), &id)) << r.output;
  auto sweep = store_->GetSweep(id);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const v1::TrainConfig& base = sweep->spec().base();
  EXPECT_FALSE(base.qk_norm());
  EXPECT_EQ(base.z_loss(), 0);
  EXPECT_EQ(base.dropout(), 0);
  EXPECT_EQ(base.eval_every(), 0);
  EXPECT_EQ(base.norm(), "");
  EXPECT_EQ(base.layers(), 2);  // the rest of the file stays
  // The trial runs what was asked: the resolved config the worker gets.
  auto trials = store_->ListTrials(id, v1::TRIAL_STATE_UNSPECIFIED, -1, 10);
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  const v1::TrainConfig& c = trials->front().config();
  EXPECT_FALSE(c.qk_norm());
  EXPECT_EQ(c.z_loss(), 0);
  EXPECT_EQ(c.dropout(), 0);
  EXPECT_EQ(c.eval_every(), 100);  // 0 is the default's value, not the file's 2
  EXPECT_EQ(c.norm(), "layernorm");
}

TEST_F(SubmitCliTest, AxisFieldsInBaseAreRefusedAndNothingIsStored) {
  const std::string with_lr = WriteSweep(std::string(kSweep) + "  lr: 5\n");
  CommandResult r = Submit({with_lr});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("spec.base.lr: set by an axis"));
  EXPECT_THAT(r.output, HasSubstr("use spec.peak_lrs"));
  r = Submit({WriteSweep(kSweep), "--set", "seed=3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("spec.base.seed: set by an axis"));
  r = Submit({WriteSweep(std::string(kSweep) + "extra_axes:\n  - field: dropout\n    values: [\"0\", \"0.2\"]\n")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("spec.base.dropout: set by spec.extra_axes[0]"));
  auto sweeps = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 10);
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_TRUE(sweeps->empty());
}

// A data_file missing on the submitting host: a warning that stops the
// submit (exit status 1, nothing stored) unless --force, which stores it.
TEST_F(SubmitCliTest, AMissingDataFileStopsTheSubmitUnlessForced) {
  const std::string sweep = WriteSweep(kSweep);
  const std::string missing = "data_file=" + dir_ + "/no-such-corpus.txt";
  CommandResult r = Submit({sweep, "--set", missing});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("warning: base.data_file '" + dir_ + "/no-such-corpus.txt' does not exist on "
                                  "this host; the workers read it on theirs, so it may still be right there\n"));
  EXPECT_THAT(r.output, HasSubstr("normsweep: not submitted, nothing stored: the sweep has warnings (above); "
                                  "normsweep submit --force submits it all the same\n"));
  auto sweeps = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 10);
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_TRUE(sweeps->empty());
  // The dry run says it too, and stores nothing either.
  r = Submit({sweep, "--set", missing, "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("valid: 1 trials (a dry run: nothing was stored)\n"));
  EXPECT_THAT(r.output, HasSubstr("warnings (a real submit stops on these unless --force):\n"
                                  "  - base.data_file '"));
  // Forced: stored, the warning said once more.
  r = Submit({sweep, "--set", missing, "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("warning: base.data_file '"));
  sweeps = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 10);
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  ASSERT_EQ(sweeps->size(), 1u);
  EXPECT_EQ(sweeps->front().spec().base().data_file(), dir_ + "/no-such-corpus.txt");
}

// The scheduler's warnings (a warm-up longer than the run): refused with
// FAILED_PRECONDITION and printed, nothing stored, unless --force; the dry
// run prints the scheduler's grid and estimate.
TEST_F(SubmitCliTest, TheSchedulersWarningsStopTheSubmitUnlessForced) {
  const std::string sweep = WriteSweep(kSweep);  // steps: 4
  CommandResult r = Submit({sweep, "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("valid: 1 trials (a dry run: nothing was stored)\n\ngrid (axes in expansion order):\n"));
  EXPECT_THAT(r.output, HasSubstr("\nestimate:\n  compute     "));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("warnings")));
  const std::string long_warmup = WriteSweep(absl::StrReplaceAll(kSweep, {{"warmup_steps: [0]", "warmup_steps: [10]"}}));
  r = Submit({long_warmup});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("normsweep: submit refused: "));
  EXPECT_THAT(r.output, HasSubstr("warmup_steps 10"));
  EXPECT_THAT(r.output, HasSubstr("--force"));
  auto sweeps = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 10);
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_TRUE(sweeps->empty());
  r = Submit({long_warmup, "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("warnings (a real submit stops on these unless --force):\n  - "));
  r = Submit({long_warmup, "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("warning: "));
  sweeps = store_->ListSweeps(v1::SWEEP_STATE_UNSPECIFIED, 0, 10);
  ASSERT_TRUE(sweeps.ok()) << sweeps.status();
  EXPECT_EQ(sweeps->size(), 1u);
}

// A misspelt field: its line and column and the closest name, before any call.
TEST_F(SubmitCliTest, AnUnknownFieldSaysWhereAndTheClosestName) {
  const std::string path = WriteSweep(absl::StrReplaceAll(kSweep, {{"  d_model: 16", "  d_modle: 16"}}));
  const CommandResult r = Submit({path});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(path + ": line 8, column 3: unknown field 'd_modle' in base (TrainConfig); did "
                                         "you mean 'd_model'?"));
}

}  // namespace
}  // namespace normsweep
