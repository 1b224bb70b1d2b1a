// Deterministic, platform-independent random numbers (the standard library's
// distributions differ between implementations, so we draw our own).
#ifndef NORMSWEEP_TRAINER_RNG_H_
#define NORMSWEEP_TRAINER_RNG_H_

#include <cmath>
#include <cstdint>

// The CUDA backend draws the same dropout masks on the device.
#ifdef __CUDACC__
#define NORMSWEEP_HOST_DEVICE __host__ __device__
#else
#define NORMSWEEP_HOST_DEVICE
#endif

namespace normsweep::trainer {

NORMSWEEP_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Mixes several words into one seed: Rng(MixSeed(seed, stream, step)).
NORMSWEEP_HOST_DEVICE inline uint64_t MixSeed(uint64_t a, uint64_t b, uint64_t c = 0) {
  return SplitMix64(SplitMix64(SplitMix64(a) ^ b) ^ c);
}

// Dropout masks are drawn in blocks of kDropoutMaskBlock elements, block i
// from Rng(MixSeed(seed, kDropoutMaskStream, i)), on the CPU and the GPU alike.
inline constexpr uint64_t kDropoutMaskBlock = 4096;
inline constexpr uint64_t kDropoutMaskStream = 0xd409;

// xoshiro256** seeded through SplitMix64.
class Rng {
 public:
  NORMSWEEP_HOST_DEVICE explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) {
      x += 0x9e3779b97f4a7c15ULL;
      s = SplitMix64(x);
    }
  }

  NORMSWEEP_HOST_DEVICE uint64_t NextU64() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  NORMSWEEP_HOST_DEVICE double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n).
  uint64_t Below(uint64_t n) { return static_cast<uint64_t>(Uniform() * static_cast<double>(n)); }
  // Standard normal (Box-Muller; one value per call for simplicity).
  double Normal() {
    double u1 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  NORMSWEEP_HOST_DEVICE static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_RNG_H_
