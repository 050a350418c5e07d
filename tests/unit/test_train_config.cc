// Unit tests of io/yaml_config and train/train_config: YAML loading, command-line overrides, error messages, the
// to_yaml round trip, validation, batch layout, the recipes and the man page's key list.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <unistd.h>

#include "core/error.h"
#include "io/json_file.h"
#include "io/yaml_config.h"
#include "model/model_config.h"
#include "train/data_sources.h"
#include "train/train_config.h"
#include "tests/common/expect_error.h"

using namespace veomni;

namespace {

const std::string kRepoSource = VEOMNI_SOURCE_DIR;
const std::string kConfigFixtures = std::string(VEOMNI_FIXTURES_DIR) + "/configs";

using veomni::testing::input_error_of;

void expect_error_parts(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  const std::string message = input_error_of(fn);
  for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << message << "\n  lacks: " << f;
}

TrainConfig from_yaml(const std::string& text) { return train_config_from_yaml(text, "cfg.yaml"); }

TrainConfig with_overrides(const std::vector<std::string>& args) {
  TrainConfig c;
  apply_train_config_overrides(c, args);
  return c;
}

// A config that passes validate_train_config.
TrainConfig valid_train_config() {
  TrainConfig c;
  c.model.config_path = "configs/model_configs/qwen3_toy";
  c.data.train_path = "data.h5";
  c.train.global_batch_size = 8;
  return c;
}

class ConfigTempDir {
 public:
  ConfigTempDir()
      : path_(std::filesystem::temp_directory_path() / ("veomni_train_config_" + std::to_string(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ConfigTempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace

TEST(TrainConfig, DefaultsAreVeOmnis) {
  const TrainConfig c;
  EXPECT_EQ(c.train.optimizer.lr, 5e-5);
  EXPECT_EQ(c.train.optimizer.lr_min, 1e-7);
  EXPECT_EQ(c.train.optimizer.lr_decay_style, "constant");
  EXPECT_EQ(c.train.optimizer.max_grad_norm, 1.0);
  EXPECT_EQ(c.train.optimizer.betas, (std::vector<double>{0.9, 0.95}));
  EXPECT_EQ(c.train.optimizer.eps, 1e-8);
  EXPECT_EQ(c.train.micro_batch_size, 1);
  EXPECT_EQ(c.train.global_batch_size, -1);
  EXPECT_EQ(c.train.seed, 42);
  EXPECT_EQ(c.data.max_seq_len, 2048);
  EXPECT_TRUE(c.train.gradient_checkpointing.enable);
  EXPECT_TRUE(c.train.accelerator.fsdp_config.mixed_precision.enable);
  EXPECT_EQ(c.train.accelerator.fsdp_config.mixed_precision.param_dtype, "bfloat16");
  EXPECT_EQ(c.train.checkpoint.output_dir, "output");
  EXPECT_EQ(c.compute_dtype(), DType::BF16);
  EXPECT_EQ(c.reduce_dtype(), DType::F32);
}

TEST(TrainConfig, EmptyYamlKeepsDefaults) {
  EXPECT_EQ(from_yaml(""), TrainConfig());
  EXPECT_EQ(from_yaml("# nothing\n"), TrainConfig());
  EXPECT_EQ(from_yaml("train:\n"), TrainConfig());
}

TEST(TrainConfig, ParsesNestedYaml) {
  const TrainConfig c = from_yaml(R"(
model:
  config_path: configs/model_configs/qwen3_toy
data:
  train_path: "d.h5"
  max_seq_len: 512
  dataloader: {shuffle: off}
train:
  global_batch_size: 16
  max_steps: null
  abort_on_nan: No
  optimizer:
    lr: 1e-4
    lr_decay_style: cosine
    betas:
      - 0.85
      - 0.9
  accelerator:
    ulysses_size: 2
    fsdp_config:
      mixed_precision:
        enable: false
  checkpoint:
    load_path: ~
)");
  EXPECT_EQ(c.model.config_path, "configs/model_configs/qwen3_toy");
  EXPECT_EQ(c.data.train_path, "d.h5");
  EXPECT_EQ(c.data.max_seq_len, 512);
  EXPECT_FALSE(c.data.dataloader.shuffle);
  EXPECT_EQ(c.train.global_batch_size, 16);
  EXPECT_EQ(c.train.max_steps, -1);  // null means -1 for this key
  EXPECT_FALSE(c.train.abort_on_nan);
  EXPECT_EQ(c.train.optimizer.lr, 1e-4);
  EXPECT_EQ(c.train.optimizer.lr_decay_style, "cosine");
  EXPECT_EQ(c.train.optimizer.betas, (std::vector<double>{0.85, 0.9}));
  EXPECT_EQ(c.train.accelerator.ulysses_size, 2);
  EXPECT_FALSE(c.train.accelerator.fsdp_config.mixed_precision.enable);
  EXPECT_EQ(c.compute_dtype(), DType::F32);
  EXPECT_EQ(c.train.checkpoint.load_path, "");
  // Untouched keys keep their defaults.
  EXPECT_EQ(c.train.micro_batch_size, 1);
  EXPECT_EQ(c.train.optimizer.eps, 1e-8);
}

TEST(TrainConfig, LoadsEveryKeyFixture) {
  const TrainConfig c = load_train_config(kConfigFixtures + "/every_key.yaml");
  EXPECT_EQ(c.model.model_path, "/ckpt/Qwen3-30B-A3B");
  EXPECT_EQ(c.model.tokenizer_path, "/tok/with: colon # and hash");
  EXPECT_FALSE(c.data.dataloader.shuffle);
  EXPECT_EQ(c.train.global_batch_size, 64);
  EXPECT_EQ(c.train.micro_batch_size, 2);
  EXPECT_EQ(c.train.num_train_epochs, 3);
  EXPECT_EQ(c.train.max_steps, 100);
  EXPECT_EQ(c.train.seed, 7);
  EXPECT_EQ(c.train.log_steps, 10);
  EXPECT_EQ(c.train.device, "cpu");
  EXPECT_EQ(c.train.precision, "fp32");
  EXPECT_EQ(c.train.optimizer.lr, 3e-4);
  EXPECT_EQ(c.train.optimizer.lr_warmup_ratio, 0.05);
  EXPECT_EQ(c.train.optimizer.betas, (std::vector<double>{0.8, 0.99}));
  EXPECT_EQ(c.train.accelerator.ep_size, 4);
  EXPECT_EQ(c.train.accelerator.dist_timeout, 1800);
  EXPECT_EQ(c.train.accelerator.fsdp_config.mixed_precision.reduce_dtype, "bfloat16");
  EXPECT_EQ(c.compute_dtype(), DType::F32);  // mixed precision is off
  EXPECT_EQ(c.reduce_dtype(), DType::F32);
  EXPECT_EQ(c.train.checkpoint.output_dir, "runs/every key");
  EXPECT_EQ(c.train.checkpoint.save_total_limit, 3);
  EXPECT_EQ(c.train.checkpoint.load_path, "runs/every key/checkpoints/global_step_50");
  EXPECT_EQ(c.model.lora_config.lora_modules, (std::vector<std::string>{"q_proj", "v_proj", "experts.down_proj"}));
  EXPECT_NO_THROW(validate_train_config(c));
  // The fixture moves every key off its default (a protobuf build's, for train.use_tensorboard), so it exercises
  // the whole table.
  EXPECT_FALSE(c.train.use_tensorboard);
  const auto& schema = train_config_schema();
  TrainConfig with_protobuf;
  with_protobuf.train.use_tensorboard = true;
  const auto defaults = schema.values(with_protobuf);
  const auto values = schema.values(c);
  for (size_t i = 0; i < values.size(); ++i)
    // adamw is the only optimizer, sft the only objective this version trains (the others are refused);
    // data.datasets excludes data.train_path (the Datasets tests load it); train.accelerator.fp8 needs CUDA with bf16
    // compute, and the fixture trains on the CPU in fp32 (ValidateErrors checks the refusal).
    if (schema.fields()[i].key != "train.optimizer.type" && schema.fields()[i].key != "train.objective" &&
        schema.fields()[i].key != "data.datasets" && schema.fields()[i].key != "train.accelerator.fp8") {
      EXPECT_NE(values[i], defaults[i]) << schema.fields()[i].key;
    }
}

TEST(TrainConfig, PrecisionFp32OverridesMixedPrecision) {
  TrainConfig c;
  c.train.accelerator.fsdp_config.mixed_precision.enable = true;
  c.train.accelerator.fsdp_config.mixed_precision.reduce_dtype = "bfloat16";
  EXPECT_EQ(c.compute_dtype(), DType::BF16);
  EXPECT_EQ(c.reduce_dtype(), DType::BF16);
  c.train.precision = "fp32";
  EXPECT_EQ(c.compute_dtype(), DType::F32);
  EXPECT_EQ(c.reduce_dtype(), DType::F32);
}

TEST(TrainConfig, DeviceAndPrecisionChoicesAreChecked) {
  TrainConfig c;
  EXPECT_THROW(apply_train_config_overrides(c, {"--train.device", "tpu"}), InputError);
  EXPECT_THROW(apply_train_config_overrides(c, {"--train.precision", "fp8"}), InputError);
  apply_train_config_overrides(c, {"--train.device=cuda", "--train.precision", "fp32"});
  EXPECT_EQ(c.train.device, "cuda");
  EXPECT_EQ(c.train.precision, "fp32");
}

TEST(TrainConfig, OverridesBothSyntaxes) {
  const TrainConfig c = with_overrides({"--train.optimizer.lr", "1e-4", "--train.optimizer.lr_min=2e-6",
                                        "--train.accelerator.ulysses_size", "4", "--train.max_steps=-1",
                                        "--train.seed", "-0", "--data.train_path", "/x/y.h5",
                                        "--train.checkpoint.output_dir=a=b"});
  EXPECT_EQ(c.train.optimizer.lr, 1e-4);
  EXPECT_EQ(c.train.optimizer.lr_min, 2e-6);
  EXPECT_EQ(c.train.accelerator.ulysses_size, 4);
  EXPECT_EQ(c.train.max_steps, -1);
  EXPECT_EQ(c.train.seed, 0);
  EXPECT_EQ(c.data.train_path, "/x/y.h5");
  EXPECT_EQ(c.train.checkpoint.output_dir, "a=b");  // only the first '=' separates
}

TEST(TrainConfig, OverrideBools) {
  EXPECT_FALSE(with_overrides({"--data.dataloader.shuffle", "false"}).data.dataloader.shuffle);
  EXPECT_FALSE(with_overrides({"--data.dataloader.shuffle=0"}).data.dataloader.shuffle);
  TrainConfig c;
  c.train.abort_on_nan = false;
  c.train.gradient_checkpointing.enable = false;
  apply_train_config_overrides(c, {"--train.abort_on_nan", "--train.gradient_checkpointing.enable", "yes"});
  EXPECT_TRUE(c.train.abort_on_nan);  // a bool key alone means true
  EXPECT_TRUE(c.train.gradient_checkpointing.enable);
  c.train.abort_on_nan = false;
  apply_train_config_overrides(c, {"--train.abort_on_nan"});  // also as the last argument
  EXPECT_TRUE(c.train.abort_on_nan);
  expect_error_parts([] { with_overrides({"--train.abort_on_nan", "maybe"}); },
                     {"command line --train.abort_on_nan", "expects bool", "'maybe'"});
}

TEST(TrainConfig, OverrideLists) {
  const std::vector<double> expected = {0.8, 0.9};
  EXPECT_EQ(with_overrides({"--train.optimizer.betas", "0.8", "0.9"}).train.optimizer.betas, expected);
  EXPECT_EQ(with_overrides({"--train.optimizer.betas=0.8,0.9"}).train.optimizer.betas, expected);
  EXPECT_EQ(with_overrides({"--train.optimizer.betas", "[0.8, 0.9]"}).train.optimizer.betas, expected);
  EXPECT_EQ(with_overrides({"--train.optimizer.betas", "0.8,", "0.9", "--train.seed", "3"}).train.optimizer.betas,
            expected);
  EXPECT_TRUE(with_overrides({"--train.optimizer.betas=[]"}).train.optimizer.betas.empty());
  expect_error_parts([] { with_overrides({"--train.optimizer.betas", "0.8", "high"}); },
                     {"--train.optimizer.betas", "expects list of float", "'high'"});
}

TEST(TrainConfig, OverridesApplyAfterTheFileAndLastWins) {
  const ConfigTempDir dir;
  const std::string path = dir.file("cfg.yaml");
  std::ofstream(path) << "model:\n  config_path: m\ndata:\n  train_path: d.h5\ntrain:\n  global_batch_size: 4\n";
  const TrainConfig c = load_train_config(path, {"--train.global_batch_size", "8", "--train.global_batch_size=16"});
  EXPECT_EQ(c.train.global_batch_size, 16);
  EXPECT_EQ(c.data.train_path, "d.h5");
}

TEST(TrainConfig, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer:\n    lrr: 1e-4\n"); }),
            "unknown key 'train.optimizer.lrr' in cfg.yaml line 3 (did you mean 'train.optimizer.lr'?)");
  EXPECT_EQ(input_error_of([] { with_overrides({"--train.optimizer.lrr", "1e-4"}); }),
            "unknown key 'train.optimizer.lrr' in command-line override '--train.optimizer.lrr' "
            "(did you mean 'train.optimizer.lr'?)");
  // A key in the wrong section is found by its last component.
  expect_error_parts([] { from_yaml("train:\n  lr: 1e-4\n"); },
                     {"unknown key 'train.lr'", "line 2", "did you mean 'train.optimizer.lr'?"});
  // A misspelt section.
  expect_error_parts([] { from_yaml("train:\n  optimiser:\n    lr: 1e-4\n"); },
                     {"unknown key 'train.optimiser'", "did you mean 'train.optimizer'?"});
  // Far from everything: no suggestion.
  EXPECT_EQ(input_error_of([] { from_yaml("wandb:\n  project: x\n"); }), "unknown key 'wandb' in cfg.yaml line 1");
}

TEST(TrainConfig, WrongTypeNamesKeyTypeValueAndLine) {
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  seed: 1\n  global_batch_size: eight\n"); }),
            "cfg.yaml line 3: 'train.global_batch_size' expects int, got 'eight'");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer:\n    lr: fast\n"); }),
            "cfg.yaml line 3: 'train.optimizer.lr' expects float, got 'fast'");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  micro_batch_size: 1.5\n"); }),
            "cfg.yaml line 2: 'train.micro_batch_size' expects int, got '1.5'");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer:\n    betas: 0.9\n"); }),
            "cfg.yaml line 3: 'train.optimizer.betas' expects list of float, got '0.9'");
  EXPECT_EQ(input_error_of([] { from_yaml("data:\n  train_path: [a, b]\n"); }),
            "cfg.yaml line 2: 'data.train_path' expects string, got a list");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  seed: {a: 1}\n"); }),
            "cfg.yaml line 2: 'train.seed' expects int, got a mapping");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  seed:\n"); }), "cfg.yaml line 2: 'train.seed' expects int, got null");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer:\n    betas: [0.9, [1]]\n"); }),
            "cfg.yaml line 3: 'train.optimizer.betas' expects list of float, got a list inside the list");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer: 1e-4\n"); }),
            "cfg.yaml line 2: 'train.optimizer' is a section: expected a mapping of its keys, got '1e-4'");
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer:\n    lr: .nan\n"); }),
            "cfg.yaml line 3: 'train.optimizer.lr' expects float, got '.nan'");
}

