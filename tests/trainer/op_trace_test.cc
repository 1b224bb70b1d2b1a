// The block program (trainer/program/block_program.h) run through an Ops
// that records each call (the op, its buffers by name, shapes and scale
// factors) instead of computing, for every placement and switch: the only
// coverage the CUDA backend's control flow has without a GPU, since both
// backends run this program. Each scheme's trace is committed under
// tests/trainer/op_traces/; a change to the program shows as a diff there.
// NORMSWEEP_UPDATE_OP_TRACES=1 rewrites the files instead of comparing.
//
// Beside the text, the recorder checks the data flow: every buffer an op
// reads was written earlier in the pass (the forward's activations count
// in the backward), an accumulating write (+=) lands on a buffer already
// written, and after the backward pass every parameter has its gradient.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/settings/config.h"
#include "trainer/param_layout.h"
#include "trainer/program/activations.h"
#include "trainer/program/block_program.h"
#include "trainer/program/ops.h"

namespace normsweep::trainer {
namespace {

// Names every pointer the program can pass: activation buffers by their
// plan names, weights and their gradients by tensor name (w: and g:).
class Namer {
 public:
  Namer(const BufferPlan& plan, const ParamLayout& layout, const float* params, const float* grads,
        const float* sin_pos)
      : sin_pos_(sin_pos) {
    for (const PlannedBuffer& b : plan) ranges_[*b.ptr] = {b.floats, b.name};
    for (const TensorSpec& t : layout.tensors()) {
      ranges_[params + t.offset] = {t.size, "w:" + t.name};
      ranges_[grads + t.offset] = {t.size, "g:" + t.name};
    }
  }

  // The buffer's name, "+k" when p is k floats into it, "-" for null.
  std::string Name(const float* p) const {
    if (p == nullptr) return "-";
    if (p == sin_pos_) return "sin_pos";
    auto it = ranges_.upper_bound(p);
    if (it == ranges_.begin()) return "?";
    --it;
    const size_t off = static_cast<size_t>(p - it->first);
    if (off >= it->second.floats) return "?";
    return off == 0 ? it->second.name : it->second.name + "+" + std::to_string(off);
  }
  // The whole buffer's name (data flow is tracked per buffer).
  std::string Buffer(const float* p) const {
    const std::string n = Name(p);
    const size_t plus = n.find('+');
    return plus == std::string::npos ? n : n.substr(0, plus);
  }

 private:
  struct Range {
    size_t floats;
    std::string name;
  };
  std::map<const float*, Range> ranges_;
  const float* sin_pos_;
};

class TraceOps final : public Ops {
 public:
  explicit TraceOps(const Namer& namer) : n_(namer) {}

  const std::vector<std::string>& lines() const { return lines_; }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::set<std::string>& written() const { return written_; }
  void Section(const std::string& title) { lines_.push_back("# " + title); }

