#include "trainer/probes.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "common/quote.h"
#include "trainer/backend.h"
#include "trainer/cpu/ops.h"
#include "trainer/data.h"
#include "trainer/param_layout.h"
#include "trainer/rng.h"
#include "trainer/settings/schemes.h"

namespace normsweep::trainer {
namespace {

constexpr float kEps = 1e-5f;

MeanStd Summarise(const std::vector<double>& xs) {
  MeanStd m;
  if (xs.empty()) return m;
  for (double x : xs) m.mean += x;
  m.mean /= xs.size();
  if (xs.size() > 1) {
    double var = 0;
    for (double x : xs) var += (x - m.mean) * (x - m.mean);
    m.std = std::sqrt(var / (xs.size() - 1));
  }
  return m;
}

// A d x d Xavier-uniform matrix, stored (out, in) as the ops expect.
std::vector<float> Xavier(int d, Rng& rng) {
  const double a = std::sqrt(6.0 / (2.0 * d));
  std::vector<float> w(static_cast<size_t>(d) * d);
  for (float& x : w) x = static_cast<float>(rng.Uniform(-a, a));
  return w;
}

// Mean over tokens of ||row||^2 / d.
double MeanSquaredNorm(const std::vector<float>& x, int n, int d) {
  double s = 0;
  for (float v : x) s += static_cast<double>(v) * v;
  return s / n / d;
}

// The simplified layer's weights: attention value and output projections and
// the two FFN matrices, all d x d.
struct SimpleLayer {
  std::vector<float> wv, wo, w1, w2;
};

class SimpleStack {
 public:
  SimpleStack(int d, int n, int layers, Rng& rng) : d_(d), n_(n) {
    for (int l = 0; l < layers; ++l) layers_.push_back({Xavier(d, rng), Xavier(d, rng), Xavier(d, rng), Xavier(d, rng)});
    ones_.assign(static_cast<size_t>(d), 1.0f);
    zeros_.assign(static_cast<size_t>(d), 0.0f);
  }

  // W_Q = W_K = 0: every token attends uniformly to all n tokens, so the
  // attention output is mean_j(x_j) W_V W_O for every token.
  std::vector<float> Attention(const std::vector<float>& x, const SimpleLayer& l) const {
    std::vector<float> v(x.size()), o(x.size()), mean(static_cast<size_t>(n_) * d_, 0.0f);
    cpu::MatmulForward(v.data(), x.data(), l.wv.data(), nullptr, n_, d_, d_);
    for (int j = 0; j < n_; ++j) {
      for (int c = 0; c < d_; ++c) mean[c] += v[static_cast<size_t>(j) * d_ + c] / n_;
    }
    for (int j = 1; j < n_; ++j) std::copy(mean.begin(), mean.begin() + d_, mean.begin() + static_cast<long>(j) * d_);
    cpu::MatmulForward(o.data(), mean.data(), l.wo.data(), nullptr, n_, d_, d_);
    return o;
  }
  std::vector<float> Ffn(const std::vector<float>& x, const SimpleLayer& l) const {
    std::vector<float> h(x.size()), o(x.size());
    cpu::MatmulForward(h.data(), x.data(), l.w1.data(), nullptr, n_, d_, d_);
    cpu::ReluForward(h.data(), h.size());
    cpu::MatmulForward(o.data(), h.data(), l.w2.data(), nullptr, n_, d_, d_);
    return o;
  }
  std::vector<float> Ln(const std::vector<float>& x) const {
    std::vector<float> y(x.size()), mean(static_cast<size_t>(n_)), rstd(static_cast<size_t>(n_));
    cpu::LayerNormForward(y.data(), mean.data(), rstd.data(), x.data(), ones_.data(), zeros_.data(), n_, d_, kEps);
    return y;
  }

  const std::vector<SimpleLayer>& layers() const { return layers_; }