TEST(TrainConfig, ChoicesAreChecked) {
  EXPECT_EQ(input_error_of([] { from_yaml("train:\n  optimizer:\n    lr_decay_style: cosin\n"); }),
            "cfg.yaml line 3: 'train.optimizer.lr_decay_style' must be one of constant, linear, cosine, got 'cosin'");
  expect_error_parts([] { with_overrides({"--train.accelerator.fsdp_config.mixed_precision.param_dtype", "float16"}); },
                     {"param_dtype", "bfloat16, float32", "'float16'"});
  expect_error_parts([] { with_overrides({"--train.optimizer.type=sgd"}); }, {"train.optimizer.type", "adamw", "'sgd'"});
}

TEST(TrainConfig, RejectsMalformedInput) {
  expect_error_parts([] { from_yaml("train:\n  seed: 1\n  seed: 2\n"); }, {"cfg.yaml line 3", "'train.seed' appears twice"});
  expect_error_parts([] { from_yaml("train:\n  seed: [1\n"); }, {"cfg.yaml line", "invalid YAML"});
  expect_error_parts([] { from_yaml("- a\n- b\n"); }, {"cfg.yaml line 1", "mapping of sections"});
  // yaml-cpp 0.7's LoadAll never returned on a ',' after a document's value: now refused where it stands.
  expect_error_parts([] { from_yaml("--- \",\","); }, {"cfg.yaml line 1, column 8", "',' cannot follow", "quote"});
  expect_error_parts([] { from_yaml("[a]\n  , b\n"); }, {"cfg.yaml line 2, column 3", "',' cannot follow"});
  expect_error_parts([] { from_yaml("{a: 1} ,\n"); }, {"cfg.yaml line 1, column 8", "',' cannot follow"});
  expect_error_parts([] { from_yaml("---\n  !t ,\n"); }, {"cfg.yaml line 2, column 6", "cannot begin with ','"});
  expect_error_parts([] { with_overrides({"1e-4"}); }, {"unexpected command-line argument '1e-4'"});
  expect_error_parts([] { with_overrides({"--train.seed"}); }, {"--train.seed", "needs a value"});
  expect_error_parts([] { with_overrides({"--train.seed", "--train.max_steps", "3"}); }, {"needs a value"});
  expect_error_parts([] { with_overrides({"--train.optimizer", "x"}); }, {"'train.optimizer' is a section"});
  expect_error_parts([] { load_train_config("/nonexistent/cfg.yaml"); }, {"/nonexistent/cfg.yaml"});
}

