// Printing a dataset's header and a per-key content digest (for `veomni-preprocess info`).
#include "data/dataset_digest.h"

#include <spdlog/fmt/fmt.h>

#include <map>

#include "data/dataset_reader.h"
#include "data/tokenizer_sha256.h"

namespace veomni {

namespace {

// Appends a sample's tensor, its shape first so that the same bytes split differently digest differently.
void append_tensor(std::string& bytes, const Tensor& tensor) {
  for (int64_t d : tensor.shape()) bytes.append(reinterpret_cast<const char*>(&d), sizeof(d));
  bytes.append(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
}

}  // namespace

std::vector<std::string> describe_dataset(const std::string& path) {
  const DatasetReader reader(path);
  const DatasetInfo& info = reader.info();
  std::vector<std::string> lines = {
      "path: " + path,
      "kind: " + info.kind,
      fmt::format("producer: {} {}", info.producer, info.producer_version),
      "packing: " + info.packing,
      fmt::format("max_seq_len: {}", info.max_seq_len),
      "tokenizer: " + info.tokenizer,
      "chat_template: " + (info.chat_template.empty() ? std::string("(not recorded)") : info.chat_template),
      "chat_template_kwargs: " + (info.chat_template_kwargs.empty() ? std::string("{}") : info.chat_template_kwargs),
      fmt::format("files: {}", reader.shards().size()),
      fmt::format("samples: {}", reader.num_samples()),
  };
  int64_t tokens = 0;
  for (int64_t i = 0; i < reader.num_samples(); ++i) tokens += reader.sequence_length(i);
  lines.push_back(fmt::format("tokens: {}", tokens));
  // The digest of the samples' digests: memory stays at one sample and 64 bytes a sample, whatever the set's size.
  for (const KeyInfo& key : reader.keys()) {
    std::string digests;
    for (int64_t i = 0; i < reader.num_samples(); ++i) {
      std::string bytes;
      append_tensor(bytes, reader.read(i, {key.name}).at(key.name));
      digests += sha256_hex(bytes);
    }
    lines.push_back(fmt::format("key {}: {} sha256 {}", key.name, key.describe(), sha256_hex(digests)));
  }
  return lines;
}

}  // namespace veomni
