// The closest name for "did you mean": edit distances, the nearness cut-off,
// ties, and a message's field names.
#include "client/did_you_mean.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::client {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

TEST(DidYouMeanTest, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("", "abc"), 3);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("seed", "seeds"), 1);       // an insertion
  EXPECT_EQ(EditDistance("lr_maxx", "lr_max"), 1);   // a deletion
  EXPECT_EQ(EditDistance("d_modle", "d_model"), 2);  // two substitutions (no transpositions)
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("Layers", "layers"), 0);    // case folded
  EXPECT_EQ(EditDistance("abc", "xyz"), 3);
}

TEST(DidYouMeanTest, ClosestIsNearEnoughOrNothing) {
  const std::vector<std::string> names = {"name", "placements", "warmup_steps", "peak_lrs", "seeds"};
  EXPECT_THAT(Closest("seed", names), Optional(std::string("seeds")));
  EXPECT_THAT(Closest("peak_lr", names), Optional(std::string("peak_lrs")));
  EXPECT_THAT(Closest("warmupsteps", names), Optional(std::string("warmup_steps")));
  EXPECT_THAT(Closest("xyz", names), std::nullopt);
  // 6 edits from warmup_steps, more than a third of it, but its beginning;
  // and the other way round.
  EXPECT_THAT(Closest("warmup", names), Optional(std::string("warmup_steps")));
  EXPECT_THAT(Closest("placements_list", names), Optional(std::string("placements")));
  EXPECT_THAT(Closest("pl", names), std::nullopt);  // too short to be a beginning that means something
  EXPECT_THAT(Closest("warmupx", {"warmup_steps"}), std::nullopt);  // neither near nor a beginning
  EXPECT_THAT(Closest("seeds", {}), std::nullopt);
  // Short names: up to 2 edits; the first of equals on a tie.
  EXPECT_THAT(Closest("ab", {"xy", "ax", "bb"}), Optional(std::string("ax")));
  EXPECT_THAT(Closest("ab", {"xyz"}), std::nullopt);
  // The nearer wins whatever its place.
  EXPECT_THAT(Closest("lr_maxx", {"lr_min", "lr_max"}), Optional(std::string("lr_max")));
}

TEST(DidYouMeanTest, SuffixAndFieldNames) {
  EXPECT_EQ(DidYouMean("seed", {"seeds"}), "; did you mean 'seeds'?");
  EXPECT_EQ(DidYouMean("zzz", {"seeds"}), "");
  EXPECT_THAT(FieldNames(*v1::BoundarySearch::descriptor()),
              ElementsAre("lr_min", "lr_max", "resolution", "initial_points", "min_improvement", "max_val_loss"));
}

}  // namespace
}  // namespace normsweep::client
