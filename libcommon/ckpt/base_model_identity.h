// The frozen base model an adapter (LoRA) checkpoint was trained on: where it was loaded from and a checksum of each
// of its weight files (or, for a random-init base, the seed), so that a resume or a merge finds a changed base.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace veomni {

struct BaseWeightFile {
  std::string file;       // name inside model_path (or the file itself when model_path names one)
  uint64_t checksum = 0;  // file_checksum
  bool operator==(const BaseWeightFile&) const = default;
};

struct BaseModelIdentity {
  std::string model_path;                    // model.model_path; "" = random initialisation
  std::vector<BaseWeightFile> weight_files;  // its *.safetensors files, sorted by name (empty for a random init)
  int64_t seed = 0;                          // random initialisation: its seed (the config is the checkpoint's)
  bool random_init() const { return model_path.empty(); }
  bool operator==(const BaseModelIdentity&) const = default;
};

// The identity of the base loaded from model_path (a HF directory or one .safetensors file), or of the random
// initialisation seeded by `seed` when model_path is empty. Reads every weight file once (InputError naming a file
// that cannot be read, or a directory without *.safetensors).
BaseModelIdentity identify_base_model(const std::string& model_path, int64_t seed);

// InputError (exit 2) when `now` is not the base `saved` describes: the file, both checksums, both paths and a hint.
// `checkpoint` names the adapter checkpoint in the message.
void check_same_base_model(const BaseModelIdentity& saved, const BaseModelIdentity& now, const std::string& checkpoint);

}  // namespace veomni
