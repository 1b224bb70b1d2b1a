#include "client/sweep_tables.h"

#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace normsweep::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Sweep Sweep() {
  v1::Sweep s;
  s.set_id(7);
  s.set_name("ln-warmup-a-name-longer-than-28-characters");
  s.set_state(v1::SWEEP_RUNNING);
  s.set_trial_count(12);
  v1::TrialCounts* c = s.mutable_counts();
  c->set_pending(3);
  c->set_running(2);
  c->set_succeeded(4);
  c->set_diverged(2);
  c->set_failed(1);
  c->set_cancelled(0);
  s.mutable_created_at()->set_seconds(1796112649);  // 2026-12-01T08:10:49Z
  return s;
}

v1::Trial Trial(int64_t id, int index, v1::TrialState state) {
  v1::Trial t;
  t.set_id(id);
  t.set_sweep_id(7);
  t.set_index(index);
  t.set_state(state);
  t.set_attempts(1);
  t.set_last_step(100);
  t.mutable_config()->set_placement("pre");
  t.mutable_config()->set_warmup_steps(400);
  t.mutable_config()->set_lr(1e-3);
  t.mutable_config()->set_seed(2);
  return t;
}

TEST(SweepTablesTest, StateLabels) {
  EXPECT_EQ(SweepStateLabel(v1::SWEEP_RUNNING), "running");
  EXPECT_EQ(SweepStateLabel(v1::SWEEP_COMPLETED), "completed");
  EXPECT_EQ(SweepStateLabel(v1::SWEEP_CANCELLED), "cancelled");
  EXPECT_EQ(SweepStateLabel(v1::SWEEP_STATE_UNSPECIFIED), "unknown");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_PENDING), "pending");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_RUNNING), "running");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_SUCCEEDED), "succeeded");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_DIVERGED), "diverged");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_FAILED), "failed");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_CANCELLED), "cancelled");
  EXPECT_EQ(TrialStateLabel(v1::TRIAL_STATE_UNSPECIFIED), "unknown");
  EXPECT_EQ(TrialStateLabel(static_cast<v1::TrialState>(42)), "unknown");
}

TEST(SweepTablesTest, SweepList) {
  EXPECT_EQ(RenderSweepList({}),
            "id     name                         state       trials   done diverged  failed cancelled  created\n");
  v1::Sweep done = Sweep();
  done.set_id(8);
  done.set_name("short");
  done.set_state(v1::SWEEP_COMPLETED);
  EXPECT_EQ(RenderSweepList({Sweep(), done}),
            "id     name                         state       trials   done diverged  failed cancelled  created\n"
            "7      ln-warmup-a-name-longer-than running         12      7        2       1         0  "
            "2026-12-01T08:10:49Z\n"
            "8      short                        completed       12      7        2       1         0  "
            "2026-12-01T08:10:49Z\n");
}

// Cancelled trials did not run to an outcome: a column of their own, not done.
TEST(SweepTablesTest, SweepListCountsCancelledTrialsApartFromDone) {
  v1::Sweep cancelled = Sweep();
  cancelled.set_state(v1::SWEEP_CANCELLED);
  v1::TrialCounts* c = cancelled.mutable_counts();
  c->set_pending(0);
  c->set_running(0);
  c->set_cancelled(5);  // 4 succeeded + 2 diverged + 1 failed + 5 cancelled = 12
  EXPECT_THAT(RenderSweepList({cancelled}),
              HasSubstr("7      ln-warmup-a-name-longer-than cancelled       12      7        2       1         5  "));
}

