// torch's uint8 antialiased bicubic resampling (aten UpSampleKernel, separable path) reimplemented for RGB images.
#include "media/bicubic_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace veomni {
namespace {

// The taps of one output axis: output i reads `count[i]` inputs from `start[i]` with int16 weights at
// weights[i * taps], scaled by 2^precision.
struct AxisFilter {
  std::vector<int64_t> start, count;
  std::vector<int16_t> weights;
  int64_t taps = 0;
  unsigned precision = 0;
};

// Keys' cubic convolution kernel with a = -0.5 (torch uses it when antialiasing, as PIL does).
double cubic_kernel(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// The largest shift that keeps twice the largest weight inside int16 (torch's rule, capped at 22 bits).
unsigned fixed_point_precision(double max_weight) {
  unsigned precision = 0;
  for (; precision < 22; ++precision) {
    const int next_value = static_cast<int>(0.5 + max_weight * (1 << (precision + 1)));
    if (next_value >= (1 << 15)) break;
  }
  return precision;
}

AxisFilter axis_filter(int64_t input_size, int64_t output_size) {
  const double scale = static_cast<double>(input_size) / static_cast<double>(output_size);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;  // half of the 4-tap cubic, widened when shrinking
  const double inverse_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisFilter filter;
  filter.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  filter.start.resize(static_cast<size_t>(output_size));
  filter.count.resize(static_cast<size_t>(output_size));
  std::vector<double> weights(static_cast<size_t>(output_size * filter.taps), 0.0);
  double max_weight = 0.0;
  for (int64_t i = 0; i < output_size; ++i) {
    const double center = scale * (static_cast<double>(i) + 0.5);
    // Truncation toward zero, as torch's static_cast<int64_t>.
    const int64_t first = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    const int64_t count =
        std::clamp(std::min(static_cast<int64_t>(center + support + 0.5), input_size) - first, int64_t{0}, filter.taps);
    double* w = weights.data() + i * filter.taps;
    double total = 0.0;
    for (int64_t j = 0; j < count; ++j) {
      w[j] = cubic_kernel((static_cast<double>(j + first) - center + 0.5) * inverse_scale);
      total += w[j];
    }
    if (total != 0.0)
      for (int64_t j = 0; j < count; ++j) {
        w[j] /= total;
        max_weight = std::max(max_weight, w[j]);
      }
    filter.start[static_cast<size_t>(i)] = first;
    filter.count[static_cast<size_t>(i)] = count;
  }
  filter.precision = fixed_point_precision(max_weight);
  filter.weights.resize(weights.size());
  const double unit = static_cast<double>(1 << filter.precision);
  for (size_t k = 0; k < weights.size(); ++k) {
    const double v = weights[k] * unit;
    filter.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return filter;
}

// One output sample: the fixed-point weighted sum of `count` inputs `stride` bytes apart, rounded and clamped.
uint8_t filter_sample(const uint8_t* first_input, int64_t stride, const AxisFilter& filter, int64_t output_index) {
  const int16_t* w = filter.weights.data() + output_index * filter.taps;
  int sum = 1 << (filter.precision - 1);
  for (int64_t j = 0; j < filter.count[static_cast<size_t>(output_index)]; ++j) sum += first_input[j * stride] * w[j];
  return static_cast<uint8_t>(std::clamp(sum >> filter.precision, 0, 255));
}

RgbImage resize_width(const RgbImage& image, int64_t width) {
  const AxisFilter filter = axis_filter(image.width, width);
  RgbImage out{image.height, width, std::vector<uint8_t>(static_cast<size_t>(image.height * width * 3))};
  for (int64_t y = 0; y < image.height; ++y) {
    const uint8_t* row = image.pixels.data() + y * image.width * 3;
    uint8_t* out_row = out.pixels.data() + y * width * 3;
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < 3; ++c)
        out_row[x * 3 + c] = filter_sample(row + filter.start[static_cast<size_t>(x)] * 3 + c, 3, filter, x);
  }
  return out;
}

RgbImage resize_height(const RgbImage& image, int64_t height) {
  const AxisFilter filter = axis_filter(image.height, height);
  const int64_t row_bytes = image.width * 3;
  RgbImage out{height, image.width, std::vector<uint8_t>(static_cast<size_t>(height * row_bytes))};
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* first_row = image.pixels.data() + filter.start[static_cast<size_t>(y)] * row_bytes;
    uint8_t* out_row = out.pixels.data() + y * row_bytes;
    for (int64_t k = 0; k < row_bytes; ++k) out_row[k] = filter_sample(first_row + k, row_bytes, filter, y);
  }
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int64_t height, int64_t width) {
  VEOMNI_CHECK(height > 0 && width > 0, "resize to {}x{}: sizes must be positive", height, width);
  VEOMNI_CHECK(image.height > 0 && image.width > 0 &&
                   static_cast<int64_t>(image.pixels.size()) == image.height * image.width * 3,
               "resize of a {}x{} image holding {} bytes", image.height, image.width, image.pixels.size());
  RgbImage out = width == image.width ? image : resize_width(image, width);
  return height == image.height ? out : resize_height(out, height);
}

}  // namespace veomni
