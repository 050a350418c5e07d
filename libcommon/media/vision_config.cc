// Vision processor settings: Qwen3-VL's defaults and reading a HF preprocessor_config.json over them.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "media/vision_processor.h"

namespace veomni {
namespace {

using nlohmann::json;

int64_t positive_int(const json& object, const char* key, int64_t fallback, const std::string& where) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  const json& value = object[key];
  VEOMNI_INPUT_CHECK(value.is_number_integer() && value.get<int64_t>() > 0,
                     "{}: key '{}' must be a positive integer, got {}", where, key, value.dump());
  return value.get<int64_t>();
}

double positive_number(const json& object, const char* key, double fallback, const std::string& where) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  const json& value = object[key];
  VEOMNI_INPUT_CHECK(value.is_number() && value.get<double>() > 0, "{}: key '{}' must be a positive number, got {}",
                     where, key, value.dump());
  return value.get<double>();
}

// A per-channel list of 3 numbers; a single number applies to all channels (as HF accepts).
std::array<double, 3> channel_values(const json& object, const char* key, std::array<double, 3> fallback,
                                     const std::string& where, bool must_be_nonzero) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  const json& value = object[key];
  std::array<double, 3> out{};
  if (value.is_number()) {
    out.fill(value.get<double>());
  } else {
    VEOMNI_INPUT_CHECK(value.is_array() && value.size() == 3, "{}: key '{}' must be 3 numbers (R, G, B), got {}", where,
                       key, value.dump());
    for (size_t c = 0; c < 3; ++c) {
      VEOMNI_INPUT_CHECK(value[c].is_number(), "{}: key '{}'[{}] must be a number, got {}", where, key, c,
                         value[c].dump());
      out[c] = value[c].get<double>();
    }
  }
  for (double v : out)
    VEOMNI_INPUT_CHECK(!must_be_nonzero || v != 0.0, "{}: key '{}' must not hold 0 (it divides)", where, key);
  return out;
}

// Steps HF would skip or change when these flags say so; we implement only the standard pipeline.
void check_standard_pipeline(const json& object, const std::string& where) {
  for (const char* flag : {"do_resize", "do_rescale", "do_normalize", "do_convert_rgb"}) {
    if (!object.contains(flag) || object[flag].is_null()) continue;
    VEOMNI_INPUT_CHECK(object[flag].is_boolean(), "{}: key '{}' must be true or false", where, flag);
    VEOMNI_INPUT_CHECK(object[flag].get<bool>(),
                       "{}: '{}: false' is not supported (only the standard Qwen-VL "
                       "pipeline is implemented)",
                       where, flag);
  }
  if (object.contains("resample") && !object["resample"].is_null())
    VEOMNI_INPUT_CHECK(object["resample"] == 3, "{}: key 'resample' must be 3 (bicubic), got {}", where,
                       object["resample"].dump());
}

// HF's constructor: size must hold both edges; min_pixels / max_pixels then override them.
void read_pixel_limits(const json& object, const std::string& where, VisionProcessorConfig& config) {
  if (object.contains("size") && !object["size"].is_null()) {
    const json& size = object["size"];
    VEOMNI_INPUT_CHECK(size.is_object() && size.contains("shortest_edge") && size.contains("longest_edge"),
                       "{}: key 'size' must hold 'shortest_edge' and 'longest_edge' (pixel counts), got {}", where,
                       size.dump());
    config.min_pixels = positive_int(size, "shortest_edge", config.min_pixels, where + " size");
    config.max_pixels = positive_int(size, "longest_edge", config.max_pixels, where + " size");
  }
  config.min_pixels = positive_int(object, "min_pixels", config.min_pixels, where);
  config.max_pixels = positive_int(object, "max_pixels", config.max_pixels, where);
  VEOMNI_INPUT_CHECK(config.min_pixels <= config.max_pixels, "{}: min pixels {} exceed max pixels {}", where,
                     config.min_pixels, config.max_pixels);
}

}  // namespace

VisionProcessorConfig qwen3_vl_image_config() { return VisionProcessorConfig{}; }

VisionProcessorConfig vision_config_from_json(const std::string& preprocessor_config_json_path,
                                              VisionProcessorConfig defaults) {
  const json root = read_json_file(preprocessor_config_json_path);
  VEOMNI_INPUT_CHECK(root.is_object(), "{}: expected a JSON object", preprocessor_config_json_path);
  // processor_config.json nests the image processor's settings; preprocessor_config.json has them at the top.
  const bool nested = root.contains("image_processor") && root["image_processor"].is_object();
  const json& object = nested ? root["image_processor"] : root;
  const std::string where = nested ? preprocessor_config_json_path + " image_processor" : preprocessor_config_json_path;

  check_standard_pipeline(object, where);
  VisionProcessorConfig config = defaults;
  read_pixel_limits(object, where, config);
  config.patch_size = positive_int(object, "patch_size", config.patch_size, where);
  config.temporal_patch_size = positive_int(object, "temporal_patch_size", config.temporal_patch_size, where);
  config.merge_size = positive_int(object, "merge_size", config.merge_size, where);
  config.image_mean = channel_values(object, "image_mean", config.image_mean, where, false);
  config.image_std = channel_values(object, "image_std", config.image_std, where, true);
  config.rescale_factor = positive_number(object, "rescale_factor", config.rescale_factor, where);
  return config;
}

}  // namespace veomni