TEST(SweepTablesTest, SweepDetail) {
  v1::Trial ok = Trial(101, 0, v1::TRIAL_SUCCEEDED);
  ok.mutable_result()->set_final_val_loss(2.34567);
  v1::Trial running = Trial(102, 1, v1::TRIAL_RUNNING);
  running.set_last_val_loss(3.5);
  running.set_variant("layers=12,optimizer=sgd,beta2=0.98");
  v1::Trial diverged = Trial(103, 2, v1::TRIAL_DIVERGED);
  diverged.mutable_result()->set_diverged_step(37);
  v1::Trial failed = Trial(104, 3, v1::TRIAL_FAILED);
  failed.set_attempts(3);
  failed.set_interruptions(2);
  failed.mutable_result()->set_error(std::string(70, 'e'));
  EXPECT_EQ(RenderSweepDetail(Sweep(), {ok, running, diverged, failed}),
            "sweep 7 \"ln-warmup-a-name-longer-than-28-characters\": running, 12 trials (3 pending, 2 running, 4 "
            "succeeded, 2 diverged, 1 failed, 0 cancelled)\n"
            "created 2026-12-01T08:10:49Z\n"
            "\n"
            "trial    idx   place    warmup   peak_lr   seed  variant              state      attempts interr step   "
            "val_loss   unigram  failure  note\n"
            "101      0     pre      400      1e-03     2                          succeeded  1        0      100    "
            "2.3457              -        \n"
            "102      1     pre      400      1e-03     2     layers=12,optimizer= running    1        0      100    "
            "(3.5000)                     \n"
            "103      2     pre      400      1e-03     2                          diverged   1        0      100    "
            "                    diverged diverged at step 37\n"
            "104      3     pre      400      1e-03     2                          failed     1        2      100    "
            "                             " +
                std::string(60, 'e') + "\n");
}

TEST(SweepTablesTest, SweepDetailFitsEveryPlacementAndShowsTheSchemeAxes) {
  std::vector<v1::Trial> trials;
  int index = 0;
  for (const char* placement : {"post", "pre", "peri", "deepnorm", "mix"}) {
    v1::Trial t = Trial(200 + index, index, v1::TRIAL_PENDING);
    t.mutable_config()->set_placement(placement);
    t.set_variant("qk_norm=true,norm=rmsnorm");
    trials.push_back(t);
    ++index;
  }
  const std::string out = RenderSweepDetail(Sweep(), trials);
  EXPECT_THAT(out, HasSubstr("\n203      3     deepnorm 400      1e-03     2     qk_norm=true,norm=rm pending "));
  EXPECT_THAT(out, HasSubstr("\n202      2     peri     400      1e-03     2     qk_norm=true,norm=rm pending "));
  EXPECT_THAT(out, HasSubstr("\n204      4     mix      400 "));
}

TEST(SweepTablesTest, TrialDetailSaysTheNormSettingsThatAreNotDefaults) {
  v1::GetTrialResponse r;
  *r.mutable_trial() = Trial(101, 0, v1::TRIAL_SUCCEEDED);
  v1::TrainConfig* c = r.mutable_trial()->mutable_config();
  // A resolved config says the defaults; the header leaves them out.
  c->set_norm("layernorm");
  c->set_qk_norm(false);
  c->set_z_loss(0);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("trial 101 of sweep 7: succeeded, placement pre, warmup 400, "
                                              "peak_lr 1e-03, seed 2\n"));
  c->set_placement("mix");
  c->set_mix_post_fraction(0.25);
  c->set_norm("rmsnorm");
  c->set_qk_norm(true);
  c->set_z_loss(1e-4);
  // Each setting once: the variant's qk_norm=true is the qk_norm already said.
  r.mutable_trial()->set_variant("qk_norm=true");
  EXPECT_THAT(RenderTrialDetail(r),
              HasSubstr("trial 101 of sweep 7: succeeded, placement mix, mix_post_fraction 0.25, rmsnorm, qk_norm, "
                        "z_loss 0.0001, warmup 400, peak_lr 1e-03, seed 2\n"));
  // The rest of the variant stays: other fields, and a switch at its default
  // (not said by the settings); a value with a comma stays whole.
  r.mutable_trial()->set_variant("layers=12,norm=rmsnorm,data_file=/d/a,b.txt,mix_post_fraction=0.25,z_loss=0.0001");
  c->set_qk_norm(false);
  EXPECT_THAT(RenderTrialDetail(r),
              HasSubstr(", placement mix, mix_post_fraction 0.25, rmsnorm, z_loss 0.0001, warmup 400, peak_lr 1e-03, "
                        "seed 2, layers=12, data_file=/d/a,b.txt\n"));
  r.mutable_trial()->set_variant("qk_norm=false");
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr(", seed 2, qk_norm=false\n"));
}

