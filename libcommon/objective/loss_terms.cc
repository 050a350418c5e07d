// Scalar helpers shared by the objectives' loss functions.
#include "objective/loss_terms.h"

#include <cmath>

namespace veomni::objective {

double log_sigmoid(double x) { return x >= 0.0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

double sigmoid(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

MaxShares max_shares(double a, double b) {
  if (a > b) return {1.0, 0.0};
  if (b > a) return {0.0, 1.0};
  return {0.5, 0.5};
}

double clamp_slope(double x, double lo, double hi) { return x >= lo && x <= hi ? 1.0 : 0.0; }

}  // namespace veomni::objective
