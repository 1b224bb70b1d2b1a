#include "trainer/program/block_program.h"

#include <cmath>
#include <cstddef>
#include <utility>

#include "trainer/settings/schemes.h"

namespace normsweep::trainer {
namespace {

// The pass's view of the model: shapes, weights by layout offset, and the
// norms' weights (no bias under RMSNorm).
struct Pass {
  const ModelConfig& m;
  const ParamLayout& layout;
  Ops& ops;
  Activations& acts;
  const PassArgs& args;
  int B, T, C, F, H, N;
  size_t NC;
  const float* P;
  float* G;
  bool dropout;  // a training pass of a model with dropout

  Pass(const ModelConfig& model, const ParamLayout& l, Ops& o, Activations& a, const PassArgs& pa)
      : m(model), layout(l), ops(o), acts(a), args(pa), B(pa.B), T(pa.T), C(model.d_model), F(model.d_ff),
        H(model.heads), N(pa.B * pa.T), NC(static_cast<size_t>(pa.B) * pa.T * model.d_model), P(pa.params),
        G(pa.grads), dropout(pa.training && model.dropout > 0.0f) {}

  NormShape Rows() const { return {m.norm, N, C}; }
  NormWeights NormW(size_t w, size_t b) const { return {P + w, layout.norm_bias() ? P + b : nullptr}; }
  NormGrads NormG(size_t w, size_t b) const { return {G + w, layout.norm_bias() ? G + b : nullptr}; }
  float EmbeddingScale() const { return std::sqrt(static_cast<float>(C)); }
  float Alpha() const { return static_cast<float>(m.ResidualAlpha()); }

  QkNormArgs QkNorm(const BlockActivations& a, const BlockOffsets& w) const {
    QkNormArgs q;
    q.kind = m.norm;
    q.N = N;
    q.C = C;
    q.H = H;
    q.qkv = a.qkv;
    q.q_raw = a.q_raw;
    q.k_raw = a.k_raw;
    q.q = {a.q_mean, a.q_rstd};
    q.k = {a.k_mean, a.k_rstd};
    q.qw = NormW(w.qn_w, w.qn_b);
    q.kw = NormW(w.kn_w, w.kn_b);
    q.scratch = acts.qk_scratch;
    q.scratch2 = acts.qk_scratch2;
    return q;
  }

