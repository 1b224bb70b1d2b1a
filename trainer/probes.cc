#include "trainer/probes.h"

#include <cmath>
#include <memory>

#include "trainer/backend.h"
#include "trainer/cpu/ops.h"
#include "trainer/data.h"
#include "trainer/param_layout.h"
#include "trainer/rng.h"

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

std::vector<float> Add(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

}  // namespace

StatusOr<std::vector<HiddenNormsRow>> ProbeHiddenNorms(const HiddenNormsOptions& o) {
  if (o.d < 2 || o.tokens < 1 || o.layers < 1 || o.draws < 1) {
    return InvalidArgument("hidden-norms: d, tokens, layers and draws must be positive");
  }
  for (int l : o.report_layers) {
    if (l < 1 || l > o.layers) return InvalidArgument("hidden-norms: report layer " + std::to_string(l) + " is out of range");
  }
  // [layer][draw]
  std::vector<std::vector<double>> post(static_cast<size_t>(o.layers)), pre(static_cast<size_t>(o.layers));
  for (int draw = 0; draw < o.draws; ++draw) {
    Rng rng(MixSeed(o.seed, 0x41dde, static_cast<uint64_t>(draw)));
    SimpleStack stack(o.d, o.tokens, o.layers, rng);
    std::vector<float> x0(static_cast<size_t>(o.tokens) * o.d);
    for (float& v : x0) v = static_cast<float>(rng.Normal());
    // Post-LN: x2 = x + Attn(x); x3 = LN(x2); x5 = x3 + FFN(x3); x <- LN(x5).
    std::vector<float> x = x0;
    for (int l = 0; l < o.layers; ++l) {
      const SimpleLayer& w = stack.layers()[static_cast<size_t>(l)];
      const std::vector<float> x3 = stack.Ln(Add(x, stack.Attention(x, w)));
      const std::vector<float> x5 = Add(x3, stack.Ffn(x3, w));
      post[static_cast<size_t>(l)].push_back(MeanSquaredNorm(x5, o.tokens, o.d));
      x = stack.Ln(x5);
    }
    // Pre-LN: x3 = x + Attn(LN(x)); x <- x3 + FFN(LN(x3)).
    x = x0;
    for (int l = 0; l < o.layers; ++l) {
      const SimpleLayer& w = stack.layers()[static_cast<size_t>(l)];
      const std::vector<float> x3 = Add(x, stack.Attention(stack.Ln(x), w));
      x = Add(x3, stack.Ffn(stack.Ln(x3), w));
      pre[static_cast<size_t>(l)].push_back(MeanSquaredNorm(x, o.tokens, o.d));
    }
  }
  std::vector<HiddenNormsRow> rows;
  for (int l : o.report_layers) {
    HiddenNormsRow r;
    r.layer = l;
    r.post = Summarise(post[static_cast<size_t>(l - 1)]);
    r.pre = Summarise(pre[static_cast<size_t>(l - 1)]);
    r.pre_lower = 1.0 + l / 2.0;
    r.pre_upper = 1.0 + 3.0 * l / 2.0;
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

  GradNormsResult r;
  for (Placement p : {Placement::kPostLN, Placement::kPreLN}) {
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

}  // namespace normsweep::trainer
