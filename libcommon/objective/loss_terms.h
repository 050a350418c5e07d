// What every objective's loss function returns: its loss contribution and metric contributions, both already divided
// by the global batch's denominators, so that summing them over micro-batches and ranks gives the step's values
// whatever the layout.
#pragma once
#include <map>
#include <string>

namespace veomni::objective {

// Metric name (VeOmni's or verl's, as written to log_dict.json) -> this call's contribution to the step's value.
using Metrics = std::map<std::string, double>;

// log(sigmoid(x)) without overflow for large |x|.
double log_sigmoid(double x);
// sigmoid(x) without overflow for large |x|.
double sigmoid(double x);

// d/da and d/db of max(a, b) as torch.maximum gives them: all to the larger, half each on a tie.
struct MaxShares {
  double a = 0.0, b = 0.0;
};
MaxShares max_shares(double a, double b);

// d clamp(x, lo, hi) / dx as torch gives it: 1 inside [lo, hi] (bounds included), 0 outside.
double clamp_slope(double x, double lo, double hi);

}  // namespace veomni::objective