  void Embed(float* out, const float* tok_emb, const float* pos, int B, int T, int C, float scale) override {
    Read(tok_emb);
    Read(pos);
    Set(out);
    Line("Embed", "out=" + N(out) + " tok_emb=" + N(tok_emb) + " pos=" + N(pos) + Dims({{"B", B}, {"T", T}, {"C", C}}) +
                      " scale=" + F(scale));
  }
  void EmbedBackward(float* dtok_emb, float* dpos, const float* dout, int B, int T, int C, float scale) override {
    Read(dout);
    Set(dtok_emb);
    if (dpos != nullptr) Set(dpos);
    Line("EmbedBackward", "dtok_emb=" + N(dtok_emb) + " dpos=" + N(dpos) + " dout=" + N(dout) +
                              Dims({{"B", B}, {"T", T}, {"C", C}}) + " scale=" + F(scale));
  }
  void Matmul(float* out, const float* inp, const float* w, const float* b, int Nr, int I, int O) override {
    Read(inp);
    Read(w);
    Read(b);
    Set(out);
    Line("Matmul", "out=" + N(out) + " inp=" + N(inp) + " w=" + N(w) + " b=" + N(b) +
                       Dims({{"N", Nr}, {"I", I}, {"O", O}}));
  }
  void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w, int Nr,
                      int I, int O, bool accumulate) override {
    Read(dout);
    Read(inp);
    Read(w);
    if (dinp != nullptr) accumulate ? Accumulate(dinp) : Set(dinp);
    Set(dw);
    if (db != nullptr) Set(db);
    Line("MatmulBackward", "dinp" + std::string(accumulate ? "+=" : "=") + N(dinp) + " dw=" + N(dw) + " db=" + N(db) +
                               " dout=" + N(dout) + " inp=" + N(inp) + " w=" + N(w) +
                               Dims({{"N", Nr}, {"I", I}, {"O", O}}));
  }
  void Norm(NormShape s, float* out, NormStats stats, const float* inp, NormWeights w) override {
    Read(inp);
    Read(w.w);
    Read(w.b);
    Set(out);
    if (s.kind == NormKind::kLayerNorm) Set(stats.mean);
    Set(stats.rstd);
    Line("Norm", Kind(s.kind) + " out=" + N(out) + Stats(s.kind, stats) + " inp=" + N(inp) + Weights(w) +
                     Dims({{"rows", s.rows}, {"width", s.width}}));
  }
  void NormBackward(NormShape s, float* dinp, NormGrads g, const float* dout, const float* inp, NormWeights w,
                    NormStats stats) override {
    Read(dout);
    Read(inp);
    Read(w.w);
    if (s.kind == NormKind::kLayerNorm) Read(stats.mean);
    Read(stats.rstd);
    Accumulate(dinp);
    Set(g.dw);
    if (s.kind == NormKind::kLayerNorm) Set(g.db);
    Line("NormBackward", Kind(s.kind) + " dinp+=" + N(dinp) + " dw=" + N(g.dw) + " db=" + N(g.db) + " dout=" +
                             N(dout) + " inp=" + N(inp) + Weights(w) + Stats(s.kind, stats) +
                             Dims({{"rows", s.rows}, {"width", s.width}}));
  }
  void QkNorm(const QkNormArgs& a) override {
    Read(a.qkv);
    Read(a.qw.w);
    Read(a.kw.w);
    Read(a.qw.b);
    Read(a.kw.b);
    Set(a.q_raw);
    Set(a.k_raw);
    if (a.kind == NormKind::kLayerNorm) {
      Set(a.q.mean);
      Set(a.k.mean);
    }
    Set(a.q.rstd);
    Set(a.k.rstd);
    Line("QkNorm", Kind(a.kind) + " qkv=" + N(a.qkv) + " q_raw=" + N(a.q_raw) + " k_raw=" + N(a.k_raw) + " q" +
                       Stats(a.kind, a.q) + " k" + Stats(a.kind, a.k) + " q" + Weights(a.qw) + " k" + Weights(a.kw) +
                       " scratch=" + N(a.scratch) + "," + N(a.scratch2) + Dims({{"N", a.N}, {"C", a.C}, {"H", a.H}}));
  }
  void QkNormBackward(const QkNormArgs& a, float* dqkv, NormGrads gq, NormGrads gk) override {
    Read(dqkv);
    Read(a.q_raw);
    Read(a.k_raw);
    Read(a.qw.w);
    Read(a.kw.w);
    Set(gq.dw);
    Set(gk.dw);
    if (a.kind == NormKind::kLayerNorm) {
      Set(gq.db);
      Set(gk.db);
    }
    Line("QkNormBackward", Kind(a.kind) + " dqkv=" + N(dqkv) + " q_dw=" + N(gq.dw) + " q_db=" + N(gq.db) +
                               " k_dw=" + N(gk.dw) + " k_db=" + N(gk.db) + " q_raw=" + N(a.q_raw) + " k_raw=" +
                               N(a.k_raw) + " scratch=" + N(a.scratch) + "," + N(a.scratch2) +
                               Dims({{"N", a.N}, {"C", a.C}, {"H", a.H}}));
  }
  void Attention(int layer, float* out, float* att, const float* qkv, int B, int T, int C, int H) override {
    Read(qkv);
    Set(out);
    Set(att);
    Line("Attention", "layer=" + std::to_string(layer) + " out=" + N(out) + " att=" + N(att) + " qkv=" + N(qkv) +
                          Dims({{"B", B}, {"T", T}, {"C", C}, {"H", H}}));
  }
  void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T, int C,
                         int H) override {
    Read(dout);
    Read(qkv);
    Read(att);
    Set(dqkv);
    Line("AttentionBackward", "dqkv=" + N(dqkv) + " dout=" + N(dout) + " qkv=" + N(qkv) + " att=" + N(att) +
                                  Dims({{"B", B}, {"T", T}, {"C", C}, {"H", H}}));
  }
  void Relu(float* x, size_t n) override {
    Read(x);
    Line("Relu", "x=" + N(x) + " n=" + std::to_string(n));
  }
  void ReluBackward(float* dx, const float* dy, const float* act, size_t n) override {
    Read(dy);
    Read(act);
    Set(dx);
    Line("ReluBackward", "dx=" + N(dx) + " dy=" + N(dy) + " act=" + N(act) + " n=" + std::to_string(n));
  }
  void Residual(float* out, float a, const float* x, float b, const float* s, size_t n) override {
    Read(x);
    Read(s);
    Set(out);
    Line("Residual", "out=" + N(out) + " a=" + F(a) + " x=" + N(x) + " b=" + F(b) + " s=" + N(s) +
                         " n=" + std::to_string(n));
  }
  void Scale(float* x, float a, size_t n) override {
    Read(x);
    Line("Scale", "x=" + N(x) + " a=" + F(a) + " n=" + std::to_string(n));
  }
  void Zero(float* x, size_t n) override {
    Set(x);
    Line("Zero", "x=" + N(x) + " n=" + std::to_string(n));
  }
  void Multiply(float* out, const float* x, const float* y, size_t n) override {
    Read(x);
    Read(y);
    Set(out);
    Line("Multiply", "out=" + N(out) + " x=" + N(x) + " y=" + N(y) + " n=" + std::to_string(n));
  }
  void Dropout(float* x, float* mask, size_t n, float p, uint64_t stream) override {
    Read(x);
    Set(mask);
    Line("Dropout", "x=" + N(x) + " mask=" + N(mask) + " n=" + std::to_string(n) + " p=" + F(p) +
                        " stream=" + std::to_string(stream));
  }
  void CrossEntropy(float* probs, float* row_loss, float* row_log_z, const float* logits, int Nr, int V) override {
    Read(logits);
    Set(probs);
    Set(row_loss);
    Set(row_log_z);
    Line("CrossEntropy", "probs=" + N(probs) + " row_loss=" + N(row_loss) + " row_log_z=" + N(row_log_z) +
                             " logits=" + N(logits) + Dims({{"N", Nr}, {"V", V}}));
  }
  void CrossEntropyBackward(float* dlogits, const float* probs, int Nr, int V) override {
    Read(probs);
    Set(dlogits);
    Line("CrossEntropyBackward", "dlogits=" + N(dlogits) + " probs=" + N(probs) + Dims({{"N", Nr}, {"V", V}}));
  }
  void CrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z, int Nr, int V,
                                 float z_loss) override {
    Read(probs);
    Read(row_log_z);
    Set(dlogits);
    Line("CrossEntropyZLossBackward", "dlogits=" + N(dlogits) + " probs=" + N(probs) + " row_log_z=" +
                                          N(row_log_z) + Dims({{"N", Nr}, {"V", V}}) + " z_loss=" + F(z_loss));
  }

 private:
  std::string N(const float* p) const { return n_.Name(p); }
  static std::string F(float v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }
  static std::string Kind(NormKind k) { return k == NormKind::kRmsNorm ? "rmsnorm" : "layernorm"; }
  static std::string Dims(std::initializer_list<std::pair<const char*, int>> dims) {
    std::string s;
    for (const auto& [name, v] : dims) s += std::string(" ") + name + "=" + std::to_string(v);
    return s;
  }
  std::string Stats(NormKind k, NormStats s) const {
    return k == NormKind::kRmsNorm ? " rstd=" + N(s.rstd) : " mean,rstd=" + N(s.mean) + "," + N(s.rstd);
  }
  std::string Weights(NormWeights w) const { return " w=" + N(w.w) + (w.b ? " b=" + N(w.b) : ""); }
  void Line(const char* op, const std::string& args) { lines_.push_back(std::string(op) + " " + args); }
  void Read(const float* p) {
    if (p == nullptr) return;
    const std::string b = n_.Buffer(p);
    if (b == "?") errors_.push_back(Where() + "reads an unknown pointer");
    if (b.rfind("w:", 0) == 0 || b == "sin_pos") return;
    if (!written_.count(b)) errors_.push_back(Where() + "reads " + b + " before it is written");
  }
  void Set(const float* p) {
    const std::string b = n_.Buffer(p);
    if (p == nullptr || b == "?" || b.rfind("w:", 0) == 0 || b == "sin_pos") {
      errors_.push_back(Where() + "writes " + (p ? b : std::string("null")));
      return;
    }
    written_.insert(b);
  }
  void Accumulate(const float* p) {
    const std::string b = n_.Buffer(p);
    if (!written_.count(b)) errors_.push_back(Where() + "accumulates into " + b + " before it is written");
  }
  std::string Where() const { return "op " + std::to_string(lines_.size()) + ": "; }

  const Namer& n_;
  std::vector<std::string> lines_, errors_;
  std::set<std::string> written_;
};

