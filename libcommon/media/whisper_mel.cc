// Whisper log-mel features: Slaney mel filters, a mixed-radix FFT over Hann-windowed reflect-padded frames, log
// compression. Computed in double and rounded once to f32 (HF runs the same steps in float32 torch).
#include "media/whisper_mel.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "core/error.h"

namespace veomni {
namespace {

using Complex = std::complex<double>;

// HF audio_utils (mel_scale="slaney"): linear below 1 kHz (3 mels per 200 Hz), logarithmic above (27 mels per
// factor 6.4).
constexpr double kMinLogHertz = 1000.0;
constexpr double kMinLogMel = 15.0;
const double kMelsPerLogHertz = 27.0 / std::log(6.4);
constexpr double kWhisperMaxHertz = 8000.0;

double hertz_to_slaney_mel(double hertz) {
  if (hertz < kMinLogHertz) return 3.0 * hertz / 200.0;
  return kMinLogMel + std::log(hertz / kMinLogHertz) * kMelsPerLogHertz;
}

double slaney_mel_to_hertz(double mel) {
  if (mel < kMinLogMel) return 200.0 * mel / 3.0;
  return kMinLogHertz * std::exp((mel - kMinLogMel) / kMelsPerLogHertz);
}

void validate(const WhisperMelConfig& c) {
  VEOMNI_INPUT_CHECK(c.sampling_rate > 0 && c.n_fft >= 2 && c.hop_length > 0 && c.n_mels > 0,
                     "whisper log-mel: invalid config (sampling_rate {}, n_fft {}, hop_length {}, n_mels {}); all "
                     "must be positive and n_fft >= 2",
                     c.sampling_rate, c.n_fft, c.hop_length, c.n_mels);
}

// Complex DFT of any length by recursive decimation in time over its prime factors (400 = 2·2·2·2·5·5). Twiddles
// come from one table of the full length, so every sub-transform reuses it with a stride.
class Fft {
 public:
  explicit Fft(int n) : n_(n), twiddles_(static_cast<size_t>(n)), scratch_(static_cast<size_t>(n)) {
    for (int k = 0; k < n; ++k) twiddles_[k] = std::polar(1.0, -2.0 * std::numbers::pi * k / n);
    for (int rest = n, p = 2; rest > 1;) {
      if (rest % p == 0) {
        factors_.push_back(p);
        rest /= p;
      } else {
        p = (p * p > rest) ? rest : p + 1;
      }
    }
  }

  // out[k] = sum_j in[j] · exp(-2πi jk/n); `in` and `out` are length n and must not overlap.
  void transform(const Complex* in, Complex* out) { recurse(in, 1, out, n_, 0); }

 private:
  void recurse(const Complex* in, int in_stride, Complex* out, int n, size_t factor_index) {
    if (n == 1) {
      out[0] = in[0];
      return;
    }
    const int p = factors_[factor_index];
    const int m = n / p;
    for (int q = 0; q < p; ++q) recurse(in + q * in_stride, in_stride * p, out + q * m, m, factor_index + 1);
    // X[k + m·u] = sum_q W_n^{q(k + m·u)} · Y_q[k], with W_n^e = twiddles_[e · n_/n].
    const int step = n_ / n;
    Complex* t = scratch_.data();
    for (int k = 0; k < m; ++k) {
      for (int q = 0; q < p; ++q) t[q] = out[q * m + k] * twiddles_[static_cast<size_t>(q * k * step)];
      for (int u = 0; u < p; ++u) {
        Complex sum = t[0];
        for (int q = 1; q < p; ++q) sum += t[q] * twiddles_[static_cast<size_t>((q * u) % p * m * step)];
        out[k + m * u] = sum;
      }
    }
  }