  // Block l from its input x; returns its output.
  const float* BlockForward(int l, const float* x) {
    BlockActivations& a = acts.blocks[static_cast<size_t>(l)];
    const BlockOffsets& w = layout.blocks()[static_cast<size_t>(l)];
    const float alpha = Alpha();
    a.x_in = const_cast<float*>(x);
    // Where the block's norms sit (trainer/settings/schemes.h): on each
    // sublayer's input (Pre-LN, Peri-LN), on its output (Peri-LN), on the
    // residual sums (Post-LN, DeepNorm).
    const BlockNorms& norms = SchemeOf(a.kind).block;
    const bool norm_in = norms.sublayer_input, norm_out = norms.sublayer_output, norm_after = norms.after_residual;

    // Attention sublayer: res1 = alpha * x + s1.
    const float* attn_in = x;
    if (norm_in) {
      ops.Norm(Rows(), a.ln1_out, {a.ln1_mean, a.ln1_rstd}, x, NormW(w.ln1_w, w.ln1_b));  // (N,C)
      attn_in = a.ln1_out;
    }
    ops.Matmul(a.qkv, attn_in, P + w.qkv_w, P + w.qkv_b, N, C, 3 * C);  // (N,3C)
    if (m.qk_norm) ops.QkNorm(QkNorm(a, w));
    ops.Attention(l, a.atty, a.att, a.qkv, B, T, C, H);                // (N,C), att (B,H,T,T)
    ops.Matmul(a.attn_out, a.atty, P + w.proj_w, P + w.proj_b, N, C, C);  // (N,C)
    float* s1 = a.attn_out;
    if (norm_out) {
      ops.Norm(Rows(), a.ln1o_out, {a.ln1o_mean, a.ln1o_rstd}, a.attn_out, NormW(w.ln1o_w, w.ln1o_b));
      s1 = a.ln1o_out;
    }
    if (dropout) ops.Dropout(s1, a.attn_mask, NC, m.dropout, static_cast<uint64_t>(2 * l + 1));
    ops.Residual(a.res1, alpha, x, 1.0f, s1, NC);
    const float* x1 = a.res1;
    if (norm_after) {
      ops.Norm(Rows(), a.ln1_out, {a.ln1_mean, a.ln1_rstd}, a.res1, NormW(w.ln1_w, w.ln1_b));
      x1 = a.ln1_out;
    }

    // FFN sublayer: res2 = alpha * x1 + s2.
    const float* ffn_in = x1;
    if (norm_in) {
      ops.Norm(Rows(), a.ln2_out, {a.ln2_mean, a.ln2_rstd}, x1, NormW(w.ln2_w, w.ln2_b));
      ffn_in = a.ln2_out;
    }
    ops.Matmul(a.fc1_act, ffn_in, P + w.fc1_w, P + w.fc1_b, N, C, F);  // (N,F)
    ops.Relu(a.fc1_act, static_cast<size_t>(N) * F);
    ops.Matmul(a.ffn_out, a.fc1_act, P + w.fc2_w, P + w.fc2_b, N, F, C);  // (N,C)
    float* s2 = a.ffn_out;
    if (norm_out) {
      ops.Norm(Rows(), a.ln2o_out, {a.ln2o_mean, a.ln2o_rstd}, a.ffn_out, NormW(w.ln2o_w, w.ln2o_b));
      s2 = a.ln2o_out;
    }
    if (dropout) ops.Dropout(s2, a.ffn_mask, NC, m.dropout, static_cast<uint64_t>(2 * l + 2));
    ops.Residual(a.res2, alpha, x1, 1.0f, s2, NC);
    if (norm_after) ops.Norm(Rows(), a.ln2_out, {a.ln2_mean, a.ln2_rstd}, a.res2, NormW(w.ln2_w, w.ln2_b));
    return a.out();
  }

