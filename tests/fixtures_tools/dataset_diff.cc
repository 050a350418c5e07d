// Test support: compares two veomni datasets key by key, sample by sample, within a tolerance (every dtype; a dtype
// that differs is a difference); exit 0 when they agree, 1 at the first difference (printed), 2 when their samples or
// keys differ. usage: dataset_diff A B RTOL ATOL
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/tool.h"
#include "data/dataset_reader.h"

namespace {

int diff_main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: dataset_diff A B RTOL ATOL\n");
    return 2;
  }
  const veomni::DatasetReader a(argv[1]), b(argv[2]);
  const double rtol = std::atof(argv[3]), atol = std::atof(argv[4]);
  if (a.num_samples() != b.num_samples() || a.keys() != b.keys()) {
    std::fprintf(stderr, "dataset_diff: %s and %s differ in samples or keys\n", argv[1], argv[2]);
    return 2;
  }
  double worst = 0;
  for (int64_t s = 0; s < a.num_samples(); ++s) {
    const veomni::Sample x = a.read(s), y = b.read(s);
    for (const auto& [key, tx] : x) {
      const veomni::Tensor& ty = y.at(key);
      if (tx.shape() != ty.shape() || tx.dtype() != ty.dtype()) {
        std::printf("sample %lld key %s: %s vs %s\n", static_cast<long long>(s), key.c_str(), tx.describe().c_str(),
                    ty.describe().c_str());
        return 1;
      }
      for (int64_t i = 0; i < tx.numel(); ++i) {
        const double u = tx.item_as_double(i), v = ty.item_as_double(i), d = std::abs(u - v);
        worst = std::max(worst, d);
        if (!(d <= atol + rtol * std::abs(v))) {
          std::printf("sample %lld key %s[%lld]: %.9g vs %.9g\n", static_cast<long long>(s), key.c_str(),
                      static_cast<long long>(i), u, v);
          return 1;
        }
      }
    }
  }
  std::printf("agree: %lld samples, %zu keys, max abs difference %.3g\n", static_cast<long long>(a.num_samples()),
              a.keys().size(), worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return veomni::run_tool("dataset_diff", [&] { return diff_main(argc, argv); });
}
