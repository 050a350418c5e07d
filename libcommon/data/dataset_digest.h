// What a dataset holds, as `veomni-preprocess info` prints it: its header, and per key a digest of every sample's
// values, so two datasets can be compared by content whatever their headers say.
#pragma once
#include <string>
#include <vector>

namespace veomni {

// "name: value" lines: path, kind, producer, packing, max_seq_len, tokenizer, chat_template, chat_template_kwargs,
// files, samples, tokens, then one "key <name>: <schema> sha256 <hex>" per key (the SHA-256 of the samples'
// SHA-256s, each over the sample's shape and bytes, in sample order). InputError as DatasetReader for a file that is
// not a dataset.
std::vector<std::string> describe_dataset(const std::string& path);

}  // namespace veomni