  // Block l's backward pass: dx holds the gradient of its output on entry
  // and of its input on return (dx and dtmp, two (N,C) buffers, may swap).
  void BlockBackward(int l, float*& dx, float*& dtmp) {
    BlockActivations& a = acts.blocks[static_cast<size_t>(l)];
    const BlockOffsets& w = layout.blocks()[static_cast<size_t>(l)];
    const float alpha = Alpha();
    const BlockNorms& norms = SchemeOf(a.kind).block;
    const bool norm_in = norms.sublayer_input, norm_out = norms.sublayer_output;
    const float* attn_in = norm_in ? a.ln1_out : a.x_in;
    const float* ffn_in = norm_in ? a.ln2_out : a.ln1_out;
    // A sublayer's backward pass, every placement: from the gradient of
    // what it adds to the residual stream (dout) to its input's, written
    // into dinput (=), or with accumulate set to alpha * dinput + it
    // (dinput then holds the residual sum's gradient; dout is read before
    // dinput changes). The two sublayers differ only in `core`, which
    // takes the gradient of the sublayer's output before any output norm
    // and calls before_last with dinput ready for its last product.
    auto sublayer_backward = [&](const float* dout, float* dinput, bool accumulate, const float* mask,
                                 size_t out_norm_w, size_t out_norm_b, const float* out_norm_in, NormStats stats,
                                 auto core) {
      if (dropout) {
        ops.Multiply(acts.grad_masked, dout, mask, NC);
        dout = acts.grad_masked;
      }
      if (norm_out) {
        ops.Zero(acts.grad_norm_in, NC);
        ops.NormBackward(Rows(), acts.grad_norm_in, NormG(out_norm_w, out_norm_b), dout, out_norm_in,
                         NormW(out_norm_w, out_norm_b), stats);
        dout = acts.grad_norm_in;
      }
      core(dout, [&] {
        if (accumulate && alpha != 1.0f) ops.Scale(dinput, alpha, NC);
      });
    };
    auto ffn_backward = [&](const float* dout, float* dinput, bool accumulate) {
      sublayer_backward(dout, dinput, accumulate, a.ffn_mask, w.ln2o_w, w.ln2o_b, a.ffn_out,
                        {a.ln2o_mean, a.ln2o_rstd}, [&](const float* d, auto before_last) {
                          ops.MatmulBackward(acts.grad_fc1_act, G + w.fc2_w, G + w.fc2_b, d, a.fc1_act,
                                             P + w.fc2_w, N, F, C, false);
                          ops.ReluBackward(acts.grad_fc1_act, acts.grad_fc1_act, a.fc1_act,
                                           static_cast<size_t>(N) * F);
                          before_last();
                          ops.MatmulBackward(dinput, G + w.fc1_w, G + w.fc1_b, acts.grad_fc1_act, ffn_in,
                                             P + w.fc1_w, N, C, F, accumulate);
                        });
    };
    auto attention_backward = [&](const float* dout, float* dinput, bool accumulate) {
      sublayer_backward(dout, dinput, accumulate, a.attn_mask, w.ln1o_w, w.ln1o_b, a.attn_out,
                        {a.ln1o_mean, a.ln1o_rstd}, [&](const float* d, auto before_last) {
                          ops.MatmulBackward(acts.grad_atty, G + w.proj_w, G + w.proj_b, d, a.atty, P + w.proj_w, N,
                                             C, C, false);
                          ops.AttentionBackward(acts.grad_qkv, acts.grad_atty, a.qkv, a.att, B, T, C, H);
                          if (m.qk_norm) {
                            ops.QkNormBackward(QkNorm(a, w), acts.grad_qkv, NormG(w.qn_w, w.qn_b),
                                               NormG(w.kn_w, w.kn_b));
                          }
                          before_last();
                          ops.MatmulBackward(dinput, G + w.qkv_w, G + w.qkv_b, acts.grad_qkv, attn_in, P + w.qkv_w,
                                             N, C, 3 * C, accumulate);
                        });
    };
    if (norm_in) {
      // res2 = res1 + s2(ln2(res1)); dx = d res2.
      ffn_backward(dx, dtmp, false);
      ops.NormBackward(Rows(), dx, NormG(w.ln2_w, w.ln2_b), dtmp, a.res1, NormW(w.ln2_w, w.ln2_b),
                       {a.ln2_mean, a.ln2_rstd});
      // dx = d res1; res1 = x + s1(ln1(x)).
      attention_backward(dx, dtmp, false);
      ops.NormBackward(Rows(), dx, NormG(w.ln1_w, w.ln1_b), dtmp, a.x_in, NormW(w.ln1_w, w.ln1_b),
                       {a.ln1_mean, a.ln1_rstd});
    } else {  // norms.after_residual
      // out = ln2(res2), res2 = alpha ln1_out + ffn(ln1_out), ln1_out = ln1(res1), res1 = alpha x + attn(x).
      ops.Zero(dtmp, NC);
      ops.NormBackward(Rows(), dtmp, NormG(w.ln2_w, w.ln2_b), dx, a.res2, NormW(w.ln2_w, w.ln2_b),
                       {a.ln2_mean, a.ln2_rstd});
      std::swap(dx, dtmp);         // dx = d res2
      ffn_backward(dx, dx, true);  // d ln1_out = alpha d res2 + fc1 backward
      ops.Zero(dtmp, NC);
      ops.NormBackward(Rows(), dtmp, NormG(w.ln1_w, w.ln1_b), dx, a.res1, NormW(w.ln1_w, w.ln1_b),
                       {a.ln1_mean, a.ln1_rstd});
      std::swap(dx, dtmp);  // dx = d res1
      attention_backward(dx, dx, true);
    }
  }

