// The near-best tolerance is defined once for C++ (proto/schema/api_limits.h);
// the placement_sensitivity view, which C++ cannot reach, says it again in
// SQL (db/views/). This holds the two together.
#include <string>

#include "absl/strings/str_cat.h"
#include "db/migrations.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/schema/api_limits.h"

namespace normsweep::db {
namespace {

TEST(NearBestToleranceTest, ThePlacementSensitivityViewUsesTheApiDefault) {
  const std::string call = absl::StrCat("placement_sensitivity_at(", schema::kDefaultNearBestTolerance, ")");
  int found = 0;
  for (const View& view : EmbeddedViews()) {
    if (view.name != "placement_sensitivity") continue;
    ++found;
    EXPECT_THAT(view.sql, ::testing::HasSubstr(call));
  }
  EXPECT_EQ(found, 1);
}

}  // namespace
}  // namespace normsweep::db
