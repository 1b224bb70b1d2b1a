#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "client/sweep_file.h"
#include "proto/schema/train_config.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;

TEST(SweepFileTest, ParsesYamlIntoTheSchema) {
  auto spec = SweepSpecFromYaml(R"(
name: my sweep   # a comment
placements: [post, pre]
warmup_steps: [0, 100]
peak_lrs: [5e-4, 1e-3, 0.003]
seeds: [0, 1]
base:
  layers: 12
  d_model: 64
  lr_unused_here: 1
)");
  ASSERT_FALSE(spec.ok());  // unknown field in base
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("lr_unused_here"));

  spec = SweepSpecFromYaml(R"(
name: my sweep
placements: [post, pre]
warmup_steps: [0, 100]
peak_lrs: [5e-4, 1e-3, 0.003]
seeds: [0, 1]
base: {layers: 12, d_model: 64, optimizer: adam, beta2: 0.98, data_file: "corpus.txt"}
extra_axes:
  - field: layers
    values: ["6", "12"]
max_attempts: 2
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "my sweep");
  ASSERT_EQ(spec->peak_lrs_size(), 3);
  EXPECT_DOUBLE_EQ(spec->peak_lrs(0), 5e-4);
  EXPECT_DOUBLE_EQ(spec->peak_lrs(2), 0.003);
  EXPECT_EQ(spec->base().layers(), 12);
  EXPECT_EQ(spec->base().optimizer(), "adam");
  EXPECT_DOUBLE_EQ(spec->base().beta2(), 0.98);
  EXPECT_EQ(spec->extra_axes(0).values(1), "12");
  EXPECT_EQ(spec->max_attempts(), 2);
}

// An unknown field: its line and column, the message it is not a field of,
// and the closest field name.
TEST(SweepFileTest, UnknownFieldsSayWhereAndTheClosestName) {
  auto error = [](const std::string& text) {
    absl::StatusOr<v1::SweepSpec> spec = SweepSpecFromYaml(text);
    EXPECT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(spec.status().message());
  };
  EXPECT_EQ(error("name: x\nplacements: [pre]\nseed: [0, 1]\n"),
            "line 3, column 1: unknown field 'seed' (SweepSpec); did you mean 'seeds'?");
  EXPECT_EQ(error("name: x\nbase:\n  layers: 2\n  d_modle: 64\n"),
            "line 4, column 3: unknown field 'd_modle' in base (TrainConfig); did you mean 'd_model'?");
  EXPECT_EQ(error("name: b\nboundary_search: {lr_min: 1e-4, lr_maximum: 1e-2}\n"),
            "line 2, column 33: unknown field 'lr_maximum' in boundary_search (BoundarySearch); did you mean "
            "'lr_max'?");
  EXPECT_EQ(error("name: x\nextra_axes:\n  - field: layers\n    values: [\"2\"]\n  - feild: qk_norm\n"),
            "line 5, column 5: unknown field 'feild' in extra_axes[1] (ExtraAxis); did you mean 'field'?");
  // Case is not a different name to a person.
  EXPECT_THAT(error("Name: x\n"), HasSubstr("unknown field 'Name' (SweepSpec); did you mean 'name'?"));
  // Nothing close: no guess.
  EXPECT_EQ(error("name: x\nbase:\n  completely_unrelated: 1\n"),
            "line 3, column 3: unknown field 'completely_unrelated' in base (TrainConfig)");
  // JSON (a sweep file may be either) gets the same; JSON names are fields too.
  EXPECT_EQ(error("{\"name\": \"j\",\n \"peakLrs\": [0.001],\n \"base\": {\"stpes\": 10}}"),
            "line 3, column 11: unknown field 'stpes' in base (TrainConfig); did you mean 'steps'?");
}