struct Scheme {
  std::string name;
  ModelConfig model;
  double z_loss = 0.0;
};

// A small model (2 blocks, d_model 8, 2 heads, d_ff 16, 4 positions) for
// every placement, alone and with each switch; Mix-LN with its first block
// Post-LN and its second Pre-LN.
std::vector<Scheme> Schemes() {
  std::vector<Scheme> out;
  const std::pair<const char*, Placement> placements[] = {{"post", Placement::kPostLN},
                                                          {"pre", Placement::kPreLN},
                                                          {"peri", Placement::kPeriLN},
                                                          {"deepnorm", Placement::kDeepNorm},
                                                          {"mix", Placement::kMix}};
  for (const auto& [pname, placement] : placements) {
    const ModelConfig base{.placement = placement, .layers = 2, .d_model = 8, .heads = 2, .d_ff = 16, .seq_len = 4,
                           .mix_post_fraction = 0.5};
    const std::string p = pname;
    out.push_back({p, base});
    Scheme s{p + "_qk_norm", base};
    s.model.qk_norm = true;
    out.push_back(s);
    s = {p + "_rmsnorm", base};
    s.model.norm = NormKind::kRmsNorm;
    out.push_back(s);
    s = {p + "_z_loss", base, 1e-4};
    out.push_back(s);
    s = {p + "_dropout", base};
    s.model.dropout = 0.1f;
    out.push_back(s);
    s = {p + "_learned_positions", base};
    s.model.positions = Positions::kLearned;
    out.push_back(s);
    s = {p + "_all_switches", base, 1e-4};
    s.model.qk_norm = true;
    s.model.norm = NormKind::kRmsNorm;
    s.model.dropout = 0.1f;
    s.model.positions = Positions::kLearned;
    out.push_back(s);
  }
  return out;
}