  int n_;
  std::vector<Complex> twiddles_;
  std::vector<Complex> scratch_;  // p values of one butterfly; p <= n
  std::vector<int> factors_;
};

// The non-zero bins [begin, end) of each filter row, so the mel product skips the zeros.
struct SparseFilters {
  std::vector<double> weights;  // [n_mels][bins]
  std::vector<std::pair<int, int>> ranges;
  int bins = 0;
};

SparseFilters sparse_filters(const WhisperMelConfig& config) {
  SparseFilters f;
  f.weights = slaney_mel_filters(config);
  f.bins = config.n_fft / 2 + 1;
  for (int m = 0; m < config.n_mels; ++m) {
    const double* row = f.weights.data() + static_cast<size_t>(m) * f.bins;
    int begin = 0, end = f.bins;
    while (begin < end && row[begin] == 0.0) ++begin;
    while (end > begin && row[end - 1] == 0.0) --end;
    f.ranges.emplace_back(begin, end);
  }
  return f;
}

// Index into the signal after numpy/torch "reflect" padding (edge sample not repeated).
int64_t reflect_index(int64_t i, int64_t n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// log10 of the mel power of every frame but the last of the centred STFT, row-major [frames][n_mels].
std::vector<double> log10_mel_power(const std::vector<float>& samples, const WhisperMelConfig& config) {
  const int64_t n = static_cast<int64_t>(samples.size());
  const int n_fft = config.n_fft;
  const int64_t frames = n / config.hop_length;
  const SparseFilters filters = sparse_filters(config);

  std::vector<double> window(static_cast<size_t>(n_fft));  // periodic Hann (torch.hann_window default)
  for (int k = 0; k < n_fft; ++k) window[k] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * k / n_fft);

  Fft fft(n_fft);
  std::vector<Complex> frame(static_cast<size_t>(n_fft)), spectrum(static_cast<size_t>(n_fft));
  std::vector<double> power(static_cast<size_t>(filters.bins));
  std::vector<double> out(static_cast<size_t>(frames * config.n_mels));
  const int64_t half = n_fft / 2;
  for (int64_t t = 0; t < frames; ++t) {
    const int64_t start = t * config.hop_length - half;
    for (int k = 0; k < n_fft; ++k) frame[k] = window[k] * samples[reflect_index(start + k, n)];
    fft.transform(frame.data(), spectrum.data());
    for (int b = 0; b < filters.bins; ++b) power[b] = std::norm(spectrum[b]);
    for (int m = 0; m < config.n_mels; ++m) {
      const double* row = filters.weights.data() + static_cast<size_t>(m) * filters.bins;
      double mel = 0.0;
      for (int b = filters.ranges[m].first; b < filters.ranges[m].second; ++b) mel += row[b] * power[b];
      out[static_cast<size_t>(t * config.n_mels + m)] = std::log10(std::max(mel, 1e-10));
    }
  }
  return out;
}

}  // namespace

std::vector<double> slaney_mel_filters(const WhisperMelConfig& config) {
  validate(config);
  const int bins = config.n_fft / 2 + 1;
  const int n_mels = config.n_mels;
  // Filter edges evenly spaced in mel (np.linspace: i·step + start, last point exact), in Hz, up to the 8 kHz that
  // WhisperFeatureExtractor passes whatever the sampling rate.
  const double mel_max = hertz_to_slaney_mel(kWhisperMaxHertz);
  std::vector<double> edges(static_cast<size_t>(n_mels + 2));
  for (int i = 0; i < n_mels + 2; ++i) {
    const double mel = i == n_mels + 1 ? mel_max : i * (mel_max / (n_mels + 1));
    edges[i] = slaney_mel_to_hertz(mel);
  }
  std::vector<double> weights(static_cast<size_t>(n_mels) * bins, 0.0);
  for (int m = 0; m < n_mels; ++m) {
    const double lower = edges[m], centre = edges[m + 1], upper = edges[m + 2];
    const double area_norm = 2.0 / (upper - lower);  // Slaney: constant energy per channel
    for (int b = 0; b < bins; ++b) {
      const double hertz = b * static_cast<double>(config.sampling_rate / 2) / (bins - 1);  // linspace(0, sr//2)
      const double rising = (hertz - lower) / (centre - lower);
      const double falling = (upper - hertz) / (upper - centre);
      weights[static_cast<size_t>(m) * bins + b] = std::max(0.0, std::min(rising, falling)) * area_norm;
    }
  }
  return weights;
}

Tensor whisper_log_mel(const std::vector<float>& samples, const WhisperMelConfig& config) {
  validate(config);
  VEOMNI_INPUT_CHECK(static_cast<int64_t>(samples.size()) > config.n_fft / 2,
                     "audio clip of {} samples is too short for a log-mel spectrogram: it needs more than {} "
                     "(n_fft/2, the reflect padding), i.e. at least {:.1f} ms at {} Hz",
                     samples.size(), config.n_fft / 2, 1000.0 * (config.n_fft / 2 + 1) / config.sampling_rate,
                     config.sampling_rate);
  const std::vector<double> log_mel = log10_mel_power(samples, config);
  const int64_t frames = static_cast<int64_t>(log_mel.size()) / config.n_mels;
  Tensor features = Tensor::empty({frames, config.n_mels}, DType::F32);
  if (frames == 0) return features;
  // Dynamic range of 80 dB below the clip's loudest bin, then scaled to roughly [-1, 1].
  const double floor = *std::max_element(log_mel.begin(), log_mel.end()) - 8.0;
  float* out = features.data<float>();
  for (size_t i = 0; i < log_mel.size(); ++i) out[i] = static_cast<float>((std::max(log_mel[i], floor) + 4.0) / 4.0);
  return features;
}

}  // namespace veomni