 private:
  int d_, n_;
  std::vector<SimpleLayer> layers_;
  std::vector<float> ones_, zeros_;
};

// out = alpha a + b (the trainer's Residual: DeepNorm's alpha, else 1).
std::vector<float> Residual(const std::vector<float>& a, const std::vector<float>& b, float alpha) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = alpha == 1.0f ? a[i] + b[i] : alpha * a[i] + b[i];
  return out;
}

void Scale(std::vector<float>& x, float s) {
  if (s == 1.0f) return;
  for (float& v : x) v *= s;
}

// One simplified block of placement `kind` as CpuBackend::BlockForward writes
// it: Pre-LN and Peri-LN normalise each sublayer's input, Post-LN and DeepNorm
// the residual sum, Peri-LN also each sublayer's output. `gain` multiplies
// W_V, W_O, W1 and W2 (DeepNorm's beta times the weight scale); the sublayers
// are products of two of them with ReLU between, so their outputs scale as
// gain^2. Returns the block's output; *sum_norm is ||x^{post,5}||^2/d, the
// last residual sum's (before its normalisation in Post-LN and DeepNorm).
std::vector<float> SimpleBlock(const SimpleStack& stack, const SimpleLayer& w, Placement kind, float alpha,
                               float gain, std::vector<float> x, int n, int d, double* sum_norm) {
  const BlockNorms& norms = SchemeOf(kind).block;
  const bool norm_in = norms.sublayer_input;
  const bool peri = norms.sublayer_output;
  std::vector<float> s1 = stack.Attention(norm_in ? stack.Ln(x) : x, w);
  Scale(s1, gain * gain);
  if (peri) s1 = stack.Ln(s1);
  std::vector<float> x1 = Residual(x, s1, alpha);
  if (!norm_in) x1 = stack.Ln(x1);
  std::vector<float> s2 = stack.Ffn(norm_in ? stack.Ln(x1) : x1, w);
  Scale(s2, gain * gain);
  if (peri) s2 = stack.Ln(s2);
  std::vector<float> x2 = Residual(x1, s2, alpha);
  *sum_norm = MeanSquaredNorm(x2, n, d);
  return norm_in ? x2 : stack.Ln(x2);
}

// How many blocks from the first are Post-LN (kMix; 0 for Pre-LN).
int MixPostBlocks(const ModelConfig& m) {
  int n = 0;
  while (n < m.layers && m.BlockPlacement(n) == Placement::kPostLN) ++n;
  return n;
}

// The mean-field expectation of the tracked ||.||^2/d after layer l (1-based)
// of model m; s4 = weight_scale^4. A sublayer's output F(y) with ||y||^2 = d
// adds s4/2 (the FFN: ReLU keeps half) or between 0 and s4 (attention: the
// mean over tokens of normalised rows) per Pre-LN layer; a normalised
// sublayer output adds exactly 1 (Peri-LN, plus 1 for ln_emb's output).
std::pair<double, double> HiddenNormTheory(const ModelConfig& m, int l, double s4) {
  switch (m.placement) {
    case Placement::kPostLN:
    case Placement::kDeepNorm: {
      const double alpha = m.ResidualAlpha(), beta = m.DeepNormBeta();
      const double v = alpha * alpha + s4 * std::pow(beta, 4) / 2;
      return {v, v};
    }
    case Placement::kPeriLN:
      return {1.0 + 2.0 * l, 1.0 + 2.0 * l};
    case Placement::kPreLN:
    case Placement::kMix: {
      const int pre_layers = std::max(0, l - MixPostBlocks(m));
      return {1.0 + s4 * pre_layers / 2.0, 1.0 + 3.0 * s4 * pre_layers / 2.0};
    }
  }
  return {0, 0};
}

}  // namespace

const char* PlacementTitle(Placement p) { return SchemeOf(p).title; }

