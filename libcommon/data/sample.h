// One training sample as stored in a dataset: tensors by key name ("input_ids", "pixel_values", ...).
#pragma once
#include <map>
#include <string>

#include "core/tensor.h"

namespace veomni {

// Keys in name order (the order the dataset writer and reader use).
using Sample = std::map<std::string, Tensor>;

// The tensor under `key`; InputError naming `context` (e.g. "train.h5 sample 12") and the keys present if absent.
const Tensor& sample_key(const Sample& sample, const std::string& key, const std::string& context);

// "input_ids i64[1952], labels i64[1952], ..." for logs and errors.
std::string describe_sample(const Sample& sample);

}  // namespace veomni
