// 16-bit PCM WAV through libsndfile's virtual I/O into memory, then one atomic file write.
#include "media/audio_encode.h"

#include <sndfile.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "io/atomic_file.h"

namespace veomni {

namespace {

// A growing byte buffer libsndfile writes into (it seeks back to finish the header on close).
struct GrowingBuffer {
  std::string bytes;
  sf_count_t position = 0;
};

sf_count_t buffer_length(void* user) { return static_cast<sf_count_t>(static_cast<GrowingBuffer*>(user)->bytes.size()); }

sf_count_t buffer_seek(sf_count_t offset, int whence, void* user) {
  auto* b = static_cast<GrowingBuffer*>(user);
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? b->position
                                                                     : static_cast<sf_count_t>(b->bytes.size());
  b->position = std::max<sf_count_t>(base + offset, 0);
  return b->position;
}

sf_count_t buffer_read(void* destination, sf_count_t count, void* user) {
  auto* b = static_cast<GrowingBuffer*>(user);
  const sf_count_t n = std::clamp<sf_count_t>(static_cast<sf_count_t>(b->bytes.size()) - b->position, 0, count);
  std::memcpy(destination, b->bytes.data() + b->position, static_cast<size_t>(n));
  b->position += n;
  return n;
}

sf_count_t buffer_write(const void* source, sf_count_t count, void* user) {
  auto* b = static_cast<GrowingBuffer*>(user);
  const auto end = static_cast<size_t>(b->position + count);
  if (end > b->bytes.size()) b->bytes.resize(end);
  std::memcpy(b->bytes.data() + b->position, source, static_cast<size_t>(count));
  b->position += count;
  return count;
}

sf_count_t buffer_tell(void* user) { return static_cast<GrowingBuffer*>(user)->position; }

struct SndfileWriterCloser {
  void operator()(SNDFILE* file) const { sf_close(file); }
};

}  // namespace

std::string encode_wav(std::span<const float> samples, int rate) {
  VEOMNI_CHECK(rate > 0, "WAV sample rate {}", rate);
  GrowingBuffer buffer;
  SF_VIRTUAL_IO io{buffer_length, buffer_seek, buffer_read, buffer_write, buffer_tell};
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  {
    std::unique_ptr<SNDFILE, SndfileWriterCloser> file(sf_open_virtual(&io, SFM_WRITE, &info, &buffer));
    VEOMNI_CHECK(file != nullptr, "libsndfile cannot open a WAV writer: {}", sf_strerror(nullptr));
    sf_command(file.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);  // beyond [-1, 1] saturates instead of wrapping
    const auto frames = static_cast<sf_count_t>(samples.size());
    VEOMNI_CHECK(sf_writef_float(file.get(), samples.data(), frames) == frames, "libsndfile wrote a short WAV: {}",
                 sf_strerror(file.get()));
  }  // closing finishes the header
  return std::move(buffer.bytes);
}

void write_wav_file(const std::string& path, std::span<const float> samples, int rate) {
  const std::string bytes = encode_wav(samples, rate);
  AtomicFileWriter writer(path);
  writer.write(bytes);
  writer.commit();
}

}  // namespace veomni
