// Token losses to per-source sums by the packed row's source spans; the step's per-source metrics.
#include "train/source_losses.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/batch.h"

namespace veomni {

void add_source_losses(const MultimodalBatch& batch, const Tensor& token_losses, double* sums, size_t num_sources) {
  if (batch.source_spans.empty()) return;
  const Tensor losses = token_losses.to(Device::cpu());
  const Tensor targets = batch.text.target_ids.to(Device::cpu());
  VEOMNI_CHECK(losses.numel() == targets.numel(), "{} token losses for {} targets", losses.numel(), targets.numel());
  const float* loss = losses.data<float>();
  const int64_t* target = targets.data<int64_t>();
  const int64_t offset = batch.text.sp_offset;
  size_t span = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    if (target[i] == kIgnoreIndex) continue;
    const int64_t row = offset + i;
    while (span < batch.source_spans.size() && batch.source_spans[span].end <= row) ++span;
    VEOMNI_CHECK(span < batch.source_spans.size() && batch.source_spans[span].begin <= row,
                 "target at row {} lies in no sample span", row);
    const auto source = static_cast<size_t>(batch.source_spans[span].source);
    VEOMNI_CHECK(source < num_sources, "source {} of {}", source, num_sources);
    sums[2 * source] += loss[i];
    sums[2 * source + 1] += 1.0;
  }
}

std::vector<std::pair<std::string, double>> source_loss_metrics(const std::vector<std::string>& names,
                                                                const double* sums) {
  std::vector<std::pair<std::string, double>> metrics;
  for (size_t s = 0; s < names.size(); ++s) {
    const double count = sums[2 * s + 1];
    metrics.emplace_back("loss_" + names[s], count > 0 ? sums[2 * s] / count : std::numeric_limits<double>::quiet_NaN());
  }
  for (size_t s = 0; s < names.size(); ++s) metrics.emplace_back("tokens_" + names[s], sums[2 * s + 1]);
  return metrics;
}

void hold_absent_source_losses(std::vector<std::pair<std::string, double>>& values, const MetricsLog& log) {
  for (auto& [key, value] : values) {
    if (!key.starts_with("loss_")) continue;
    const std::string tokens_key = "tokens_" + key.substr(5);
    for (const auto& [other, count] : values) {
      if (other != tokens_key || count > 0) continue;
      value = log.contains(key) && log.num_steps() > 0 ? log.values(key).back() : 0.0;
    }
  }
}

}  // namespace veomni
