// Qwen3-Omni's code2wav (transformers' Qwen3OmniMoeCode2Wav), forward only: RVQ codec codes [T, num_quantizers]
// -> a 24 kHz waveform in [-1, 1]. The mean of the quantizers' codebook embeddings runs through the
// pre-transformer, the ConvNeXt upsample stages and the SnakeBeta/convolution decoder.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/code2wav/code2wav_config.h"
#include "model/code2wav/code2wav_convs.h"
#include "model/code2wav/code2wav_transformer.h"
#include "model/param.h"
#include "model/weight_source.h"

namespace veomni {

struct SpeechModelOptions {
  Device device = Device::cpu();
  DType compute_dtype = DType::F32;  // parameters and activations (f32 on the CPU reference path)
};

class Code2Wav {
 public:
  // Registers every parameter under `{config.param_prefix}...` (transformers' names) in its own store and
  // materialises them (zeros) on options.device.
  explicit Code2Wav(const Code2WavConfig& config, const SpeechModelOptions& options = {});
  Code2Wav(const Code2Wav&) = delete;
  Code2Wav& operator=(const Code2Wav&) = delete;

  const Code2WavConfig& config() const { return config_; }
  ParamStore& store() { return store_; }
  // Reads every parameter from `source` (a missing or mis-shaped tensor is an InputError naming it and its file).
  void load(const WeightSource& source);

  // codes [T, num_quantizers] row-major (the talker's output: frame t holds its num_quantizers codes), each in
  // [0, codebook_size). Returns the waveform [config().waveform_samples(T)] in options.compute_dtype on
  // options.device, clamped to [-1, 1]. A bad code or count is an InputError.
  Tensor forward(const std::vector<int64_t>& codes) const;
  // The waveform as host floats.
  std::vector<float> decode(const std::vector<int64_t>& codes) const;
  // transformers' chunked_decode: frames in chunks of chunk_size, each decoded after left_context frames before it
  // (all the frames before it when there are no more than that; none for the first chunk) whose samples are then
  // dropped, the pieces concatenated. Bounds the attention and convolution work of long outputs.
  std::vector<float> chunked_decode(const std::vector<int64_t>& codes, int64_t chunk_size = 300,
                                    int64_t left_context = 25) const;

 private:
  Tensor embed(const std::vector<int64_t>& codes, int64_t frames) const;

  Code2WavConfig config_;
  SpeechModelOptions options_;
  ParamStore store_;
  Parameter* code_embedding_;
  std::unique_ptr<Code2WavTransformer> pre_transformer_;
  std::vector<std::unique_ptr<CausalTransConv1d>> upsample_convs_;
  std::vector<std::unique_ptr<ConvNeXtBlock>> upsample_blocks_;
  std::unique_ptr<CausalConv1d> decoder_in_;
  std::vector<std::unique_ptr<DecoderBlock>> decoder_blocks_;
  std::unique_ptr<SnakeBeta> decoder_act_;
  std::unique_ptr<CausalConv1d> decoder_out_;
};

}  // namespace veomni