TEST(SweepTablesTest, TrialDetail) {
  v1::GetTrialResponse r;
  *r.mutable_trial() = Trial(101, 0, v1::TRIAL_SUCCEEDED);
  v1::MetricPoint* p = r.add_metrics();
  p->set_step(1);
  p->set_lr(2.5e-6);
  p->set_train_loss(5.54321);
  p->set_grad_norm(1.25);
  p->set_tokens_per_s(12345.6);
  v1::MetricPoint* e = r.add_metrics();
  e->set_step(100);
  e->set_val_loss(2.5);
  v1::LayerGradNorms* g = r.add_layer_grad_norms();
  g->set_step(0);
  v1::LayerGradNorm* n = g->add_norms();
  n->set_layer(0);
  n->set_matrix("ffn.fc1");
  n->set_norm(0.5);
  n = g->add_norms();
  n->set_layer(1);
  n->set_matrix("ffn.fc2");
  n->set_norm(1.0 / 3);
  // SUCCEEDED without a final loss: by the rule (proto/schema/failure.h) it
  // failed to train.
  EXPECT_EQ(RenderTrialDetail(r),
            "trial 101 of sweep 7: succeeded, placement pre, warmup 400, peak_lr 1e-03, seed 2\n"
            "failure: no finite loss\n"
            "step    lr         train_loss  val_loss    grad_norm  tokens/s  \n"
            "1       2.500e-06  5.5432                  1.2500     12346     \n"
            "100                            2.5000                           \n"
            "\n"
            "FFN gradient norms at step 0: L0.ffn.fc1=0.5000 L1.ffn.fc2=0.3333\n");
  r.mutable_trial()->set_variant("layers=12");
  v1::TrialAttempt* a = r.add_attempts();
  a->set_attempt(1);
  a->set_outcome(v1::TRIAL_SUCCEEDED);
  const std::string with = RenderTrialDetail(r);
  EXPECT_THAT(with, HasSubstr("seed 2, layers=12\n"));
  EXPECT_THAT(with, HasSubstr("L1.ffn.fc2=0.3333\n\nattempt  worker  ended"));
  EXPECT_THAT(with, Not(HasSubstr("interruptions")));  // one lease: nothing to say

  // Four leases: two interruptions by their causes, one failure of its own.
  r.mutable_trial()->set_attempts(4);
  r.mutable_trial()->set_interruptions(2);
  r.clear_attempts();
  for (const char* cause : {"worker_lost", "", "lease_lost"}) {
    v1::TrialAttempt* ended = r.add_attempts();
    ended->set_attempt(r.attempts_size());
    ended->set_outcome(v1::TRIAL_PENDING);
    ended->set_interruption(cause);
  }
  EXPECT_THAT(RenderTrialDetail(r),
              HasSubstr("seed 2, layers=12\nattempts 2 (the trial's own, counted against max_attempts), "
                        "interruptions 2 (worker_lost 1, lease_lost 1)\n"));
}

