// Video decoding with libavformat/libavcodec and RGB conversion with libswscale; errors name the file.
#include "media/video_decode.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.h"

namespace veomni {
namespace {

std::string av_error_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof(text));
  return text;
}

struct FormatCloser {
  void operator()(AVFormatContext* context) const { avformat_close_input(&context); }
};
struct CodecFreer {
  void operator()(AVCodecContext* context) const { avcodec_free_context(&context); }
};
struct PacketFreer {
  void operator()(AVPacket* packet) const { av_packet_free(&packet); }
};
struct FrameFreer {
  void operator()(AVFrame* frame) const { av_frame_free(&frame); }
};
struct ScalerFreer {
  void operator()(SwsContext* context) const { sws_freeContext(context); }
};
using FramePtr = std::unique_ptr<AVFrame, FrameFreer>;

FramePtr new_frame() {
  FramePtr frame(av_frame_alloc());
  VEOMNI_CHECK(frame != nullptr, "out of memory allocating a video frame");
  return frame;
}

// One video stream of one file, read packet by packet and decoded in presentation order.
class VideoReader {
 public:
  explicit VideoReader(std::string path) : path_(std::move(path)), packet_(av_packet_alloc()) {
    VEOMNI_CHECK(packet_ != nullptr, "out of memory allocating a packet");
    VEOMNI_INPUT_CHECK(std::filesystem::is_regular_file(path_), "{}: video file not found", path_);
    AVFormatContext* raw = nullptr;
    const int opened = avformat_open_input(&raw, path_.c_str(), nullptr, nullptr);
    VEOMNI_INPUT_CHECK(opened >= 0, "{}: not a readable video container ({})", path_, av_error_text(opened));
    format_.reset(raw);
    const int found = avformat_find_stream_info(format_.get(), nullptr);
    VEOMNI_INPUT_CHECK(found >= 0, "{}: cannot read the stream headers ({})", path_, av_error_text(found));
    stream_index_ = find_video_stream();
  }

  const std::string& path() const { return path_; }
  AVStream* stream() const { return format_->streams[stream_index_]; }

  // Packets of the video stream that the decoder will turn into frames (pre-roll the container discards excluded).
  int64_t count_packets() {
    int64_t count = 0;
    while (read_stream_packet()) {
      if ((packet_->flags & AV_PKT_FLAG_DISCARD) == 0) ++count;
      av_packet_unref(packet_.get());
    }
    return count;
  }

  // The next frame in presentation order into `frame`; false after the last one.
  bool next_frame(AVFrame* frame) {
    if (!decoder_) open_decoder();
    for (;;) {
      const int received = avcodec_receive_frame(decoder_.get(), frame);
      if (received == 0) {
        ++frames_decoded_;
        return true;
      }
      if (received == AVERROR_EOF) return false;
      VEOMNI_INPUT_CHECK(received == AVERROR(EAGAIN), "{}: corrupt video data after {} frames ({})", path_,
                         frames_decoded_, av_error_text(received));
      feed_decoder();
    }
  }

