// Tests of io/json_config: a config key table read from and written to a flat JSON object.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_config.h"
#include "tests/common/expect_error.h"

using namespace veomni;
using nlohmann::json;

namespace {

struct Settings {
  bool flag = false;
  int64_t count = 1;
  double scale = 0.5;
  std::string mode = "a";
  std::vector<int64_t> layers;
};

ConfigSchema<Settings> schema() {
  ConfigSchema<Settings> s;
  s.add("flag", [](auto& c) -> auto& { return c.flag; }, "");
  s.add("count", [](auto& c) -> auto& { return c.count; }, "");
  s.add("scale", [](auto& c) -> auto& { return c.scale; }, "");
  s.add("mode", [](auto& c) -> auto& { return c.mode; }, "", {.choices = {"a", "b"}});
  s.add("layers", [](auto& c) -> auto& { return c.layers; }, "");
  return s;
}

Settings read_settings(const json& object) {
  const ConfigSchema<Settings> s = schema();
  Settings out;
  s.apply(out, json_assignments(object, "cfg.json", s.fields(), [](size_t) { return true; }));
  return out;
}

}  // namespace

TEST(JsonConfig, ReadsPresentKeysAndKeepsDefaultsForAbsentOrNull) {
  const Settings s = read_settings({{"flag", true}, {"count", 7}, {"scale", 2}, {"mode", nullptr}, {"other", "x"}});
  EXPECT_TRUE(s.flag);
  EXPECT_EQ(s.count, 7);
  EXPECT_EQ(s.scale, 2.0);  // an integer is a number
  EXPECT_EQ(s.mode, "a");   // null keeps the default
  EXPECT_TRUE(s.layers.empty());
  EXPECT_EQ(read_settings({{"layers", {1, 3}}}).layers, (std::vector<int64_t>{1, 3}));
}

TEST(JsonConfig, WrongTypesAndChoicesNameTheKey) {
  using veomni::testing::expect_input_error;
  expect_input_error([] { read_settings({{"count", 1.5}}); }, {"cfg.json", "'count'", "expected an integer", "1.5"});
  expect_input_error([] { read_settings({{"flag", 1}}); }, {"'flag'", "expected true or false"});
  expect_input_error([] { read_settings({{"scale", "big"}}); }, {"'scale'", "expected a number"});
  expect_input_error([] { read_settings({{"layers", {1, "2"}}}); }, {"'layers'", "a list of integers"});
  expect_input_error([] { read_settings({{"mode", "c"}}); }, {"'mode'", "\"c\" is not supported", "a, b"});
  expect_input_error([] { read_settings(json::array()); }, {"cfg.json", "expected a JSON object"});
}

TEST(JsonConfig, OnlyWantedFieldsAreRead) {
  const ConfigSchema<Settings> s = schema();
  Settings out;
  s.apply(out, json_assignments({{"count", 9}, {"flag", "not even a bool"}}, "cfg.json", s.fields(),
                                [](size_t i) { return i == 1; }));
  EXPECT_EQ(out.count, 9);
  EXPECT_FALSE(out.flag);
}

TEST(JsonConfig, ValuesWriteAsJson) {
  EXPECT_EQ(config_value_json(ConfigValue(true)), json(true));
  EXPECT_EQ(config_value_json(ConfigValue(int64_t{8})), json(8));
  EXPECT_EQ(config_value_json(ConfigValue(std::string("x"))), json("x"));
  EXPECT_EQ(config_value_json(ConfigValue(std::vector<int64_t>{1, 2})), json({1, 2}));
}
