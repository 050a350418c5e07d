// One case of an HF image-processor fixture (cases.json entry + <name>.safetensors) run through our decoder and processor.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "media/image_decode.h"
#include "media/vision_processor.h"

namespace veomni::test {

// The directory of the input files (images, audio, video) that the media tests decode.
inline const std::string kMediaInputs = std::string(VEOMNI_FIXTURES_DIR) + "/media/inputs/";

// A file's bytes, as the media decoders take them.
inline std::vector<uint8_t> media_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Decodes and processes the case's input with its pixel limits, checks the grid and row count against the fixture,
// and returns the largest |ours - HF| over the fixture's kept rows (every row_stride-th row). Row count is in *rows.
inline double image_fixture_max_error(const nlohmann::json& c, const std::string& inputs_dir,
                                      const std::string& fixtures_dir, int64_t* rows) {
  const std::string name = c["name"];
  SafetensorsReader fixture(fixtures_dir + name + ".safetensors");
  VisionProcessorConfig config = qwen3_vl_image_config();
  config.min_pixels = c["min_pixels"];
  config.max_pixels = c["max_pixels"];
  const VisionPatches ours = process_image(decode_image(inputs_dir + c["input"].get<std::string>()), config);
  const Tensor grid = fixture.read("image_grid_thw");
  EXPECT_EQ(grid.numel(), 3);
  for (int i = 0; i < 3 && i < grid.numel(); ++i) EXPECT_EQ(ours.grid_thw[i], grid.data<int64_t>()[i]);
  const Tensor expected = fixture.read("pixel_values");
  const int64_t stride = c["row_stride"];
  EXPECT_EQ(ours.pixel_values.dim(0), c["rows"].get<int64_t>());
  EXPECT_EQ(expected.dim(1), ours.pixel_values.dim(1));
  *rows = expected.dim(0);
  if (ours.pixel_values.dim(0) != c["rows"].get<int64_t>() || expected.dim(1) != ours.pixel_values.dim(1))
    return INFINITY;
  double max_error = 0;
  for (int64_t r = 0; r < expected.dim(0); ++r) {
    const float* e = expected.data<float>() + r * expected.dim(1);
    const float* o = ours.pixel_values.data<float>() + r * stride * expected.dim(1);
    for (int64_t k = 0; k < expected.dim(1); ++k) max_error = std::max(max_error, std::fabs(double(e[k]) - o[k]));
  }
  return max_error;
}

}  // namespace veomni::test