// A run of thousands of steps: --every N keeps the steps divisible by N and
// the last, --tail N the last N of those, and a line says what was left out.
TEST(SweepTablesTest, TrialDetailEveryAndTail) {
  v1::GetTrialResponse r;
  *r.mutable_trial() = Trial(101, 0, v1::TRIAL_RUNNING);
  for (int step = 0; step <= 2501; ++step) {
    v1::MetricPoint* p = r.add_metrics();
    p->set_step(step);
    p->set_train_loss(step);
  }
  // The step column of each row printed, in order.
  auto steps = [](const std::string& text) {
    std::vector<int> out;
    std::istringstream lines(text.substr(text.find("tokens/s")));
    std::string line;
    std::getline(lines, line);  // the header
    while (std::getline(lines, line) && !line.empty() && std::isdigit(static_cast<unsigned char>(line[0]))) {
      out.push_back(std::stoi(line));
    }
    return out;
  };
  EXPECT_EQ(steps(RenderTrialDetail(r)).size(), 2502u);
  EXPECT_THAT(RenderTrialDetail(r), Not(HasSubstr("metric rows")));  // all of them: nothing to say
  std::string out = RenderTrialDetail(r, std::nullopt, {.every = 1000});
  EXPECT_EQ(steps(out), (std::vector<int>{0, 1000, 2000, 2501}));
  EXPECT_THAT(out, HasSubstr("\n(4 of 2502 metric rows: the steps divisible by 1000 and the last)\n"));
  out = RenderTrialDetail(r, std::nullopt, {.tail = 3});
  EXPECT_EQ(steps(out), (std::vector<int>{2499, 2500, 2501}));
  EXPECT_THAT(out, HasSubstr("(3 of 2502 metric rows: the last 3)\n"));
  out = RenderTrialDetail(r, std::nullopt, {.every = 500, .tail = 2});
  EXPECT_EQ(steps(out), (std::vector<int>{2500, 2501}));
  EXPECT_THAT(out, HasSubstr("(2 of 2502 metric rows: the steps divisible by 500 and the last, then the last 2)\n"));
  // The last step divisible: it is not printed twice.
  r.mutable_metrics()->RemoveLast();
  EXPECT_EQ(steps(RenderTrialDetail(r, std::nullopt, {.every = 500})), (std::vector<int>{0, 500, 1000, 1500, 2000, 2500}));
  // A tail longer than the run: every row, and no line.
  out = RenderTrialDetail(r, std::nullopt, {.tail = 5000});
  EXPECT_EQ(steps(out).size(), 2501u);
  EXPECT_THAT(out, Not(HasSubstr("metric rows")));
}