struct Trace {
  std::vector<std::string> lines;
  std::vector<std::string> errors;
};

Trace Record(const Scheme& scheme) {
  const ModelConfig& m = scheme.model;
  const ParamLayout layout = ParamLayout::ForModel(m);
  const int B = 2;
  Activations acts;
  BufferPlan plan;
  PlanActivations(m, layout, B, &acts, &plan);
  std::vector<float> arena(ArenaFloats(plan, 1)), params(layout.total()), grads(layout.total());
  std::vector<float> sin_pos(static_cast<size_t>(m.seq_len) * m.d_model);
  AssignArena(plan, arena.data(), 1);
  const Namer namer(plan, layout, params.data(), grads.data(), sin_pos.data());
  TraceOps ops(namer);
  PassArgs args;
  args.B = B;
  args.T = m.seq_len;
  args.params = params.data();
  args.grads = grads.data();
  args.sin_pos = sin_pos.data();
  args.training = true;
  args.z_loss = scheme.z_loss;
  ops.Section("forward (training)");
  ForwardPass(m, layout, ops, acts, args);
  ops.Section("backward");
  BackwardPass(m, layout, ops, acts, args);
  Trace t{ops.lines(), ops.errors()};
  for (const TensorSpec& spec : layout.tensors()) {
    if (!ops.written().count("g:" + spec.name)) t.errors.push_back("no gradient for " + spec.name);
  }
  if (m.dropout > 0.0f) {
    TraceOps eval(namer);
    args.training = false;
    eval.Section("forward (evaluation)");
    ForwardPass(m, layout, eval, acts, args);
    t.lines.insert(t.lines.end(), eval.lines().begin(), eval.lines().end());
    t.errors.insert(t.errors.end(), eval.errors().begin(), eval.errors().end());
  }
  return t;
}