TEST(TrainConfig, ToYamlRoundTrips) {
  for (const TrainConfig& original : {TrainConfig(), load_train_config(kConfigFixtures + "/every_key.yaml")}) {
    const std::string text = train_config_to_yaml(original);
    EXPECT_EQ(from_yaml(text), original) << text;
    EXPECT_EQ(train_config_to_yaml(from_yaml(text)), text);
  }
  TrainConfig odd;
  odd.model.tokenizer_path = "yes";  // would read as a bool unquoted
  odd.data.train_path = "quote \" backslash \\ tab \t newline \n unicode é";
  odd.train.checkpoint.load_path = "- [not: a list]";
  odd.train.optimizer.lr = 1.0 / 3.0;
  odd.train.optimizer.eps = 1e-300;
  odd.train.optimizer.lr_min = 2.0;
  odd.train.optimizer.betas = {};
  odd.train.max_steps = -1;
  EXPECT_EQ(from_yaml(train_config_to_yaml(odd)), odd) << train_config_to_yaml(odd);
}

TEST(TrainConfig, ToYamlListsEveryKeyBySection) {
  const std::string text = train_config_to_yaml(TrainConfig());
  EXPECT_EQ(text.rfind("model:\n  config_path: \"\"\n  model_path: \"\"\n", 0), 0u) << text;
  EXPECT_NE(text.find("\n\ndata:\n  train_path: \"\"\n  eval_path: \"\"\n  datasets: []\n  chat_template: \"\"\n"
                      "  max_seq_len: 2048\n"
                      "  dataloader:\n"
                      "    shuffle: true\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  optimizer:\n    type: \"adamw\"\n    lr: 5.0e-05\n    lr_min: 1.0e-07\n"
                      "    lr_warmup_ratio: 0.0\n    lr_decay_style: \"constant\"\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    betas: [0.9, 0.95]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  accelerator:\n    ulysses_size: 1\n    ep_size: 1\n    dist_timeout: 600.0\n    fp8: false\n"
                      "    fsdp_config:\n"
                      "      mixed_precision:\n"
                      "        enable: true\n"),
            std::string::npos)
      << text;
  // One line per key plus one per section header and the blank lines between the three top sections.
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  const size_t sections = 3 + 1 + 1 + 3 + 1 + 2 + 1 + 1 + 1 + 1 + 1;  // model data train, lora_config,
                                                                      // dataloader, dpo_config actor critic,
                                                                      // gradient_checkpointing, kernels op_profile,
                                                                      // optimizer, accelerator, fsdp_config,
                                                                      // mixed_precision, checkpoint
  EXPECT_EQ(lines, train_config_schema().fields().size() + sections + 2);
}