// A file that leaves out seeds or warmup_steps gets [0], as the flags do
// (sweep_flags_test checks the flags' side against this function).
TEST(SweepFileTest, SeedsAndWarmupStepsDefaultToZero) {
  auto spec = SweepSpecFromYaml("name: d\nplacements: [pre]\npeak_lrs: [1e-3]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->seeds(), ::testing::ElementsAre(0));
  EXPECT_THAT(spec->warmup_steps(), ::testing::ElementsAre(0));
  // Given values stay; a random search samples the warm-up, so it gets none.
  spec = SweepSpecFromYaml("name: d\nplacements: [pre]\nseeds: [3]\n"
                           "random_search: {samples: 4, lr_min: 1e-4, lr_max: 1e-2, warmup_max: 100}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->seeds(), ::testing::ElementsAre(3));
  EXPECT_TRUE(spec->warmup_steps().empty());
  // A boundary search runs a line per warm-up: [0] too.
  spec = SweepSpecFromYaml("name: b\nplacements: [pre]\nboundary_search: {lr_min: 1e-4, lr_max: 1e-2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->warmup_steps(), ::testing::ElementsAre(0));
  EXPECT_THAT(spec->seeds(), ::testing::ElementsAre(0));
}

TEST(SweepFileTest, ExtraAxisValuesAreStringsAsWritten) {
  // qk_norm's values unquoted are YAML bools, layers' numbers: both read as
  // the strings written (the schema's values are strings).
  auto spec = SweepSpecFromYaml(R"(
name: schemes
placements: [post, pre, sandwich, deepnorm, mix]
extra_axes:
  - field: qk_norm
    values: [false, true]
  - field: layers
    values: [6, 12]
  - field: z_loss
    values: [0, 1e-4]
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->extra_axes_size(), 3);
  EXPECT_EQ(spec->extra_axes(0).values(0), "false");
  EXPECT_EQ(spec->extra_axes(0).values(1), "true");
  EXPECT_EQ(spec->extra_axes(1).values(1), "12");
  EXPECT_EQ(spec->extra_axes(2).values(1), "1e-4");
  EXPECT_EQ(spec->placements(2), "sandwich");  // the scheduler stores it as peri
}

TEST(SweepFileTest, JsonIsYamlToo) {
  auto spec = SweepSpecFromYaml(R"({"name": "j", "placements": ["pre"], "peak_lrs": [0.001], "base": {"steps": 10}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->base().steps(), 10);
}

TEST(SweepFileTest, QuotedNumbersStayStrings) {
  auto json = YamlToJson("name: \"2024\"\nseeds: [1]\n");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, R"({"name":"2024","seeds":[1]})");
}

TEST(SweepFileTest, MalformedYamlNamesTheLine) {
  auto spec = SweepSpecFromYaml("name: x\nplacements: [post, pre\nseeds: [0]\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("line"));
  EXPECT_FALSE(SweepSpecFromYaml("- just\n- a list\n").ok());
  EXPECT_FALSE(SweepSpecFromYaml("name: x\npeak_lrs: fast\n").ok());
}

TEST(SweepFileTest, MissingFileNamesThePath) {
  auto spec = LoadSweepSpec("/nonexistent/sweep.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("/nonexistent/sweep.yaml"));
}

TEST(SweepFileTest, ParsesABoundarySearch) {
  auto spec = SweepSpecFromYaml(R"(
name: boundary
placements: [post, pre]
warmup_steps: [0, 400]
seeds: [0]
boundary_search:
  lr_min: 1e-4
  lr_max: 0.1
  resolution: 1.25
  initial_points: 5
  min_improvement: 1
  max_val_loss: 3.2
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->has_boundary_search());
  const v1::BoundarySearch& b = spec->boundary_search();
  EXPECT_EQ(b.lr_min(), 1e-4);
  EXPECT_EQ(b.lr_max(), 0.1);
  EXPECT_EQ(b.resolution(), 1.25);
  EXPECT_EQ(b.initial_points(), 5);
  EXPECT_EQ(b.min_improvement(), 1);
  ASSERT_TRUE(b.has_max_val_loss());
  EXPECT_EQ(b.max_val_loss(), 3.2);
  EXPECT_TRUE(spec->peak_lrs().empty());
  // max_val_loss left out stays unset (not 0).
  spec = SweepSpecFromYaml("name: b\nplacements: [pre]\nwarmup_steps: [0]\nseeds: [0]\n"
                           "boundary_search: {lr_min: 1e-4, lr_max: 1e-2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->boundary_search().has_max_val_loss());
  // A misspelt field is refused, naming it.
  spec = SweepSpecFromYaml("name: b\nboundary_search: {lr_min: 1e-4, lr_maximum: 1e-2}\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("lr_maximum"));
  // The shipped sweep file: the paper's model, three decades, six lines.
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto shipped = LoadSweepSpec(std::string(src) + "/deploy/sweeps/boundary.yaml");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(shipped->boundary_search().lr_max() / shipped->boundary_search().lr_min(), 1000);
  auto paper = LoadSweepSpec(std::string(src) + "/deploy/sweeps/paper.yaml");
  ASSERT_TRUE(paper.ok()) << paper.status();
  EXPECT_EQ(shipped->base().SerializeAsString(), paper->base().SerializeAsString());
}

// Every shipped example parses, and its base config is a valid trainer config.
TEST(SweepFileTest, ShippedExamplesAreValid) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(src) + "/deploy/sweeps")) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    auto spec = LoadSweepSpec(entry.path().string());
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_FALSE(spec->name().empty());
    v1::TrainConfig c = spec->base();
    c.set_placement(spec->placements(0));
    // A boundary search has no peak_lrs: its range's low end.
    c.set_lr(spec->peak_lrs_size() > 0 ? spec->peak_lrs(0) : spec->boundary_search().lr_min());
    EXPECT_TRUE(schema::ValidateTrainConfig(c).ok()) << entry.path() << ": " << schema::ValidateTrainConfig(c);
  }
  EXPECT_GE(n, 2);
}

}  // namespace
}  // namespace normsweep::client