std::string TracePath(const std::string& name) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/trainer/op_traces/" + name + ".txt";
}

std::string Join(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

class OpTraceTest : public ::testing::TestWithParam<Scheme> {};

TEST_P(OpTraceTest, MatchesTheCommittedTrace) {
  const Scheme& scheme = GetParam();
  const Trace trace = Record(scheme);
  EXPECT_TRUE(trace.errors.empty()) << Join(trace.errors);
  const std::string text = Join(trace.lines);
  const std::string path = TracePath(scheme.name);
  const char* update = std::getenv("NORMSWEEP_UPDATE_OP_TRACES");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing: run with NORMSWEEP_UPDATE_OP_TRACES=1 to write it";
  std::stringstream want;
  want << in.rdbuf();
  if (want.str() == text) return;
  // Name the first line that differs.
  std::vector<std::string> want_lines;
  for (std::string l; std::getline(want, l);) want_lines.push_back(l);
  std::stringstream().swap(want);
  size_t i = 0;
  while (i < trace.lines.size() && i < want_lines.size() && trace.lines[i] == want_lines[i]) ++i;
  FAIL() << path << ": line " << i + 1 << " differs\n  committed: "
         << (i < want_lines.size() ? want_lines[i] : "(end)") << "\n  recorded:  "
         << (i < trace.lines.size() ? trace.lines[i] : "(end)")
         << "\n(NORMSWEEP_UPDATE_OP_TRACES=1 rewrites the traces after a deliberate change)";
}

INSTANTIATE_TEST_SUITE_P(Schemes, OpTraceTest, ::testing::ValuesIn(Schemes()),
                         [](const ::testing::TestParamInfo<Scheme>& info) { return info.param.name; });

// The recorder's own checks fire: a program that read before writing, or
// dropped a gradient, would be caught.
TEST(OpTraceRecorderTest, CatchesReadsBeforeWritesAndMissingGradients) {
  ModelConfig m;
  m.layers = 1;
  m.d_model = 8;
  m.heads = 2;
  m.d_ff = 16;
  m.seq_len = 4;
  const ParamLayout layout = ParamLayout::ForModel(m);
  Activations acts;
  BufferPlan plan;
  PlanActivations(m, layout, 1, &acts, &plan);
  std::vector<float> arena(ArenaFloats(plan, 1)), params(layout.total()), grads(layout.total());
  AssignArena(plan, arena.data(), 1);
  const Namer namer(plan, layout, params.data(), grads.data(), nullptr);
  TraceOps ops(namer);
  ops.Relu(acts.blocks[0].fc1_act, 4);
  ops.NormBackward({NormKind::kLayerNorm, 4, 8}, acts.grad_res_a, {grads.data(), nullptr}, acts.grad_res_b,
                   acts.emb_out, {params.data(), nullptr}, {acts.lnf_mean, acts.lnf_rstd});
  ASSERT_GE(ops.errors().size(), 3u);
  EXPECT_NE(ops.errors()[0].find("reads blocks.0.fc1_act before it is written"), std::string::npos);
  EXPECT_EQ(namer.Name(acts.blocks[0].qkv + 3), "blocks.0.qkv+3");
  EXPECT_EQ(namer.Name(params.data() + layout.head_w()), "w:head.weight");
}

}  // namespace
}  // namespace normsweep::trainer
