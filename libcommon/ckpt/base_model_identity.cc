// Base model identity: checksums of a HF directory's weight files, and the comparison a resume makes.
#include "ckpt/base_model_identity.h"

#include <algorithm>
#include <filesystem>

#include "ckpt/file_checksum.h"
#include "core/error.h"

namespace veomni {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> safetensors_files(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors")
      names.push_back(entry.path().filename().string());
  VEOMNI_INPUT_CHECK(!ec, "{}: cannot list the model's weight files: {}", dir.string(), ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

std::string describe(const BaseModelIdentity& base) {
  return base.random_init() ? fmt::format("a random initialisation (seed {})", base.seed)
                            : fmt::format("'{}' ({} weight file(s))", base.model_path, base.weight_files.size());
}

const BaseWeightFile* find_file(const BaseModelIdentity& base, const std::string& name) {
  for (const BaseWeightFile& f : base.weight_files)
    if (f.file == name) return &f;
  return nullptr;
}

}  // namespace

BaseModelIdentity identify_base_model(const std::string& model_path, int64_t seed) {
  BaseModelIdentity base;
  if (model_path.empty()) {
    base.seed = seed;
    return base;
  }
  base.model_path = model_path;
  std::error_code ec;
  if (fs::is_regular_file(model_path, ec)) {
    base.weight_files.push_back({fs::path(model_path).filename().string(), file_checksum(model_path)});
    return base;
  }
  const std::vector<std::string> names = safetensors_files(model_path);
  VEOMNI_INPUT_CHECK(!names.empty(), "{}: no *.safetensors weight files (model.model_path)", model_path);
  for (const std::string& name : names)
    base.weight_files.push_back({name, file_checksum((fs::path(model_path) / name).string())});
  return base;
}

void check_same_base_model(const BaseModelIdentity& saved, const BaseModelIdentity& now,
                           const std::string& checkpoint) {
  const std::string hint =
      "an adapter checkpoint resumes only on the base it was trained on (hint: set model.model_path to that base, "
      "or start a new run without train.checkpoint.load_path)";
  VEOMNI_INPUT_CHECK(saved.random_init() == now.random_init(),
                     "{}: the adapters were trained on {} but this run's base is {}: {}", checkpoint, describe(saved),
                     describe(now), hint);
  if (saved.random_init()) {
    VEOMNI_INPUT_CHECK(saved.seed == now.seed,
                       "{}: the adapters were trained on a random initialisation with seed {}, this run's has seed "
                       "{}: {}",
                       checkpoint, saved.seed, now.seed, hint);
    return;
  }
  for (const BaseWeightFile& was : saved.weight_files) {
    const BaseWeightFile* is = find_file(now, was.file);
    VEOMNI_INPUT_CHECK(is != nullptr, "{}: the base model's weight file {} (checksum {}, in '{}') is missing from '{}': {}",
                       checkpoint, was.file, format_checksum(was.checksum), saved.model_path, now.model_path, hint);
    VEOMNI_INPUT_CHECK(is->checksum == was.checksum,
                       "{}: the base model's weights changed: {}/{} has checksum {}, the checkpoint recorded {} (of "
                       "'{}/{}'): {}",
                       checkpoint, now.model_path, was.file, format_checksum(is->checksum),
                       format_checksum(was.checksum), saved.model_path, was.file, hint);
  }
  for (const BaseWeightFile& is : now.weight_files)
    VEOMNI_INPUT_CHECK(find_file(saved, is.file) != nullptr,
                       "{}: '{}' holds weight file {} (checksum {}) that the base the adapters were trained on ('{}') "
                       "did not have: {}",
                       checkpoint, now.model_path, is.file, format_checksum(is.checksum), saved.model_path, hint);
}

}  // namespace veomni
