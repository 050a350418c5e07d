// Reading a tokenizer.json into a Tokenizer: checks that every stage is one this implementation reproduces exactly.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/tokenizer_sha256.h"
#include "io/json_file.h"

namespace veomni {

using json = nlohmann::json;

struct TokenizerLoader {
  Tokenizer& tok;
  const std::string& source;

  std::string type_of(const json& stage) const {
    return stage.is_object() && stage.contains("type") && stage["type"].is_string() ? stage["type"].get<std::string>()
                                                                                    : stage.dump();
  }

  // null, NFC, or a Sequence of NFC: the only normalisers byte-level BPE tokenizers of the Qwen family use.
  void normalizer(const json& spec) {
    if (spec.is_null()) return;
    const std::string type = type_of(spec);
    if (type == "NFC") {
      tok.nfc_ = true;
      return;
    }
    if (type == "Sequence" && spec.contains("normalizers") && spec["normalizers"].is_array()) {
      for (const json& step : spec["normalizers"]) normalizer(step);
      return;
    }
    throw InputError(fmt::format("{}: normalizer {} is not supported (only NFC)", source, type));
  }

  void split_step(const json& spec) {
    const std::string behavior = spec.value("behavior", "");
    VEOMNI_INPUT_CHECK(behavior == "Isolated", "{}: Split behavior '{}' is not supported (only Isolated)", source,
                       behavior);
    VEOMNI_INPUT_CHECK(!spec.value("invert", false), "{}: Split with invert is not supported", source);
    const json& pattern = spec.contains("pattern") ? spec["pattern"] : json();
    if (pattern.contains("Regex") && pattern["Regex"].is_string())
      return tok.pre_tokenizer_.add(RegexSplit(pattern["Regex"].get<std::string>(), false));
    if (pattern.contains("String") && pattern["String"].is_string())
      return tok.pre_tokenizer_.add(RegexSplit(pattern["String"].get<std::string>(), true));
    throw InputError(fmt::format("{}: Split pattern {} is neither {{\"Regex\": ...}} nor {{\"String\": ...}}", source,
                                 pattern.dump()));
  }

  // Returns whether a ByteLevel step was seen (the BPE vocabulary is spelled in its alphabet, so one is needed).
  bool pre_tokenizer(const json& spec) {
    if (spec.is_null()) return false;
    const std::string type = type_of(spec);
    if (type == "Sequence" && spec.contains("pretokenizers") && spec["pretokenizers"].is_array()) {
      bool byte_level = false;
      for (const json& step : spec["pretokenizers"]) byte_level = pre_tokenizer(step) || byte_level;
      return byte_level;
    }
    if (type == "Split") {
      split_step(spec);
      return false;
    }
    if (type == "ByteLevel") {
      VEOMNI_INPUT_CHECK(!spec.value("add_prefix_space", false), "{}: ByteLevel add_prefix_space is not supported",
                         source);
      if (spec.value("use_regex", true)) tok.pre_tokenizer_.add(RegexSplit(kGpt2SplitPattern, false));
      return true;
    }
    throw InputError(
        fmt::format("{}: pre_tokenizer {} is not supported (Split, ByteLevel or a Sequence of them)", source, type));
  }

  // Stages that must not change the ids (post-processor) or the bytes (decoder) of a byte-level tokenizer.
  void passive_stage(const json& spec, const char* name) {
    if (spec.is_null()) return;
    const std::string type = type_of(spec);
    VEOMNI_INPUT_CHECK(type == "ByteLevel", "{}: {} {} is not supported (only ByteLevel or null)", source, name, type);
  }

  void added_tokens(const json& list) {
    if (list.is_null()) return;
    VEOMNI_INPUT_CHECK(list.is_array(), "{}: added_tokens is not an array", source);
    for (const json& entry : list) {
      VEOMNI_INPUT_CHECK(entry.is_object() && entry.contains("id") && entry["id"].is_number_integer() &&
                             entry["id"].get<int64_t>() >= 0 && entry.contains("content") &&
                             entry["content"].is_string(),
                         "{}: added token {} needs an integer id and a string content", source, entry.dump());
      AddedToken token{entry["id"].get<int32_t>(), entry["content"].get<std::string>(), entry.value("special", false),
                       entry.value("normalized", false)};
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        VEOMNI_INPUT_CHECK(!entry.value(flag, false), "{}: added token '{}' sets {}, which is not supported", source,
                           token.content, flag);
      (token.normalized ? tok.normalized_matcher_ : tok.raw_matcher_).add(token);
      tok.added_.push_back(std::move(token));
    }
    std::sort(tok.added_.begin(), tok.added_.end(),
              [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  }

  void load(const json& spec) {
    VEOMNI_INPUT_CHECK(spec.is_object() && spec.contains("model"), "{}: not a tokenizer.json (no \"model\")", source);
    const auto stage = [&](const char* key) { return spec.contains(key) ? spec[key] : json(); };
    tok.bpe_ = BpeModel::from_json(spec["model"], source);
    normalizer(stage("normalizer"));
    VEOMNI_INPUT_CHECK(pre_tokenizer(stage("pre_tokenizer")),
                       "{}: the pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported",
                       source);
    passive_stage(stage("post_processor"), "post_processor");
    passive_stage(stage("decoder"), "decoder");
    added_tokens(stage("added_tokens"));
    tok.id_limit_ = tok.bpe_.id_limit();
    if (!tok.added_.empty()) tok.id_limit_ = std::max(tok.id_limit_, tok.added_.back().id + 1);
  }
};

Tokenizer Tokenizer::from_json(const json& spec, const std::string& source, std::string fingerprint) {
  static std::atomic<uint64_t> next_serial{1};
  Tokenizer tok;
  tok.source_ = source;
  tok.fingerprint_ = std::move(fingerprint);
  tok.serial_ = next_serial++;
  TokenizerLoader{tok, source}.load(spec);
  return tok;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  const std::string text = read_text_file(path);
  const std::string name = std::filesystem::path(path).filename().string();
  return from_json(parse_json(text, path), path, fmt::format("{} sha256:{}", name, sha256_hex(text)));
}

}  // namespace veomni
