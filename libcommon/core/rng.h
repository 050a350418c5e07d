// Deterministic random numbers of our own (same stream on every platform and library version).
#pragma once
#include <cmath>
#include <cstdint>
#include <string_view>

namespace veomni {

// SplitMix64's finaliser: a good 64-bit mixer, used to hash seeds and counters.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// SplitMix64 step.
inline uint64_t splitmix64(uint64_t& state) { return mix64(state += 0x9e3779b97f4a7c15ull); }

// FNV-1a of a string, to derive per-name streams (e.g. one per parameter).
inline uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// xoshiro256** generator seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t& word : state_) word = splitmix64(s);
  }
  uint64_t next_u64() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  // Uniform in [0, n) without modulo bias (Lemire's method would be faster; rejection is simpler and exact).
  uint64_t uniform_int(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next_u64(); while (x >= limit);
    return x % n;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

// Counter-based normal: the value at (stream, index) needs no state, so any rank can generate any slice of a tensor.
inline double normal_at(uint64_t stream, uint64_t index) {
  uint64_t s = stream ^ (index * 0xd1342543de82ef95ull);
  const uint64_t a = splitmix64(s), b = splitmix64(s);
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace veomni