// Issue 16's figures in `normsweep trial`: l0, log Z beside each point, the
// gradient norms of the first and last steps they were taken at, and the
// per-block table at step 0 and the last evaluation.
TEST(SweepTablesTest, TrialDetailWithInitialLossAndDiagnostics) {
  v1::GetTrialResponse r;
  *r.mutable_trial() = Trial(101, 0, v1::TRIAL_SUCCEEDED);
  for (int step : {0, 10, 20}) {
    v1::MetricPoint* p = r.add_metrics();
    p->set_step(step);
    if (step > 0) p->set_train_loss(5.0 - 0.1 * step);
    p->set_val_loss(step == 0 ? 5.5452 : 4.0);
    p->set_output_log_z(6.25 - step / 10.0);
    v1::LayerGradNorms* g = r.add_layer_grad_norms();
    g->set_step(step);
    v1::LayerGradNorm* n = g->add_norms();
    n->set_layer(0);
    n->set_matrix("ffn.fc1");
    n->set_norm(0.5 + step);
    v1::StepDiagnostics* d = r.add_diagnostics();
    d->set_step(step);
    for (int layer : {0, 1}) {
      v1::LayerDiagnostics* l = d->add_layers();
      l->set_layer(layer);
      l->set_max_attn_logit(2.0 + layer + step);
      if (step > 0) {
        l->set_update_ratio_qkv(0.00123 * (layer + 1));
        l->set_update_ratio_fc2(0.5);
      }
    }
  }
  // While running (no result yet): l0 from the step-0 evaluation.
  r.mutable_trial()->set_state(v1::TRIAL_RUNNING);
  const std::string running = RenderTrialDetail(r);
  EXPECT_THAT(running, HasSubstr("seed 2\nl0 (validation loss at initialisation) 5.5452\n"));
  r.mutable_trial()->set_state(v1::TRIAL_SUCCEEDED);
  r.mutable_trial()->mutable_result()->set_init_val_loss(5.5);
  EXPECT_EQ(RenderTrialDetail(r),
            "trial 101 of sweep 7: succeeded, placement pre, warmup 400, peak_lr 1e-03, seed 2\n"
            "l0 (validation loss at initialisation) 5.5000\n"
            "failure: no finite loss\n"
            "step    lr         train_loss  val_loss    grad_norm  tokens/s   log_z\n"
            "0                              5.5452                            6.2500\n"
            "10                 4.0000      4.0000                            5.2500\n"
            "20                 3.0000      4.0000                            4.2500\n"
            "\n"
            "FFN gradient norms at step 0: L0.ffn.fc1=0.5000\n"
            "\n"
            "(1 evaluation steps in between)\n"
            "\n"
            "FFN gradient norms at step 20: L0.ffn.fc1=20.5000\n"
            "\n"
            "per-block diagnostics at step 0 and at step 20, the last evaluation:\n"
            "block  logit@0     logit@20    upd_qkv    upd_proj   upd_fc1    upd_fc2\n"
            "0      2           22          0.00123                          0.5\n"
            "1      3           23          0.00246                          0.5\n");

  // z_loss > 0: the step's z term beside log Z.
  r.mutable_metrics(1)->set_z_term(1.25e-4);
  EXPECT_THAT(RenderTrialDetail(r),
              HasSubstr("step    lr         train_loss  val_loss    grad_norm  tokens/s   log_z      z_term\n"
                        "0                              5.5452                            6.2500     \n"
                        "10                 4.0000      4.0000                            5.2500     1.250e-04\n"));
  // Only the step-0 evaluation so far: one column of logits.
  r.mutable_diagnostics()->DeleteSubrange(1, 2);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("per-block diagnostics at step 0, the last evaluation:\n"
                                              "block  logit@0     upd_qkv    upd_proj   upd_fc1    upd_fc2\n"
                                              "0      2" + std::string(10 + 1 + 10 + 1 + 10 + 1 + 10 + 1, ' ') + "\n"
                                              "1      3"));
}

// The failure rule (proto/schema/failure.h) in `normsweep show`: the unigram
// loss and the cause, the column as wide as its longest entry.
TEST(SweepTablesTest, SweepDetailShowsTheUnigramLossAndTheFailure) {
  v1::Trial plateau = Trial(301, 0, v1::TRIAL_SUCCEEDED);
  plateau.mutable_result()->set_final_val_loss(3.43);
  plateau.mutable_result()->set_unigram_loss(3.41);
  v1::Trial trained = Trial(302, 1, v1::TRIAL_SUCCEEDED);
  trained.mutable_result()->set_final_val_loss(2.5);
  trained.mutable_result()->set_unigram_loss(3.41);
  v1::Trial diverged = Trial(303, 2, v1::TRIAL_DIVERGED);
  diverged.mutable_result()->set_diverged_step(37);
  v1::Trial above = Trial(304, 3, v1::TRIAL_SUCCEEDED);
  above.mutable_result()->set_final_val_loss(3.2);
  above.mutable_result()->set_unigram_loss(3.41);
  v1::Trial running = Trial(305, 4, v1::TRIAL_RUNNING);
  const std::vector<v1::Trial> trials = {plateau, trained, diverged, above, running};
  std::string out = RenderSweepDetail(Sweep(), trials);
  EXPECT_THAT(out, HasSubstr("val_loss   unigram  failure  note\n"));
  EXPECT_THAT(out, HasSubstr("\n301 "));
  EXPECT_THAT(out, HasSubstr("100    3.4300     3.4100   plateau  \n"));
  EXPECT_THAT(out, HasSubstr("100    2.5000     3.4100   -        \n"));
  EXPECT_THAT(out, HasSubstr("100" + std::string(4 + 11 + 9, ' ') + "diverged diverged at step 37\n"));
  EXPECT_THAT(out, HasSubstr("100    3.2000     3.4100   -        \n"));  // no max_val_loss: trained
  EXPECT_THAT(out, HasSubstr("running    1        0      100" + std::string(4 + 11 + 9 + 9, ' ') + "\n"));
  // A boundary search's max_val_loss: 3.2 is above 3.0; the column widens.
  v1::Sweep boundary = Sweep();
  boundary.mutable_spec()->mutable_boundary_search()->set_max_val_loss(3.0);
  out = RenderSweepDetail(boundary, trials);
  EXPECT_THAT(out, HasSubstr("val_loss   unigram  failure            note\n"));
  EXPECT_THAT(out, HasSubstr("100    3.2000     3.4100   above_max_val_loss \n"));
  EXPECT_THAT(out, HasSubstr("100    3.4300     3.4100   plateau            \n"));
}

