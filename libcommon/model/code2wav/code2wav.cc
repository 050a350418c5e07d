// Code2wav: parameter registration in transformers' order and names, codebook embedding and the forward chain.
#include "model/code2wav/code2wav.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "core/error.h"
#include "kernels/ops.h"
#include "model/hf_loader.h"

namespace veomni {

Code2Wav::Code2Wav(const Code2WavConfig& config, const SpeechModelOptions& options)
    : config_(config), options_(options) {
  validate_code2wav_config(config_, "code2wav config");
  const std::string& p = config_.param_prefix;
  const int64_t hidden = config_.hidden_size;
  store_.begin_group("code2wav.pre_transformer");
  pre_transformer_ = std::make_unique<Code2WavTransformer>(store_, config_, p + "pre_transformer.");
  store_.begin_group("code2wav.embedding");
  code_embedding_ = store_.add(p + "code_embedding.weight", {config_.codebook_size * config_.num_quantizers, hidden});
  store_.begin_group("code2wav.upsample");
  for (size_t i = 0; i < config_.upsampling_ratios.size(); ++i) {
    const std::string stage = p + "upsample." + std::to_string(i);
    const int64_t factor = config_.upsampling_ratios[i];
    upsample_convs_.push_back(std::make_unique<CausalTransConv1d>(store_, stage + ".0", hidden, hidden, factor, factor));
    upsample_blocks_.push_back(std::make_unique<ConvNeXtBlock>(store_, stage + ".1", hidden));
  }
  store_.begin_group("code2wav.decoder");
  decoder_in_ = std::make_unique<CausalConv1d>(store_, p + "decoder.0", hidden, config_.decoder_dim, 7);
  const auto blocks = static_cast<int64_t>(config_.upsample_rates.size());
  for (int64_t i = 0; i < blocks; ++i)
    decoder_blocks_.push_back(std::make_unique<DecoderBlock>(store_, p + "decoder." + std::to_string(i + 1),
                                                             config_.decoder_channels(i),
                                                             config_.decoder_channels(i + 1),
                                                             config_.upsample_rates[static_cast<size_t>(i)]));
  const int64_t out_channels = config_.decoder_channels(blocks);
  decoder_act_ = std::make_unique<SnakeBeta>(store_, p + "decoder." + std::to_string(blocks + 1), out_channels);
  decoder_out_ = std::make_unique<CausalConv1d>(store_, p + "decoder." + std::to_string(blocks + 2), out_channels, 1, 7);
  store_.materialize_all(options_.device, options_.compute_dtype);
}

void Code2Wav::load(const WeightSource& source) { load_hf_weights(store_, source); }

Tensor Code2Wav::embed(const std::vector<int64_t>& codes, int64_t frames) const {
  const int64_t nq = config_.num_quantizers;
  const Device device = options_.device;
  Tensor sum = Tensor::zeros({frames, config_.hidden_size}, options_.compute_dtype, device);
  Tensor rows = Tensor::empty({frames, config_.hidden_size}, options_.compute_dtype, device);
  std::vector<int64_t> ids(static_cast<size_t>(frames));
  for (int64_t q = 0; q < nq; ++q) {
    // Quantizer q's codes index its own block of the shared table (transformers' code_offset).
    for (int64_t t = 0; t < frames; ++t)
      ids[static_cast<size_t>(t)] = codes[static_cast<size_t>(t * nq + q)] + q * config_.codebook_size;
    ops::embedding_forward(Tensor::from_vector(ids, {frames}).to(device), code_embedding_->value, rows);
    ops::add_(sum, rows);
  }
  ops::scale_(sum, 1.0f / static_cast<float>(nq));
  return sum;
}

Tensor Code2Wav::forward(const std::vector<int64_t>& codes) const {
  const int64_t nq = config_.num_quantizers;
  const auto count = static_cast<int64_t>(codes.size());
  VEOMNI_INPUT_CHECK(count > 0 && count % nq == 0,
                     "code2wav: {} codes are not whole frames of num_quantizers = {} codes", count, nq);
  for (int64_t i = 0; i < count; ++i)
    VEOMNI_INPUT_CHECK(codes[static_cast<size_t>(i)] >= 0 && codes[static_cast<size_t>(i)] < config_.codebook_size,
                       "code2wav: code {} of frame {} (quantizer {}) is outside the codebook [0, {})",
                       codes[static_cast<size_t>(i)], i / nq, i % nq, config_.codebook_size);
  const int64_t frames = count / nq;
  Tensor h = pre_transformer_->forward(embed(codes, frames));
  for (size_t i = 0; i < upsample_convs_.size(); ++i)
    h = upsample_blocks_[i]->forward(upsample_convs_[i]->forward(h));
  h = decoder_in_->forward(h);
  for (const auto& block : decoder_blocks_) h = block->forward(h);
  Tensor wav = decoder_out_->forward(decoder_act_->forward(h));
  ops::clamp_(wav, -1.0f, 1.0f);
  return wav.view({wav.dim(0)});
}

std::vector<float> Code2Wav::decode(const std::vector<int64_t>& codes) const {
  return forward(codes).to(Device::cpu()).to_dtype(DType::F32).to_float_vector();
}

std::vector<float> Code2Wav::chunked_decode(const std::vector<int64_t>& codes, int64_t chunk_size,
                                           int64_t left_context) const {
  VEOMNI_INPUT_CHECK(chunk_size >= 1 && left_context >= 0,
                     "code2wav: chunk size {} must be positive and left context {} not negative", chunk_size,
                     left_context);
  const int64_t nq = config_.num_quantizers;
  const auto frames = static_cast<int64_t>(codes.size()) / nq;
  VEOMNI_INPUT_CHECK(frames > 0 && frames * nq == static_cast<int64_t>(codes.size()),
                     "code2wav: {} codes are not whole frames of num_quantizers = {} codes", codes.size(), nq);
  std::vector<float> wav;
  for (int64_t start = 0; start < frames;) {
    const int64_t end = std::min(start + chunk_size, frames);
    const int64_t context = start - left_context > 0 ? left_context : start;
    const std::vector<float> piece = decode(std::vector<int64_t>(codes.begin() + (start - context) * nq,
                                                                 codes.begin() + end * nq));
    const auto skip = static_cast<size_t>(std::min<int64_t>(context * config_.total_upsample(),
                                                            static_cast<int64_t>(piece.size())));
    wav.insert(wav.end(), piece.begin() + static_cast<std::ptrdiff_t>(skip), piece.end());
    start = end;
  }
  return wav;
}

}  // namespace veomni
