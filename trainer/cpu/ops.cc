// The CPU kernels with run-time dispatch. The bodies (ops_kernels.inc) are
// compiled here three times: for plain x86-64, under `#pragma GCC target`
// for AVX2 + FMA, and for AVX-512 (with packed_sgemm.inc). Each copy lives in
// its own namespace (kernels_baseline, kernels_avx2, kernels_avx512) and
// fills a table of function pointers; the functions of ops.h call through
// the table of the active variant (kernel_variant.h). Each copy's vectors
// are one of its registers wide (kLanes 4, 8, 16). A target pragma rather
// than per-file -m flags: the standard headers, included first, stay
// baseline code, so no wide copy of an inline function or template can win
// the linker's pick among identical weak symbols and run on every CPU.
// Whole functions, not target_clones: OpenMP outlines each parallel region
// into a function of its own, which the pragma covers and target_clones
// would not.
#include "trainer/cpu/ops.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "trainer/cpu/blas.h"
#include "trainer/cpu/kernel_variant.h"
#include "trainer/rng.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define NORMSWEEP_KERNEL_VARIANTS 1
#endif

namespace normsweep::trainer::cpu {
namespace {

struct KernelTable {
  decltype(&cpu::EncoderForward) encoder_forward;
  decltype(&cpu::EncoderBackward) encoder_backward;
  decltype(&cpu::LayerNormForward) layer_norm_forward;
  decltype(&cpu::LayerNormBackward) layer_norm_backward;
  decltype(&cpu::RmsNormForward) rms_norm_forward;
  decltype(&cpu::RmsNormBackward) rms_norm_backward;
  decltype(&cpu::MatmulForward) matmul_forward;
  decltype(&cpu::MatmulBackward) matmul_backward;
  decltype(&cpu::AttentionForward) attention_forward;
  decltype(&cpu::AttentionBackward) attention_backward;
  decltype(&cpu::ReluForward) relu_forward;
  decltype(&cpu::ReluBackward) relu_backward;
  decltype(&cpu::Add) add;
  decltype(&cpu::Multiply) multiply;
  decltype(&cpu::CrossEntropyForward) cross_entropy_forward;
  decltype(&cpu::CrossEntropyBackward) cross_entropy_backward;
  decltype(&cpu::CrossEntropyZLossBackward) cross_entropy_z_loss_backward;
};

// Each variant's vector width: one register of floats.
namespace kernels_baseline {
constexpr int kLanes = 4;  // xmm
#include "trainer/cpu/ops_kernels.inc"
}  // namespace kernels_baseline

#if NORMSWEEP_KERNEL_VARIANTS
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace kernels_avx2 {
constexpr int kLanes = 8;  // ymm
#include "trainer/cpu/ops_kernels.inc"
#include "trainer/cpu/packed_sgemm.inc"
}  // namespace kernels_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq")
namespace kernels_avx512 {
constexpr int kLanes = 16;  // zmm
#include "trainer/cpu/ops_kernels.inc"
#include "trainer/cpu/packed_sgemm.inc"
}  // namespace kernels_avx512
#pragma GCC pop_options
#endif

const KernelTable& TableFor(KernelVariant variant) {
  switch (variant) {
#if NORMSWEEP_KERNEL_VARIANTS
    case KernelVariant::kAvx2:
      return kernels_avx2::kKernels;
    case KernelVariant::kAvx512:
      return kernels_avx512::kKernels;
#endif
    default:
      return kernels_baseline::kKernels;
  }
}

constexpr KernelVariant kAllVariants[] = {KernelVariant::kBaseline, KernelVariant::kAvx2,
                                          KernelVariant::kAvx512};

[[gnu::noinline]] KernelVariant InitialKernelVariant() {
  std::string warning;
  const KernelVariant variant = ChooseKernelVariant(std::getenv(kKernelVariantEnv), &warning);
  if (!warning.empty()) std::fprintf(stderr, "normsweep: %s\n", warning.c_str());
  return variant;
}

// The active variant; chosen on first use.
std::atomic<KernelVariant>& ActiveSlot() {
  static std::atomic<KernelVariant> slot = InitialKernelVariant();
  return slot;
}

const KernelTable& Active() { return TableFor(ActiveSlot().load(std::memory_order_relaxed)); }

}  // namespace

const char* KernelVariantName(KernelVariant variant) {
  switch (variant) {
    case KernelVariant::kBaseline:
      return "baseline";
    case KernelVariant::kAvx2:
      return "avx2";
    case KernelVariant::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<KernelVariant> ParseKernelVariant(std::string_view name) {
  for (KernelVariant v : kAllVariants) {
    if (name == KernelVariantName(v)) return v;
  }
  return std::nullopt;
}

bool KernelVariantSupported(KernelVariant variant) {
  switch (variant) {
    case KernelVariant::kBaseline:
      return true;
#if NORMSWEEP_KERNEL_VARIANTS
    // libgcc's checks include the OS's support (XCR0) for the wider registers.
    case KernelVariant::kAvx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelVariant::kAvx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
#endif
    default:
      return false;
  }
}

std::vector<KernelVariant> SupportedKernelVariants() {
  std::vector<KernelVariant> out;
  for (KernelVariant v : kAllVariants) {
    if (KernelVariantSupported(v)) out.push_back(v);
  }
  return out;
}

KernelVariant ChooseKernelVariant(const char* env_value, std::string* warning) {
  if (warning != nullptr) warning->clear();
  const KernelVariant fastest = SupportedKernelVariants().back();
  if (env_value == nullptr || *env_value == '\0') return fastest;
  const std::optional<KernelVariant> named = ParseKernelVariant(env_value);
  std::string why;
  if (!named) {
    why = std::string(kKernelVariantEnv) + "=" + std::string(env_value).substr(0, 40) +
          " is not one of baseline, avx2, avx512";
  } else if (!KernelVariantSupported(*named)) {
    why = std::string(kKernelVariantEnv) + "=" + env_value + ": this CPU does not run it";
  } else {
    return *named;
  }
  if (warning != nullptr) *warning = why + "; using the " + KernelVariantName(fastest) + " kernels";
  return fastest;
}

KernelVariant ActiveKernelVariant() { return ActiveSlot().load(std::memory_order_relaxed); }

bool SetKernelVariant(KernelVariant variant) {
  if (!KernelVariantSupported(variant)) return false;
  ActiveSlot().store(variant, std::memory_order_relaxed);
  return true;
}

SgemmFunction ActivePackedSgemm() {
#if NORMSWEEP_KERNEL_VARIANTS
  if (ActiveKernelVariant() == KernelVariant::kAvx512) return kernels_avx512::packed::Sgemm;
  if (ActiveKernelVariant() == KernelVariant::kAvx2) return kernels_avx2::packed::Sgemm;
#endif
  return nullptr;
}

void SetThreads(int threads) {
  omp_set_num_threads(threads);
  // No nested teams: a kernel's own parallel loop inside the backend's
  // per-part region runs on one thread (OpenMP's usual default, made sure).
  omp_set_max_active_levels(1);
  SetBlasThreads(threads);
}

void EncoderForward(float* out, const int32_t* tokens, const float* tok_emb, const float* pos, int B,
                    int T, int C, float emb_scale) {
  Active().encoder_forward(out, tokens, tok_emb, pos, B, T, C, emb_scale);
}

void EncoderBackward(float* dtok_emb, float* dpos, const float* dout, const int32_t* tokens, int B, int T,
                     int C, int V, float emb_scale) {
  Active().encoder_backward(dtok_emb, dpos, dout, tokens, B, T, C, V, emb_scale);
}

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                      const float* b, int N, int C, float eps) {
  Active().layer_norm_forward(out, mean, rstd, inp, w, b, N, C, eps);
}

void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, const float* mean, const float* rstd, int N, int C) {
  Active().layer_norm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

void RmsNormForward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) {
  Active().rms_norm_forward(out, rstd, inp, w, N, C, eps);
}

void RmsNormBackward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd,
                     int N, int C) {
  Active().rms_norm_backward(dinp, dw, dout, inp, w, rstd, N, C);
}

