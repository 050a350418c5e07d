// Tokenizer throughput (tokens/s, MB/s) on one thread and on all; scripts/bench_hf_tokenizer.py is the HF twin.
#include "data/tokenizer.h"

#include <spdlog/fmt/fmt.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "data/text_preprocess_parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> read_corpus(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> texts;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  return texts;
}

struct Rate {
  double seconds = 0;
  int64_t tokens = 0;
  double megabytes = 0;
};

// Encodes the whole corpus repeatedly for at least min_seconds; the first pass (cold piece caches) counts too.
Rate measure(const veomni::Tokenizer& tokenizer, const std::vector<std::string>& texts, int threads,
             double min_seconds) {
  Rate rate;
  const auto start = Clock::now();
  do {
    std::atomic<int64_t> tokens{0};
    veomni::parallel_for(texts.size(), threads,
                         [&](size_t i) { tokens += static_cast<int64_t>(tokenizer.encode(texts[i]).size()); });
    rate.tokens += tokens;
    for (const std::string& text : texts) rate.megabytes += static_cast<double>(text.size()) / 1e6;
    rate.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  } while (rate.seconds < min_seconds);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: bench_tokenizer TOKENIZER_JSON CORPUS_JSONL [MIN_SECONDS]\n"
                 "  make the corpus with: python3 scripts/bench_hf_tokenizer.py --make-corpus CORPUS_JSONL\n");
    return 2;
  }
  const double min_seconds = argc > 3 ? std::stod(argv[3]) : 3.0;
  try {
    const auto load_start = Clock::now();
    const veomni::Tokenizer tokenizer = veomni::Tokenizer::from_file(argv[1]);
    const double load = std::chrono::duration<double>(Clock::now() - load_start).count();
    const std::vector<std::string> texts = read_corpus(argv[2]);
    double megabytes = 0;
    for (const std::string& text : texts) megabytes += static_cast<double>(text.size()) / 1e6;
    fmt::print("tokenizer: {} (loaded in {:.2f} s)\ncorpus: {} ({} documents, {:.2f} MB)\n", tokenizer.fingerprint(),
               load, argv[2], texts.size(), megabytes);
    const int all = veomni::resolve_threads(0);
    for (int threads : all > 1 ? std::vector<int>{1, all} : std::vector<int>{1}) {
      const Rate r = measure(tokenizer, texts, threads, min_seconds);
      fmt::print("threads {}: {:.0f} tokens/s, {:.2f} MB/s ({} tokens in {:.2f} s)\n", threads, r.tokens / r.seconds,
                 r.megabytes / r.seconds, r.tokens, r.seconds);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