StatusOr<std::vector<Placement>> ParsePlacementList(const std::string& list) {
  std::vector<Placement> out;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    StatusOr<Placement> p = ParsePlacement(name);
    if (!p.ok()) {
      return InvalidArgument("--placements: unknown placement " + normsweep::QuoteForError(name) +
                             " (expected a comma-separated list of " + SchemeNames(", ", ", ") + ")");
    }
    out.push_back(*p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

StatusOr<std::vector<HiddenNormsRow>> ProbeHiddenNorms(const HiddenNormsOptions& o) {
  if (o.d < 2 || o.tokens < 1 || o.layers < 1 || o.draws < 1) {
    return InvalidArgument("hidden-norms: d, tokens, layers and draws must be positive");
  }
  if (!(o.weight_scale > 0) || !std::isfinite(o.weight_scale)) {
    return InvalidArgument("hidden-norms: weight scale must be a positive number");
  }
  if (o.placements.empty()) return InvalidArgument("hidden-norms: no placement given");
  for (int l : o.report_layers) {
    if (l < 1 || l > o.layers) return InvalidArgument("hidden-norms: report layer " + std::to_string(l) + " is out of range");
  }
  // The trainer's definitions of each placement at this depth: Mix-LN's
  // blocks, DeepNorm's alpha and beta.
  std::vector<ModelConfig> models;
  for (Placement p : o.placements) {
    ModelConfig m;
    m.placement = p;
    m.layers = o.layers;
    m.mix_post_fraction = o.mix_post_fraction;
    models.push_back(m);
  }
  // [placement][layer][draw]
  std::vector<std::vector<std::vector<double>>> tracked(
      models.size(), std::vector<std::vector<double>>(static_cast<size_t>(o.layers)));
  for (int draw = 0; draw < o.draws; ++draw) {
    Rng rng(MixSeed(o.seed, 0x41dde, static_cast<uint64_t>(draw)));
    SimpleStack stack(o.d, o.tokens, o.layers, rng);
    std::vector<float> x0(static_cast<size_t>(o.tokens) * o.d);
    for (float& v : x0) v = static_cast<float>(rng.Normal());
    for (size_t i = 0; i < models.size(); ++i) {
      const ModelConfig& m = models[i];
      const float alpha = static_cast<float>(m.ResidualAlpha());
      const float gain = static_cast<float>(m.DeepNormBeta() * o.weight_scale);
      // Post-LN and DeepNorm: the pre-normalisation sum; the others (Mix-LN
      // in its Post-LN blocks too): the residual stream, the block's output.
      const bool track_sum = SchemeOf(m.placement).block.after_residual;
      // Peri-LN normalises the embedding too (ln_emb).
      std::vector<float> x = m.HasEmbeddingNorm() ? stack.Ln(x0) : x0;
      for (int l = 0; l < o.layers; ++l) {
        double sum_norm = 0;
        x = SimpleBlock(stack, stack.layers()[static_cast<size_t>(l)], m.BlockPlacement(l), alpha, gain, std::move(x),
                        o.tokens, o.d, &sum_norm);
        tracked[i][static_cast<size_t>(l)].push_back(track_sum ? sum_norm : MeanSquaredNorm(x, o.tokens, o.d));
      }
    }
  }
  const double s4 = std::pow(o.weight_scale, 4);
  std::vector<HiddenNormsRow> rows;
  for (int l : o.report_layers) {
    HiddenNormsRow r;
    r.layer = l;
    for (size_t i = 0; i < models.size(); ++i) {
      r.values.push_back(Summarise(tracked[i][static_cast<size_t>(l - 1)]));
      const auto [lo, hi] = HiddenNormTheory(models[i], l, s4);
      r.lower.push_back(lo);
      r.upper.push_back(hi);
    }
    rows.push_back(r);
  }
  return rows;
}

StatusOr<std::vector<LnJacobianRow>> ProbeLnJacobian(const LnJacobianOptions& o) {
  if (o.d < 2) return InvalidArgument("ln-jacobian: d must be >= 2");
  const int d = o.d;
  Rng rng(MixSeed(o.seed, 0x1ac0b));
  std::vector<float> z(static_cast<size_t>(d));
  for (float& v : z) v = static_cast<float>(rng.Normal());
  const std::vector<float> ones(static_cast<size_t>(d), 1.0f), zeros(static_cast<size_t>(d), 0.0f);
  std::vector<LnJacobianRow> rows;
  for (double k : o.scales) {
    if (!(k > 0) || !std::isfinite(k)) return InvalidArgument("ln-jacobian: scales must be positive");
    std::vector<float> x(z.size());
    double norm2 = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      x[i] = static_cast<float>(k * z[i]);
      norm2 += static_cast<double>(x[i]) * x[i];
    }
    // Row i of the Jacobian is the backward pass of e_i (our LayerNorm kernels).
    std::vector<float> y(static_cast<size_t>(d)), dw(static_cast<size_t>(d)), db(static_cast<size_t>(d));
    float mean, rstd;
    cpu::LayerNormForward(y.data(), &mean, &rstd, x.data(), ones.data(), zeros.data(), 1, d, kEps);
    std::vector<double> jac(static_cast<size_t>(d) * d);
    std::vector<float> e(static_cast<size_t>(d), 0.0f), row(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) {
      e[static_cast<size_t>(i)] = 1.0f;
      std::fill(row.begin(), row.end(), 0.0f);
      cpu::LayerNormBackward(row.data(), dw.data(), db.data(), e.data(), x.data(), ones.data(), &mean, &rstd, 1, d);
      for (int j = 0; j < d; ++j) jac[static_cast<size_t>(i) * d + j] = row[static_cast<size_t>(j)];
      e[static_cast<size_t>(i)] = 0.0f;
    }
    // Spectral norm: power iteration on J^T J.
    std::vector<double> v(static_cast<size_t>(d), 1.0 / std::sqrt(d)), u(static_cast<size_t>(d)), w(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) v[static_cast<size_t>(i)] += 1e-3 * (i % 7);
    double sigma = 0;
    for (int iter = 0; iter < 500; ++iter) {
      for (int i = 0; i < d; ++i) {
        double s = 0;
        for (int j = 0; j < d; ++j) s += jac[static_cast<size_t>(i) * d + j] * v[static_cast<size_t>(j)];
        u[static_cast<size_t>(i)] = s;
      }
      for (int j = 0; j < d; ++j) {
        double s = 0;
        for (int i = 0; i < d; ++i) s += jac[static_cast<size_t>(i) * d + j] * u[static_cast<size_t>(i)];
        w[static_cast<size_t>(j)] = s;
      }
      double n = 0;
      for (double x2 : w) n += x2 * x2;
      n = std::sqrt(n);
      if (n == 0) break;
      for (int j = 0; j < d; ++j) v[static_cast<size_t>(j)] = w[static_cast<size_t>(j)] / n;
      const double next = std::sqrt(n);
      if (std::fabs(next - sigma) < 1e-12 * next) {
        sigma = next;
        break;
      }
      sigma = next;
    }
    rows.push_back({k, sigma, std::sqrt(static_cast<double>(d)) / std::sqrt(norm2)});
  }
  return rows;
}

StatusOr<GradNormsResult> ProbeGradNorms(const GradNormsOptions& o) {
  TRAINER_RETURN_IF_ERROR(ValidateModelConfig(o.model));
  if (o.seeds < 1 || o.batch_size < 1) return InvalidArgument("grad-norms: seeds and batch_size must be positive");
  DataConfig data;
  data.data_file = o.data_file;
  TRAINER_ASSIGN_OR_RETURN(std::unique_ptr<Dataset> dataset, MakeDataset(data, o.model.seq_len, o.batch_size));

  // Gradients at initialization for one model; returns the squared norm of each tensor.
  auto grads_at_init = [&](const ModelConfig& m, uint64_t seed) -> StatusOr<std::vector<double>> {
    BackendOptions bo;
    bo.model = m;
    bo.threads = o.threads;
    bo.max_batch_size = o.batch_size;
    TRAINER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeBackend(bo));
    TRAINER_RETURN_IF_ERROR(backend->SetParameters(InitParameters(backend->layout(), m, seed)));
    // The same real batch for every model and seed.
    StatusOr<LossStats> loss = backend->ForwardBackward(dataset->TrainBatch(0, 1, o.batch_size, m.seq_len), 0);
    if (!loss.ok()) return loss.status();
    return backend->GradientSquaredNorms();
  };

  if (o.placements.empty()) return InvalidArgument("grad-norms: no placement given");
  GradNormsResult r;
  for (Placement p : o.placements) {
    ModelConfig m = o.model;
    m.placement = p;
    m.dropout = 0;
    std::vector<std::vector<double>> w1(static_cast<size_t>(m.layers)), w2(static_cast<size_t>(m.layers));
    const ParamLayout layout = ParamLayout::ForModel(m);
    for (int s = 0; s < o.seeds; ++s) {
      TRAINER_ASSIGN_OR_RETURN(std::vector<double> sq, grads_at_init(m, static_cast<uint64_t>(s)));
      for (int l = 0; l < m.layers; ++l) {
        const BlockOffsets& b = layout.blocks()[static_cast<size_t>(l)];
        w1[static_cast<size_t>(l)].push_back(std::sqrt(sq[static_cast<size_t>(b.fc1_w_index)]));
        w2[static_cast<size_t>(l)].push_back(std::sqrt(sq[static_cast<size_t>(b.fc2_w_index)]));
      }
    }
    std::vector<MeanStd> s1, s2;
    for (int l = 0; l < m.layers; ++l) {
      s1.push_back(Summarise(w1[static_cast<size_t>(l)]));
      s2.push_back(Summarise(w2[static_cast<size_t>(l)]));
    }
    r.w1.push_back(s1);
    r.w2.push_back(s2);

    std::vector<MeanStd> by_depth;
    for (int depth : o.depths) {
      ModelConfig md = m;
      md.layers = depth;
      TRAINER_RETURN_IF_ERROR(ValidateModelConfig(md));
      const ParamLayout ld = ParamLayout::ForModel(md);
      std::vector<double> last;
      for (int s = 0; s < o.seeds; ++s) {
        TRAINER_ASSIGN_OR_RETURN(std::vector<double> sq, grads_at_init(md, static_cast<uint64_t>(s)));
        last.push_back(std::sqrt(sq[static_cast<size_t>(ld.blocks().back().fc2_w_index)]));
      }
      by_depth.push_back(Summarise(last));
    }
    r.last_w2_by_depth.push_back(by_depth);
  }
  return r;
}