 private:
  int find_video_stream() {
    const AVCodec* codec = nullptr;
    const int index = av_find_best_stream(format_.get(), AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    VEOMNI_INPUT_CHECK(index != AVERROR_STREAM_NOT_FOUND, "{}: no video stream in the file", path_);
    VEOMNI_INPUT_CHECK(index != AVERROR_DECODER_NOT_FOUND, "{}: unsupported video codec '{}' (no decoder in this "
                       "FFmpeg)", path_, avcodec_get_name(first_video_codec()));
    VEOMNI_INPUT_CHECK(index >= 0, "{}: cannot select a video stream ({})", path_, av_error_text(index));
    const AVStream* stream = format_->streams[index];
    VEOMNI_INPUT_CHECK((stream->disposition & AV_DISPOSITION_ATTACHED_PIC) == 0,
                       "{}: no video stream in the file (only attached cover art)", path_);
    decoder_codec_ = codec;
    return index;
  }

  AVCodecID first_video_codec() const {
    for (unsigned i = 0; i < format_->nb_streams; ++i)
      if (format_->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO)
        return format_->streams[i]->codecpar->codec_id;
    return AV_CODEC_ID_NONE;
  }

  void open_decoder() {
    decoder_.reset(avcodec_alloc_context3(decoder_codec_));
    VEOMNI_CHECK(decoder_ != nullptr, "out of memory allocating a decoder");
    const int copied = avcodec_parameters_to_context(decoder_.get(), stream()->codecpar);
    VEOMNI_INPUT_CHECK(copied >= 0, "{}: bad codec parameters ({})", path_, av_error_text(copied));
    const int opened = avcodec_open2(decoder_.get(), decoder_codec_, nullptr);
    VEOMNI_INPUT_CHECK(opened >= 0, "{}: cannot open the {} decoder ({})", path_, decoder_codec_->name,
                       av_error_text(opened));
  }

  // Reads the next packet of our stream into packet_; false at the end of the file.
  bool read_stream_packet() {
    for (;;) {
      const int read = av_read_frame(format_.get(), packet_.get());
      if (read == AVERROR_EOF) return false;
      VEOMNI_INPUT_CHECK(read >= 0, "{}: corrupt or truncated container ({})", path_, av_error_text(read));
      if (packet_->stream_index == stream_index_) return true;
      av_packet_unref(packet_.get());
    }
  }

  // Sends the next packet, or the end-of-stream flush once the file is exhausted.
  void feed_decoder() {
    const bool more = read_stream_packet();
    const int sent = avcodec_send_packet(decoder_.get(), more ? packet_.get() : nullptr);
    if (more) av_packet_unref(packet_.get());
    VEOMNI_INPUT_CHECK(sent >= 0 || sent == AVERROR_EOF, "{}: corrupt video data after {} frames ({})", path_,
                       frames_decoded_, av_error_text(sent));
  }

  std::string path_;
  std::unique_ptr<AVFormatContext, FormatCloser> format_;
  std::unique_ptr<AVCodecContext, CodecFreer> decoder_;
  std::unique_ptr<AVPacket, PacketFreer> packet_;
  const AVCodec* decoder_codec_ = nullptr;
  int stream_index_ = -1;
  int64_t frames_decoded_ = 0;
};

double rational_value(AVRational r) { return r.num > 0 && r.den > 0 ? av_q2d(r) : 0.0; }

// Converts decoded frames to packed RGB24 of the same size.
class RgbConverter {
 public:
  explicit RgbConverter(std::string path) : path_(std::move(path)), rgb_(new_frame()) {}

