// A field that an axis sets is refused in spec.base over gRPC (issue 34):
// INVALID_ARGUMENT naming spec.base.FIELD and the axis to use, and nothing
// stored. Before, base {lr: 5, warmup_steps: 7, seed: 3, placement: post}
// was one valid trial that ran pre at lr 1e-3, warm-up 0, seed 0.
#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/in_process_scheduler.h"
#include "tests/common/specs.h"

namespace normsweep::scheduler {
namespace {

using ::testing::HasSubstr;

class BaseAxisFieldsTest : public testing::InProcessSchedulerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  // post/pre x warm-up 0 x lr 1e-3 x seed 0 with `change` applied.
  static v1::SubmitSweepRequest Request(const std::function<void(v1::SweepSpec*)>& change) {
    v1::SubmitSweepRequest r;
    r.set_request_id("r");
    *r.mutable_spec() = testing::SmallSpec("base-axes");
    r.mutable_spec()->add_peak_lrs(1e-3);
    r.mutable_spec()->add_seeds(0);
    change(r.mutable_spec());
    return r;
  }

  grpc::Status Submit(const v1::SubmitSweepRequest& request, bool validate_only = false) {
    v1::SubmitSweepRequest r = request;
    r.set_validate_only(validate_only);
    grpc::ClientContext ctx;
    v1::SubmitSweepResponse resp;
    return sweeps_->SubmitSweep(&ctx, r, &resp);
  }

  int StoredSweeps() {
    grpc::ClientContext ctx;
    v1::ListSweepsResponse resp;
    EXPECT_TRUE(sweeps_->ListSweeps(&ctx, v1::ListSweepsRequest(), &resp).ok());
    return resp.sweeps_size();
  }

  // Refused with INVALID_ARGUMENT whose message has `field` and `axis`,
  // both as a dry run and for real, and nothing stored.
  void ExpectRefused(const std::function<void(v1::SweepSpec*)>& change, const std::string& field,
                     const std::string& axis) {
    for (bool validate_only : {true, false}) {
      grpc::Status s = Submit(Request(change), validate_only);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field << ": " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(field + ": set by"));
      EXPECT_THAT(s.error_message(), HasSubstr(axis));
    }
    EXPECT_EQ(StoredSweeps(), 0);
  }
};

TEST_F(BaseAxisFieldsTest, MainAxisFieldsInBaseAreRefusedNamingTheAxis) {
  ExpectRefused([](v1::SweepSpec* s) { s->mutable_base()->set_lr(5); }, "spec.base.lr", "use spec.peak_lrs");
  ExpectRefused([](v1::SweepSpec* s) { s->mutable_base()->set_warmup_steps(7); }, "spec.base.warmup_steps",
                "use spec.warmup_steps");
  ExpectRefused([](v1::SweepSpec* s) { s->mutable_base()->set_seed(3); }, "spec.base.seed", "use spec.seeds");
  ExpectRefused([](v1::SweepSpec* s) { s->mutable_base()->set_placement("post"); }, "spec.base.placement",
                "use spec.placements");
}

TEST_F(BaseAxisFieldsTest, TheLrAxisOfASearchIsNamed) {
  ExpectRefused(
      [](v1::SweepSpec* s) {
        s->clear_peak_lrs();
        s->mutable_boundary_search()->set_lr_min(1e-4);
        s->mutable_boundary_search()->set_lr_max(1e-1);
        s->mutable_base()->set_lr(1e-3);
      },
      "spec.base.lr", "spec.boundary_search");
  ExpectRefused(
      [](v1::SweepSpec* s) {
        s->clear_peak_lrs();
        s->clear_warmup_steps();
        s->mutable_random_search()->set_samples(2);
        s->mutable_base()->set_warmup_steps(10);
      },
      "spec.base.warmup_steps", "spec.random_search");
}

TEST_F(BaseAxisFieldsTest, AnExtraAxisFieldInBaseIsRefused) {
  ExpectRefused(
      [](v1::SweepSpec* s) {
        testing::AddAxis(s, "dropout", {"0", "0.1"});
        testing::AddAxis(s, "qk_norm", {"false", "true"});
        s->mutable_base()->set_qk_norm(true);
      },
      "spec.base.qk_norm", "spec.extra_axes[1]");
  ExpectRefused(
      [](v1::SweepSpec* s) {
        testing::AddAxis(s, "beta2", {"0.95", "0.98"});
        s->mutable_base()->set_beta2(0.999);  // a field with presence
      },
      "spec.base.beta2", "spec.extra_axes[0]");
}

TEST_F(BaseAxisFieldsTest, FieldsNoAxisSetsAreAccepted) {
  // Their defaults (lr 0, seed 0, placement "") mean "unset", and a base
  // field beside an axis over another field is the point of base.
  EXPECT_TRUE(Submit(Request([](v1::SweepSpec* s) {
                testing::AddAxis(s, "qk_norm", {"false", "true"});
                s->mutable_base()->set_dropout(0.1);
                s->mutable_base()->set_seed(0);
              })).ok());
  EXPECT_EQ(StoredSweeps(), 1);
}

}  // namespace
}  // namespace normsweep::scheduler