namespace {

template <typename... Args>
std::string Format(const char* fmt, Args... args) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string Padded(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string HiddenNormsTable(const HiddenNormsOptions& o, const std::vector<HiddenNormsRow>& rows) {
  constexpr size_t kWidth = 31;
  std::string out = "hidden-state norms at initialization: d=" + std::to_string(o.d) + ", " + std::to_string(o.tokens) +
                    " tokens, " + std::to_string(o.layers) + " layers, mean (std) over " + std::to_string(o.draws) +
                    " draws, [the mean-field expectation]";
  if (o.weight_scale != 1.0) out += ", every weight x " + Format("%g", o.weight_scale);
  out += "\n";
  for (Placement p : o.placements) {
    if (SchemeOf(p).per_block) {
      ModelConfig m;
      m.placement = p;
      m.layers = o.layers;
      m.mix_post_fraction = o.mix_post_fraction;
      out += "Mix-LN: the first " + std::to_string(MixPostBlocks(m)) + " of " + std::to_string(o.layers) +
             " layers Post-LN (mix_post_fraction " + Format("%g", o.mix_post_fraction) + "), then Pre-LN\n";
    }
  }
  out += Padded("layer", 7);
  for (Placement p : o.placements) {
    const bool pre_norm_sum = SchemeOf(p).block.after_residual;
    out += Padded(std::string(PlacementTitle(p)) + (pre_norm_sum ? " |x_post5|^2/d" : " |x_l|^2/d"), kWidth);
  }
  while (out.back() == ' ') out.pop_back();
  out += "\n";
  for (const HiddenNormsRow& r : rows) {
    std::string line = Padded(std::to_string(r.layer), 6);
    for (size_t i = 0; i < r.values.size(); ++i) {
      std::string theory = r.lower[i] == r.upper[i] ? Format("[%.3g]", r.lower[i])
                                                    : Format("[%.3g - %.3g]", r.lower[i], r.upper[i]);
      line += Padded(Format("%7.3f (%5.3f)", r.values[i].mean, r.values[i].std) + "  " + theory, kWidth);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string GradNormsTable(const GradNormsOptions& o, const GradNormsResult& r) {
  constexpr size_t kWidth = 19;
  const ModelConfig& m = o.model;
  std::string out = "FFN weight gradient norms at initialization (Frobenius), " + std::to_string(m.layers) +
                    " layers, d_model " + std::to_string(m.d_model) + ", d_ff " + std::to_string(m.d_ff) + ", batch " +
                    std::to_string(o.batch_size) + " x " + std::to_string(m.seq_len) + " of " +
                    (o.data_file.empty() ? std::string("the translate task") : o.data_file) + ", mean (std) over " +
                    std::to_string(o.seeds) + " seeds\n";
  auto cell = [](const MeanStd& v) { return Padded(Format("%7.4f (%6.4f)", v.mean, v.std), kWidth); };
  auto trim = [](std::string line) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string header = Padded("layer", 7);
  for (Placement p : o.placements) {
    header += Padded(std::string(PlacementTitle(p)) + " W1", kWidth) + Padded(std::string(PlacementTitle(p)) + " W2", kWidth);
  }
  out += trim(header);
  for (int l = 0; l < m.layers; ++l) {
    std::string line = Padded(std::to_string(l + 1), 7);
    for (size_t i = 0; i < r.w1.size(); ++i) line += cell(r.w1[i][static_cast<size_t>(l)]) + cell(r.w2[i][static_cast<size_t>(l)]);
    out += trim(line);
  }
  header = Padded("depth", 7);
  for (Placement p : o.placements) header += Padded(PlacementTitle(p), kWidth);
  out += "\nlast layer's W2 gradient norm by depth\n" + trim(header);
  for (size_t d = 0; d < o.depths.size(); ++d) {
    std::string line = Padded(std::to_string(o.depths[d]), 7);
    for (const auto& by_depth : r.last_w2_by_depth) line += cell(by_depth[d]);
    out += trim(line);
  }
  return out;
}

}  // namespace normsweep::trainer