TEST(TrainConfig, FormatsValuesAsYaml) {
  EXPECT_EQ(format_config_value(true), "true");
  EXPECT_EQ(format_config_value(int64_t{-3}), "-3");
  EXPECT_EQ(format_config_value(1.0), "1.0");
  EXPECT_EQ(format_config_value(-2.5), "-2.5");
  EXPECT_EQ(format_config_value(0.1), "0.1");
  EXPECT_EQ(format_config_value(5e-5), "5.0e-05");  // PyYAML reads "5e-05" as a string
  EXPECT_EQ(format_config_value(1.5e16), "1.5e+16");
  EXPECT_EQ(format_config_value(1e16), "1.0e+16");
  EXPECT_EQ(format_config_value(std::string("a \"b\"")), "\"a \\\"b\\\"\"");
  EXPECT_EQ(format_config_value(std::vector<double>{0.9, 1.0}), "[0.9, 1.0]");
  EXPECT_EQ(format_config_value(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(format_config_value(std::vector<std::string>{"x", "y z"}), "[\"x\", \"y z\"]");
}

TEST(TrainConfig, SaveAndLoadBack) {
  const ConfigTempDir dir;
  TrainConfig c = load_train_config(kConfigFixtures + "/every_key.yaml");
  c.train.optimizer.lr = 0.000123;
  save_train_config(c, dir.file("veomni_cli.yaml"));
  EXPECT_EQ(load_train_config(dir.file("veomni_cli.yaml")), c);
}

TEST(TrainConfig, ValidateAcceptsAValidConfig) { EXPECT_NO_THROW(validate_train_config(valid_train_config())); }

TEST(TrainConfig, ValidateErrors) {
  struct Case {
    std::function<void(TrainConfig&)> edit;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {[](TrainConfig& c) { c.model.config_path.clear(); }, "model.config_path and model.model_path are both empty"},
      {[](TrainConfig& c) { c.data.train_path.clear(); }, "data.train_path is empty"},
      {[](TrainConfig& c) { c.data.max_seq_len = 0; }, "data.max_seq_len must be positive"},
      {[](TrainConfig& c) { c.train.micro_batch_size = 3; },
       "train.global_batch_size (8) must be a multiple of train.micro_batch_size (3)"},
      {[](TrainConfig& c) { c.train.micro_batch_size = 0; }, "train.micro_batch_size must be positive"},
      {[](TrainConfig& c) { c.train.global_batch_size = 0; }, "train.global_batch_size must be positive or -1"},
      {[](TrainConfig& c) { c.train.num_train_epochs = 0; }, "train.num_train_epochs must be positive"},
      {[](TrainConfig& c) { c.train.max_steps = 0; }, "train.max_steps must be positive or -1"},
      {[](TrainConfig& c) { c.train.seed = -1; }, "train.seed must be >= 0"},
      {[](TrainConfig& c) { c.train.log_steps = 0; }, "train.log_steps must be positive"},
      {[](TrainConfig& c) {
         c.train.micro_batch_size = 4;
         c.data.max_seq_len = int64_t{1} << 62;  // the product wrapped to a token budget of 0
       },
       "train.micro_batch_size (4) x data.max_seq_len (4611686018427387904) tokens per micro-batch exceed"},
      {[](TrainConfig& c) { c.train.optimizer.lr = 0; }, "train.optimizer.lr must be positive"},
      {[](TrainConfig& c) { c.train.optimizer.lr_min = 1.0; }, "train.optimizer.lr_min must be in [0, train.optimizer.lr"},
      {[](TrainConfig& c) { c.train.optimizer.lr_warmup_ratio = 1.5; },
       "train.optimizer.lr_warmup_ratio must be in [0, 1], got 1.5"},
      {[](TrainConfig& c) { c.train.optimizer.lr_warmup_ratio = -0.1; }, "lr_warmup_ratio must be in [0, 1]"},
      {[](TrainConfig& c) { c.train.optimizer.lr_decay_style = "step"; },
       "train.optimizer.lr_decay_style must be one of constant, linear, cosine, got 'step'"},
      {[](TrainConfig& c) { c.train.optimizer.weight_decay = -1; }, "train.optimizer.weight_decay must be >= 0"},
      {[](TrainConfig& c) { c.train.optimizer.max_grad_norm = -1; }, "train.optimizer.max_grad_norm must be >= 0"},
      {[](TrainConfig& c) { c.train.optimizer.betas = {0.9, 0.95, 0.99}; }, "train.optimizer.betas must be two values"},
      {[](TrainConfig& c) { c.train.optimizer.betas = {0.9, 1.0}; }, "train.optimizer.betas must be two values"},
      {[](TrainConfig& c) { c.train.optimizer.eps = 0; }, "train.optimizer.eps must be positive"},
      {[](TrainConfig& c) { c.train.accelerator.ulysses_size = 0; }, "train.accelerator.ulysses_size must be >= 1"},
      {[](TrainConfig& c) { c.train.accelerator.ep_size = 0; }, "train.accelerator.ep_size must be >= 1"},
      {[](TrainConfig& c) { c.train.accelerator.fsdp_config.mixed_precision.reduce_dtype = "float16"; },
       "train.accelerator.fsdp_config.mixed_precision.reduce_dtype must be one of float32, bfloat16, got 'float16'"},
      {[](TrainConfig& c) {
         c.train.accelerator.fp8 = true;
         c.train.device = "cpu";
       },
       "train.accelerator.fp8 needs a CUDA device, but train.device is cpu"},
      {[](TrainConfig& c) {
         c.train.accelerator.fp8 = true;
         c.train.precision = "fp32";
       },
       "train.accelerator.fp8 needs bf16 compute, but it is float32 (train.precision fp32"},
      {[](TrainConfig& c) {
         c.train.accelerator.fp8 = true;
         c.train.accelerator.fsdp_config.mixed_precision.param_dtype = "float32";
       },
       "train.accelerator.fp8 needs bf16 compute, but it is float32"},
      {[](TrainConfig& c) { c.train.checkpoint.output_dir.clear(); }, "train.checkpoint.output_dir is empty"},
      {[](TrainConfig& c) { c.train.checkpoint.save_steps = -2; }, "train.checkpoint.save_steps must be >= -1"},
      {[](TrainConfig& c) { c.train.checkpoint.save_total_limit = -2; }, "train.checkpoint.save_total_limit must be >= 0"},
      {[](TrainConfig& c) { c.train.eval_steps = -1; }, "train.eval_steps must be >= 0"},
      {[](TrainConfig& c) { c.train.eval_batches = -1; }, "train.eval_batches must be >= 0"},
      {[](TrainConfig& c) { c.train.checkpoint.hf_save_steps = -1; }, "train.checkpoint.hf_save_steps must be >= 0"},
      {[](TrainConfig& c) {
         c.train.checkpoint.save_hf_weights = true;
         c.train.checkpoint.save_steps = -1;
       },
       "train.checkpoint.save_hf_weights needs checkpoints"},
      {[](TrainConfig& c) {
         c.train.checkpoint.save_hf_weights = true;
         c.model.lora_config.rank = 4;
       },
       "train.checkpoint.save_hf_weights merges the LoRA adapters into the base model of model.model_path"},
  };
  for (const Case& test : cases) {
    TrainConfig c = valid_train_config();
    test.edit(c);
    expect_error_parts([&] { validate_train_config(c); }, {"invalid config: ", test.fragment});
  }
}

TEST(TrainConfig, LoaderValidatesAndNamesTheFile) {
  const ConfigTempDir dir;
  const std::string path = dir.file("cfg.yaml");
  std::ofstream(path) << "model:\n  config_path: m\ndata:\n  train_path: d.h5\n";
  EXPECT_EQ(input_error_of([&] { load_train_config(path, {"--train.optimizer.lr_warmup_ratio", "2"}); }),
            path + " (with command-line overrides): invalid config: train.optimizer.lr_warmup_ratio must be in [0, 1], "
                   "got 2");
}

TEST(TrainConfig, BatchLayout) {
  TrainConfig c = valid_train_config();
  c.train.accelerator.ulysses_size = 2;
  BatchLayout l = resolve_batch_layout(c, 4);
  EXPECT_EQ(l.dp_size, 2);
  EXPECT_EQ(l.global_batch_size, 8);
  EXPECT_EQ(l.micro_batch_size, 1);
  EXPECT_EQ(l.grad_accum_steps, 4);

  c.train.global_batch_size = -1;
  c.train.micro_batch_size = 3;
  l = resolve_batch_layout(c, 4);
  EXPECT_EQ(l.global_batch_size, 6);
  EXPECT_EQ(l.grad_accum_steps, 1);

  expect_error_parts([&] { resolve_batch_layout(c, 3); }, {"world size (3)", "ulysses_size (2)"});
  c.train.accelerator.ulysses_size = 1;
  c.train.accelerator.ep_size = 4;
  expect_error_parts([&] { resolve_batch_layout(c, 2); }, {"world size (2)", "ep_size (4)"});
  c = valid_train_config();
  c.train.global_batch_size = 6;
  expect_error_parts([&] { resolve_batch_layout(c, 4); },
                     {"train.global_batch_size (6)", "micro_batch_size (1) x data-parallel size (4"});
}

TEST(TrainConfig, ParallelLayoutAgainstTheModel) {
  const ModelConfig dense = load_model_config(kRepoSource + "/configs/model_configs/qwen3_toy");  // 4 heads, 2 kv
  const ModelConfig moe = load_model_config(kRepoSource + "/configs/model_configs/qwen3_moe_toy");  // 8 experts
  TrainConfig c = valid_train_config();
  EXPECT_NO_THROW(validate_parallel_layout(c, dense));
  c.train.accelerator.ep_size = 2;
  expect_error_parts([&] { validate_parallel_layout(c, dense); }, {"ep_size is 2", "no experts"});
  EXPECT_NO_THROW(validate_parallel_layout(c, moe));
  c.train.accelerator.ep_size = 3;
  expect_error_parts([&] { validate_parallel_layout(c, moe); }, {"ep_size (3) must divide the number of experts (8)"});
  c.train.accelerator.ep_size = 1;
  c.train.accelerator.ulysses_size = 4;  // a multiple of the 2 kv heads: they are repeated
  EXPECT_NO_THROW(validate_parallel_layout(c, dense));
  c.train.accelerator.ulysses_size = 3;
  expect_error_parts([&] { validate_parallel_layout(c, dense); }, {"ulysses_size (3) must divide num_attention_heads (4)"});
}

TEST(TrainConfig, TotalTrainSteps) {
  TrainConfig c;
  c.train.num_train_epochs = 2;
  EXPECT_EQ(c.total_train_steps(32), 64);
  c.train.max_steps = 8;  // per epoch, as in VeOmni
  EXPECT_EQ(c.total_train_steps(32), 16);
  c.train.max_steps = 100;
  EXPECT_EQ(c.total_train_steps(32), 64);
}

TEST(TrainConfig, ResolvedModelConfigPath) {
  TrainConfig c;
  c.model.model_path = "/ckpt";
  EXPECT_EQ(c.resolved_model_config_path(), "/ckpt");
  c.model.config_path = "/cfg/config.json";
  EXPECT_EQ(c.resolved_model_config_path(), "/cfg/config.json");
}

TEST(TrainConfig, RecipesLoadAndValidate) {
  for (const char* name : {"qwen3_toy", "qwen3_moe_toy"}) {
    const TrainConfig c = load_train_config(kRepoSource + "/configs/" + name + ".yaml", {"--data.train_path", "x.h5"});
    EXPECT_EQ(c.model.config_path, std::string("configs/model_configs/") + name);
    EXPECT_EQ(c.data.train_path, "x.h5");
    EXPECT_EQ(c.train.global_batch_size, 8);
    EXPECT_EQ(c.train.micro_batch_size, 1);
    EXPECT_EQ(c.train.max_steps, 8);
    EXPECT_EQ(c.compute_dtype(), DType::F32);
    const ModelConfig model = load_model_config(kRepoSource + "/" + c.model.config_path);
    EXPECT_NO_THROW(validate_parallel_layout(c, model));
    EXPECT_EQ(resolve_batch_layout(c, 2).grad_accum_steps, 4);
  }
}

TEST(TrainConfig, ManPageListsEveryKeyWithItsDefault) {
  const std::string page = read_text_file(kRepoSource + "/man/veomni-config.5");
  const auto& schema = train_config_schema();
  TrainConfig documented;
  documented.train.use_tensorboard = true;  // the page gives the default of a build with protobuf
  const auto defaults = schema.values(documented);
  for (size_t i = 0; i < schema.fields().size(); ++i) {
    const ConfigFieldSpec& f = schema.fields()[i];
    // Each key has an entry ".TP" / "\fBkey\fR (type, default value)".
    std::string value = format_config_value(defaults[i]);
    std::string escaped;
    for (char ch : value) escaped += ch == '\\' ? std::string("\\e") : ch == '-' ? std::string("\\-") : std::string(1, ch);
    const std::string entry = fmt::format("\\fB{}\\fR ({}, default {})", f.key, config_type_name(f.type), escaped);
    EXPECT_NE(page.find(entry), std::string::npos) << "man/veomni-config.5 lacks: " << entry;
  }
}

namespace {

// data.datasets: a YAML list of mappings, bare paths, command-line entries in braces, and the checks.
TEST(TrainConfig, DatasetsTakeMappingsPathsAndOverrides) {
  const TrainConfig c = from_yaml(
      "data:\n  datasets:\n    - {path: data/math.h5, weight: 0.7, name: math}\n    - path: data/code-00000-of-00002.h5\n"
      "      weight: 0.3\n    - data/chat.h5\n");
  const std::vector<DataSourceSpec> sources = parse_data_sources(c.data.datasets);
  ASSERT_EQ(sources.size(), 3u);
  EXPECT_EQ(sources[0], (DataSourceSpec{"data/math.h5", 0.7, "math"}));
  EXPECT_EQ(sources[1], (DataSourceSpec{"data/code-00000-of-00002.h5", 0.3, "code_00000_of_00002"}));
  EXPECT_EQ(sources[2], (DataSourceSpec{"data/chat.h5", 1.0, "chat"}));
  // The saved config loads back to the same sources.
  const TrainConfig back = from_yaml(train_config_to_yaml(c));
  EXPECT_EQ(parse_data_sources(back.data.datasets), sources);
  const TrainConfig cli = with_overrides({"--data.datasets", "{path: a.h5, weight: 2}", "{path: b.h5, name: bee}"});
  const std::vector<DataSourceSpec> from_cli = parse_data_sources(cli.data.datasets);
  ASSERT_EQ(from_cli.size(), 2u);
  EXPECT_EQ(from_cli[0], (DataSourceSpec{"a.h5", 2.0, "a"}));
  EXPECT_EQ(from_cli[1], (DataSourceSpec{"b.h5", 1.0, "bee"}));
}

TEST(TrainConfig, DatasetsErrorsNameTheEntryAndKey) {
  TrainConfig both = valid_train_config();
  both.data.datasets = {"{path: a.h5}"};
  expect_error_parts([&] { validate_train_config(both); }, {"data.train_path and data.datasets are both set"});
  TrainConfig mixed = valid_train_config();
  mixed.data.train_path.clear();
  mixed.data.datasets = {"{path: a.h5, weight: 2}", "b.h5"};
  EXPECT_NO_THROW(validate_train_config(mixed));
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"{weight: 2}"}, {"data.datasets[0]", "no 'path'"}},
      {{"a.h5", "{path: b.h5, weight: -1}"}, {"data.datasets[1].weight", "-1"}},
      {{"{path: b.h5, weight: heavy}"}, {"data.datasets[0].weight", "'heavy' is not a number"}},
      {{"{path: b.h5, wieght: 2}"}, {"data.datasets[0]", "unknown key 'wieght'"}},
      {{"{path: b.h5, name: my-set}"}, {"data.datasets[0].name", "'my-set'", "letters, digits and '_'"}},
      {{"x/a.h5", "y/a.h5"}, {"data.datasets[1].name", "'a' names another entry"}},
      {{"{path: a.h5, weight: 0}", "{path: b.h5, weight: 0}"}, {"data.datasets", "the weights sum to 0"}},
  };
  for (const auto& [entries, fragments] : cases) {
    TrainConfig c = mixed;
    c.data.datasets = entries;
    const std::string message = input_error_of([&] { validate_train_config(c); });
    for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << message << "\n  lacks: " << f;
  }
  expect_error_parts([&] { from_yaml("data:\n  datasets:\n    - [a.h5]\n"); }, {"cfg.yaml line 2", "data.datasets"});
}

}  // namespace