  RgbImage convert(const AVFrame& frame) {
    const auto format = static_cast<AVPixelFormat>(frame.format);
    const AVPixFmtDescriptor* descriptor = av_pix_fmt_desc_get(format);
    VEOMNI_INPUT_CHECK(descriptor != nullptr, "{}: decoded frames have no pixel format", path_);
    scaler_.reset(sws_getCachedContext(scaler_.release(), frame.width, frame.height, format, frame.width,
                                       frame.height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
    VEOMNI_INPUT_CHECK(scaler_ != nullptr, "{}: cannot convert {} frames of {}x{} to RGB", path_, descriptor->name,
                       frame.width, frame.height);
    if ((descriptor->flags & AV_PIX_FMT_FLAG_RGB) == 0) set_colour_matrix(frame);
    ensure_rgb_buffer(frame.width, frame.height);
    sws_scale(scaler_.get(), frame.data, frame.linesize, 0, frame.height, rgb_->data, rgb_->linesize);
    RgbImage image;
    image.height = frame.height;
    image.width = frame.width;
    const auto row_bytes = static_cast<size_t>(frame.width) * 3;
    image.pixels.resize(row_bytes * static_cast<size_t>(frame.height));
    for (int y = 0; y < frame.height; ++y)
      std::memcpy(image.pixels.data() + row_bytes * static_cast<size_t>(y), rgb_->data[0] + y * rgb_->linesize[0],
                  row_bytes);
    return image;
  }

 private:
  // The frame's own matrix (unspecified -> BT.601) and range (limited unless tagged full); RGB out is full range.
  void set_colour_matrix(const AVFrame& frame) {
    const int* source = sws_getCoefficients(frame.colorspace);
    const int source_full = frame.color_range == AVCOL_RANGE_JPEG ? 1 : 0;
    sws_setColorspaceDetails(scaler_.get(), source, source_full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0,
                             1 << 16, 1 << 16);
  }

  // A padded buffer: swscale's SIMD paths may write past the row end of a tightly packed one.
  void ensure_rgb_buffer(int width, int height) {
    if (rgb_->width == width && rgb_->height == height) return;
    av_frame_unref(rgb_.get());
    rgb_->format = AV_PIX_FMT_RGB24;
    rgb_->width = width;
    rgb_->height = height;
    VEOMNI_CHECK(av_frame_get_buffer(rgb_.get(), 0) >= 0, "out of memory for a {}x{} RGB frame", width, height);
  }

  std::string path_;
  std::unique_ptr<SwsContext, ScalerFreer> scaler_;
  FramePtr rgb_;
};

}  // namespace

VideoInfo probe_video(const std::string& path) {
  VideoReader reader(path);
  const AVStream* stream = reader.stream();
  VideoInfo info;
  info.width = stream->codecpar->width;
  info.height = stream->codecpar->height;
  info.fps = rational_value(stream->avg_frame_rate);
  if (info.fps <= 0) info.fps = rational_value(stream->r_frame_rate);
  VEOMNI_INPUT_CHECK(info.fps > 0, "{}: the video stream states no frame rate", path);
  info.num_frames = reader.count_packets();
  VEOMNI_INPUT_CHECK(info.num_frames > 0, "{}: the video stream holds no frames", path);
  info.duration_seconds = static_cast<double>(info.num_frames) / info.fps;
  return info;
}

std::vector<RgbImage> decode_video_frames(const std::string& path, const std::vector<int64_t>& frame_indices) {
  for (size_t i = 0; i < frame_indices.size(); ++i)
    VEOMNI_CHECK(frame_indices[i] >= 0 && (i == 0 || frame_indices[i] >= frame_indices[i - 1]),
                 "frame indices must be ascending and non-negative (index {} at position {})", frame_indices[i], i);
  std::vector<RgbImage> frames;
  if (frame_indices.empty()) return frames;
  VideoReader reader(path);
  RgbConverter converter(path);
  FramePtr frame = new_frame();
  size_t wanted = 0;
  for (int64_t index = 0; wanted < frame_indices.size(); ++index) {
    VEOMNI_INPUT_CHECK(reader.next_frame(frame.get()), "{}: frame {} was asked for but only {} frames decode", path,
                       frame_indices[wanted], index);
    if (frame_indices[wanted] == index) {
      RgbImage image = converter.convert(*frame);
      VEOMNI_INPUT_CHECK(frames.empty() || (image.height == frames[0].height && image.width == frames[0].width),
                         "{}: frame {} is {}x{} but earlier frames are {}x{}; videos that change size are not "
                         "supported", path, index, image.width, image.height, frames[0].width, frames[0].height);
      while (wanted < frame_indices.size() && frame_indices[wanted] == index) {
        frames.push_back(image);
        ++wanted;
      }
    }
    av_frame_unref(frame.get());
  }
  return frames;
}

SampledVideo decode_video(const std::string& path, const VideoSamplingConfig& config) {
  SampledVideo video;
  video.info = probe_video(path);
  try {
    video.frame_indices = sample_frame_indices(video.info.num_frames, video.info.fps, config);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", path, e.what()));
  }
  video.frames = decode_video_frames(path, video.frame_indices);
  for (const int64_t index : video.frame_indices)
    video.timestamps_seconds.push_back(static_cast<double>(index) / video.info.fps);
  return video;
}

}  // namespace veomni
