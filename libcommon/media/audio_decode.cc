// Audio decoding (libsndfile on the file's bytes), mono mixing and libsoxr resampling, matching librosa.load.
#include "media/audio_decode.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "media/media_file.h"

namespace veomni {
namespace {

// libsndfile virtual I/O over bytes already in memory (read_media_file gives uniform missing/empty-file errors).
struct MemoryStream {
  const std::vector<uint8_t>* bytes = nullptr;
  sf_count_t position = 0;
};

sf_count_t stream_length(void* user) {
  return static_cast<sf_count_t>(static_cast<MemoryStream*>(user)->bytes->size());
}

sf_count_t stream_seek(sf_count_t offset, int whence, void* user) {
  auto* s = static_cast<MemoryStream*>(user);
  const sf_count_t size = static_cast<sf_count_t>(s->bytes->size());
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? s->position : size;
  s->position = std::clamp<sf_count_t>(base + offset, 0, size);
  return s->position;
}

sf_count_t stream_read(void* destination, sf_count_t count, void* user) {
  auto* s = static_cast<MemoryStream*>(user);
  const sf_count_t n = std::clamp<sf_count_t>(static_cast<sf_count_t>(s->bytes->size()) - s->position, 0, count);
  std::memcpy(destination, s->bytes->data() + s->position, static_cast<size_t>(n));
  s->position += n;
  return n;
}

sf_count_t stream_write(const void*, sf_count_t, void*) { return 0; }  // opened read-only

sf_count_t stream_tell(void* user) { return static_cast<MemoryStream*>(user)->position; }

struct SndfileCloser {
  void operator()(SNDFILE* file) const { sf_close(file); }
};

struct Decoded {
  std::vector<float> interleaved;
  int channels = 0;
  int rate = 0;
  int64_t frames() const { return channels ? static_cast<int64_t>(interleaved.size()) / channels : 0; }
};

Decoded decode_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_media_file(path);
  MemoryStream stream{&bytes, 0};
  SF_VIRTUAL_IO io{stream_length, stream_seek, stream_read, stream_write, stream_tell};
  SF_INFO info{};
  std::unique_ptr<SNDFILE, SndfileCloser> file(sf_open_virtual(&io, SFM_READ, &info, &stream));
  VEOMNI_INPUT_CHECK(file != nullptr,
                     "{}: cannot decode audio: {} (supported: WAV, FLAC, OGG Vorbis/Opus, MP3 and the other formats "
                     "libsndfile reads)",
                     path, sf_strerror(nullptr));
  VEOMNI_INPUT_CHECK(info.channels > 0 && info.samplerate > 0, "{}: audio has {} channels at {} Hz", path,
                     info.channels, info.samplerate);
  Decoded d;
  d.channels = info.channels;
  d.rate = info.samplerate;
  // Read until the decoder stops: frame counts in headers are estimates for some formats (MP3, Ogg).
  constexpr sf_count_t kChunkFrames = 1 << 16;
  for (;;) {
    const size_t used = d.interleaved.size();
    d.interleaved.resize(used + static_cast<size_t>(kChunkFrames * d.channels));
    const sf_count_t got = sf_readf_float(file.get(), d.interleaved.data() + used, kChunkFrames);
    d.interleaved.resize(used + static_cast<size_t>(std::max<sf_count_t>(got, 0) * d.channels));
    if (got <= 0) break;
  }
  VEOMNI_INPUT_CHECK(sf_error(file.get()) == SF_ERR_NO_ERROR, "{}: audio data is corrupt after {} frames: {}", path,
                     d.frames(), sf_strerror(file.get()));
  VEOMNI_INPUT_CHECK(d.frames() > 0, "{}: audio has no samples (zero-length audio)", path);
  return d;
}

// numpy's mean over the channel axis in float32: sum channels in order, then divide.
std::vector<float> mix_to_mono(const Decoded& d) {
  if (d.channels == 1) return d.interleaved;
  std::vector<float> mono(static_cast<size_t>(d.frames()));
  const float count = static_cast<float>(d.channels);
  for (size_t f = 0; f < mono.size(); ++f) {
    float sum = 0.0f;
    for (int c = 0; c < d.channels; ++c) sum += d.interleaved[f * d.channels + c];
    mono[f] = sum / count;
  }
  return mono;
}

// python-soxr's resample (as librosa calls it): float32 in and out, HQ, input fed in chunks of 48000·in/out
// samples, output capped at floor(n·out/in + 1), then flushed; librosa then pads with zeros or trims to
// ceil(n·out/in).
std::vector<float> resample(const std::vector<float>& input, int in_rate, int out_rate, const std::string& path) {
  const double ratio = static_cast<double>(out_rate) / in_rate;
  const size_t capacity = static_cast<size_t>(static_cast<double>(input.size()) * out_rate / in_rate + 1);
  const size_t chunk = static_cast<size_t>(48000.0 * in_rate / out_rate);
  soxr_error_t error = nullptr;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  std::unique_ptr<struct soxr, void (*)(soxr_t)> resampler(
      soxr_create(in_rate, out_rate, 1, &error, &io, &quality, nullptr), soxr_delete);
  VEOMNI_INPUT_CHECK(error == nullptr, "{}: libsoxr cannot resample {} -> {} Hz: {}", path, in_rate, out_rate, error);

  std::vector<float> output(capacity);
  size_t produced = 0, done = 0;
  for (size_t start = 0; start < input.size() && !error; start += chunk) {
    error = soxr_process(resampler.get(), input.data() + start, std::min(chunk, input.size() - start), nullptr,
                         output.data() + produced, capacity - produced, &done);
    produced += done;
  }
  if (!error) {
    error = soxr_process(resampler.get(), nullptr, 0, nullptr, output.data() + produced, capacity - produced, &done);
    produced += done;
  }
  VEOMNI_CHECK(error == nullptr, "{}: libsoxr failed resampling {} -> {} Hz: {}", path, in_rate, out_rate, error);
  output.resize(produced);
  output.resize(static_cast<size_t>(std::ceil(static_cast<double>(input.size()) * ratio)), 0.0f);
  return output;
}

}  // namespace

std::vector<float> decode_audio(const std::string& path, int target_rate) {
  VEOMNI_INPUT_CHECK(target_rate > 0, "{}: target sampling rate must be positive, got {}", path, target_rate);
  const Decoded decoded = decode_file(path);
  std::vector<float> mono = mix_to_mono(decoded);
  if (decoded.rate == target_rate) return mono;
  return resample(mono, decoded.rate, target_rate, path);
}

}  // namespace veomni