void MatmulForward(float* out, const float* inp, const float* w, const float* b, int N, int I, int O) {
  Active().matmul_forward(out, inp, w, b, N, I, O);
}

void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                    int N, int I, int O, bool accumulate) {
  Active().matmul_backward(dinp, dw, db, dout, inp, w, N, I, O, accumulate);
}

void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int H, float* max_logit) {
  Active().attention_forward(out, att, qkv, B, T, C, H, max_logit);
}

void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                       int C, int H) {
  Active().attention_backward(dqkv, dout, qkv, att, B, T, C, H);
}

void ReluForward(float* x, size_t n) { Active().relu_forward(x, n); }

void ReluBackward(float* dx, const float* dy, const float* act, size_t n) {
  Active().relu_backward(dx, dy, act, n);
}

void Add(float* out, const float* a, const float* b, size_t n) { Active().add(out, a, b, n); }

void Multiply(float* out, const float* a, const float* b, size_t n) { Active().multiply(out, a, b, n); }

CrossEntropyStats CrossEntropyForward(float* probs, float* row_loss, float* row_log_z, const float* logits,
                                      const int32_t* targets, int N, int V) {
  return Active().cross_entropy_forward(probs, row_loss, row_log_z, logits, targets, N, V);
}

void CrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                          float scale) {
  Active().cross_entropy_backward(dlogits, probs, targets, N, V, scale);
}

void CrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z, const int32_t* targets,
                               int N, int V, float scale, float z_loss) {
  Active().cross_entropy_z_loss_backward(dlogits, probs, row_log_z, targets, N, V, scale, z_loss);
}

// Dropout masks and the position table: scalar code, the same numbers on
// every CPU (and the GPU), so not per variant.
void MakeDropoutMask(float* mask, size_t n, float p, uint64_t seed) {
  // Counter-based: element i depends only on (seed, i), not on the threads.
  const size_t block = kDropoutMaskBlock;
  const size_t blocks = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (kernels_baseline::Parallel(n))
  for (size_t bi = 0; bi < blocks; ++bi) {
    const size_t begin = bi * block;
    MakeDropoutMaskSlice(mask + begin, begin, std::min(n, begin + block) - begin, p, seed);
  }
}

void MakeDropoutMaskSlice(float* mask, size_t first, size_t n, float p, uint64_t seed) {
  const float keep_scale = 1.0f / (1.0f - p);
  const size_t block = kDropoutMaskBlock;
  const size_t end = first + n;
  size_t i = first;
  while (i < end) {
    // Block bi draws its elements in order from its own stream; skip the
    // draws of elements before the slice.
    const size_t bi = i / block;
    Rng rng(MixSeed(seed, kDropoutMaskStream, bi));
    for (size_t skip = bi * block; skip < i; ++skip) rng.NextU64();
    const size_t block_end = std::min(end, (bi + 1) * block);
    for (; i < block_end; ++i) mask[i - first] = rng.Uniform() < p ? 0.0f : keep_scale;
  }
}

void SinusoidalPositions(float* out, int T, int C) {
  for (int p = 0; p < T; ++p) {
    for (int i = 0; 2 * i < C; ++i) {
      const double angle = p / std::pow(10000.0, 2.0 * i / C);
      out[static_cast<size_t>(p) * C + 2 * i] = static_cast<float>(std::sin(angle));
      if (2 * i + 1 < C) out[static_cast<size_t>(p) * C + 2 * i + 1] = static_cast<float>(std::cos(angle));
    }
  }
}

}  // namespace normsweep::trainer::cpu