  void Forward() {
    const float* pos = layout.has_pos_emb() ? P + layout.pos_emb() : args.sin_pos;
    ops.Embed(acts.emb_out, P + layout.tok_emb(), pos, B, T, C, EmbeddingScale());  // (N,C)
    float* x0 = acts.emb_out;
    if (layout.has_emb_ln()) {
      ops.Norm(Rows(), acts.emb_ln_out, {acts.emb_ln_mean, acts.emb_ln_rstd}, acts.emb_out,
               NormW(layout.lnemb_w(), layout.lnemb_b()));
      x0 = acts.emb_ln_out;
    }
    if (dropout) ops.Dropout(x0, acts.emb_mask, NC, m.dropout, 0);
    const float* x = x0;
    for (int l = 0; l < m.layers; ++l) x = BlockForward(l, x);
    const float* h = x;
    if (layout.has_final_ln()) {
      ops.Norm(Rows(), acts.lnf_out, {acts.lnf_mean, acts.lnf_rstd}, x, NormW(layout.lnf_w(), layout.lnf_b()));
      h = acts.lnf_out;
    }
    ops.Matmul(acts.logits, h, P + layout.head_w(), P + layout.head_b(), N, C, kVocabSize);  // (N,V)
    ops.CrossEntropy(acts.probs, acts.row_loss, acts.row_log_z, acts.logits, N, kVocabSize);
  }

  void Backward() {
    // Head: dlogits overwrites probs.
    float* dlogits = acts.probs;
    if (args.z_loss > 0) {
      ops.CrossEntropyZLossBackward(dlogits, acts.probs, acts.row_log_z, N, kVocabSize,
                                    static_cast<float>(args.z_loss));
    } else {
      ops.CrossEntropyBackward(dlogits, acts.probs, N, kVocabSize);
    }
    const float* x0 = layout.has_emb_ln() ? acts.emb_ln_out : acts.emb_out;
    const float* last = m.layers > 0 ? acts.blocks.back().out() : x0;
    const float* h = layout.has_final_ln() ? acts.lnf_out : last;
    float* dx = acts.grad_res_a;
    float* dtmp = acts.grad_res_b;
    ops.MatmulBackward(dx, G + layout.head_w(), G + layout.head_b(), dlogits, h, P + layout.head_w(), N, C,
                       kVocabSize, false);
    if (layout.has_final_ln()) {
      ops.Zero(dtmp, NC);
      ops.NormBackward(Rows(), dtmp, NormG(layout.lnf_w(), layout.lnf_b()), dx, last,
                       NormW(layout.lnf_w(), layout.lnf_b()), {acts.lnf_mean, acts.lnf_rstd});
      std::swap(dx, dtmp);
    }
    // dx holds d(loss)/d(block output) on entry to each iteration.
    for (int l = m.layers - 1; l >= 0; --l) BlockBackward(l, dx, dtmp);
    if (dropout) ops.Multiply(dx, dx, acts.emb_mask, NC);
    if (layout.has_emb_ln()) {
      ops.Zero(dtmp, NC);
      ops.NormBackward(Rows(), dtmp, NormG(layout.lnemb_w(), layout.lnemb_b()), dx, acts.emb_out,
                       NormW(layout.lnemb_w(), layout.lnemb_b()), {acts.emb_ln_mean, acts.emb_ln_rstd});
      std::swap(dx, dtmp);
    }
    float* dpos = layout.has_pos_emb() ? G + layout.pos_emb() : nullptr;
    ops.EmbedBackward(G + layout.tok_emb(), dpos, dx, B, T, C, EmbeddingScale());
  }
};

}  // namespace

void ForwardPass(const ModelConfig& model, const ParamLayout& layout, Ops& ops, Activations& acts,
                 const PassArgs& args) {
  Pass(model, layout, ops, acts, args).Forward();
}

void BackwardPass(const ModelConfig& model, const ParamLayout& layout, Ops& ops, Activations& acts,
                  const PassArgs& args) {
  Pass(model, layout, ops, acts, args).Backward();
}

}  // namespace normsweep::trainer