// Token roles (issue 25): who submitted and who cancelled the sweep, when known.
TEST(SweepTablesTest, SweepDetailNamesWhoSubmittedAndCancelled) {
  v1::Sweep s = Sweep();
  EXPECT_THAT(RenderSweepDetail(s, {}), Not(HasSubstr("submitted by")));
  s.set_submitted_by("notebook-alice");
  EXPECT_THAT(RenderSweepDetail(s, {}), HasSubstr("\nsubmitted by notebook-alice\n"));
  EXPECT_THAT(RenderSweepDetail(s, {}), Not(HasSubstr("cancelled by")));
  s.set_cancelled_by("ops");
  EXPECT_THAT(RenderSweepDetail(s, {}), HasSubstr("\nsubmitted by notebook-alice\ncancelled by ops\n"));
}

TEST(SweepTablesTest, TrialDetailSaysTheUnigramLossAndWhyItFailed) {
  v1::GetTrialResponse r;
  *r.mutable_trial() = Trial(101, 0, v1::TRIAL_SUCCEEDED);
  v1::TrialResult* result = r.mutable_trial()->mutable_result();
  result->set_init_val_loss(5.5);
  result->set_final_val_loss(3.43);
  result->set_unigram_loss(3.41);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("seed 2\nl0 (validation loss at initialisation) 5.5000\n"
                                              "unigram loss (the plateau) 3.4100\n"
                                              "failure: plateau (final validation loss 3.4300 > unigram loss "
                                              "3.4100 - 0.1)\nstep "));
  // The fall over the last quarter decides between the plateau and a run
  // that has not converged (issue 34).
  result->set_val_loss_progress(0.01);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("unigram loss (the plateau) 3.4100\n"
                                              "val loss progress over the last quarter 0.0100\n"
                                              "failure: plateau (final validation loss 3.4300 > unigram loss "
                                              "3.4100 - 0.1, and it fell only 0.0100 < 0.15 over the last "
                                              "quarter)\n"));
  result->set_val_loss_progress(0.23);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("\nfailure: not converged (still learning): no failure, final "
                                              "validation loss 3.4300 > unigram loss 3.4100 - 0.1 but still "
                                              "falling 0.2300 >= 0.15 over the last quarter; a longer run would "
                                              "tell\n"));
  result->clear_val_loss_progress();
  result->set_final_val_loss(3.2);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("\nfailure: none, it trained\n"));
  EXPECT_THAT(RenderTrialDetail(r, 3.0),
              HasSubstr("\nfailure: above max_val_loss (final validation loss 3.2000 > 3.0000)\n"));
  r.mutable_trial()->set_state(v1::TRIAL_DIVERGED);
  result->clear_final_val_loss();
  result->set_diverged_step(37);
  EXPECT_THAT(RenderTrialDetail(r), HasSubstr("\nfailure: diverged after step 37\n"));
  // Not judged while it runs; the unigram loss only once it is reported.
  r.mutable_trial()->set_state(v1::TRIAL_RUNNING);
  result->clear_unigram_loss();
  EXPECT_THAT(RenderTrialDetail(r), Not(HasSubstr("failure:")));
  EXPECT_THAT(RenderTrialDetail(r), Not(HasSubstr("unigram")));
}

}  // namespace
}  // namespace normsweep::client
